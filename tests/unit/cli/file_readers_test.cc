// The files `kiln cluster up` writes, read back by the programs that read
// them for real: `ssh -G -F` (what ssh would do for each alias),
// `ansible-inventory --list` (what Ansible sees) and `ssh-keygen -F` (which
// key ssh would accept). Each reader missing on this machine makes its case
// skipped, not passed (scripts/install-deps installs openssh-client and
// ansible-core).
//
// The regression cases first show, with the same reader, that the text the
// old string-concatenating writer produced from a hostile address really did
// plant a ProxyCommand (or an Ansible variable) — so the refusal tests below
// refuse an attack that works, not a made-up one.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <tuple>

#include "cli/cluster_files.h"
#include "cli/known_hosts_writer.h"
#include "cli/ssh_config_writer.h"
#include "common/child_process.h"
#include "tests/support/scratch_dir.h"
#include "tests/support/skip.h"

using namespace kiln::cli;
using kiln::Result;
using kiln::Status;
using kiln::testing::ScratchDir;

namespace {

// `name` on PATH, or skips the running case.
std::string program(const std::string& name) {
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path ? path : "/usr/bin:/bin");
  for (std::string d; std::getline(dirs, d, ':');) {
    const std::filesystem::path p = std::filesystem::path(d) / name;
    if (!d.empty() && ::access(p.c_str(), X_OK) == 0) return p.string();
  }
  KILN_SKIP(name << " is not installed (scripts/install-deps installs it)");
}

kiln::ProgramOutput run(const std::vector<std::string>& argv) {
  Result<kiln::ProgramOutput> r = kiln::run_program(argv, std::chrono::seconds(60));
  REQUIRE(r);
  return *r;
}

// What ssh would do for `alias` with only `config` read: `ssh -G` prints the
// resolved options as "keyword value" lines (keywords lower-case).
std::multimap<std::string, std::string> ssh_resolved(const std::string& config, const std::string& alias) {
  kiln::ProgramOutput out = run({program("ssh"), "-G", "-F", config, alias});
  INFO(out.err);
  REQUIRE(kiln::exit_code(out.status) == 0);
  std::multimap<std::string, std::string> opts;
  std::stringstream lines(out.out);
  for (std::string line; std::getline(lines, line);) {
    const auto sp = line.find(' ');
    opts.emplace(line.substr(0, sp), sp == std::string::npos ? "" : line.substr(sp + 1));
  }
  return opts;
}

std::string one(const std::multimap<std::string, std::string>& opts, const std::string& key) {
  REQUIRE(opts.count(key) == 1);
  return opts.find(key)->second;
}

// ssh -G prints nothing for an unset ProxyCommand; "none" is also unset.
bool runs_a_proxy(const std::multimap<std::string, std::string>& opts) {
  auto it = opts.find("proxycommand");
  return it != opts.end() && it->second != "none";
}

nlohmann::json ansible_inventory(const std::string& inventory) {
  kiln::ProgramOutput out = run({program("ansible-inventory"), "-i", inventory, "--list"});
  INFO(out.err);
  REQUIRE(kiln::exit_code(out.status) == 0);
  return nlohmann::json::parse(out.out);
}

std::string write(const ScratchDir& dir, const std::string& name, const std::string& text) {
  REQUIRE_FALSE(dir.path().empty());
  return dir.write(name, text);
}

// What the writer before this one produced (string concatenation of the API's
// values), kept here only to show the attack works on it.
std::string old_ssh_config(const std::string& alias, const std::string& address, const std::string& user) {
  return "Host " + alias + "\n  HostName " + address + "\n  User " + user + "\n\n";
}
std::string old_inventory(const std::string& group, const std::string& name, const std::string& address,
                          const std::string& user) {
  return "[" + group + "]\n" + name + " ansible_host=" + address + " ansible_user=" + user + "\n\n";
}

std::vector<ClusterNode> nodes_of_every_shape() {
  return {
      {"n1", "w0", "workers", "p", "baremetal", {"10.0.0.5"}, "ubuntu@10.0.0.5", 8},
      {"n2", "gpu-01.rack-2", "workers", "p", "baremetal", {"2001:DB8:0:0:0:0:0:1"}, "_ci-user@2001:db8::1", 8},
      {"n3", "w2", "workers", "p", "baremetal", {}, "", 8},
      {"n4", "d0", "dev", "p", "virtual", {"fd00::9", "10.0.1.9"}, "debian@10.0.1.9", 0},
      {"n5", "d1.lab", "dev", "p", "virtual", {"2001:db8:0:0:1:0:0:1"}, "", 0},
  };
}

}  // namespace

TEST_CASE("file readers: the old ssh_config text let a reported address plant a ProxyCommand (regression)") {
  ScratchDir dir;
  const std::string hostile = "fe80::1\nProxyCommand sh -c 'touch /tmp/kiln-pwned'";
  const std::string old = write(dir, "old_ssh_config", old_ssh_config("w0", hostile, "ubuntu"));
  std::multimap<std::string, std::string> opts = ssh_resolved(old, "w0");
  CHECK(runs_a_proxy(opts));  // the attack works on the old text...
  CHECK(one(opts, "proxycommand") == "sh -c 'touch /tmp/kiln-pwned'");
  // ...and the writers now refuse the same node.
  std::vector<ClusterNode> nodes = {{"n1", "w0", "workers", "p", "baremetal", {hostile}, "ubuntu@fe80::1", 0}};
  Result<ClusterFiles> r = render_cluster_files("c", nlohmann::json::array(), {"workers"}, nodes);
  REQUIRE_FALSE(r);
  CHECK(r.error().fields.at(0).field == "node w0: addresses/0");
}

TEST_CASE("file readers: the old inventory text let a reported address set an Ansible variable (regression)") {
  ScratchDir dir;
  const std::string hostile = "10.0.0.5 ansible_ssh_common_args=-oProxyCommand=id";
  const std::string old = write(dir, "old.ini", old_inventory("workers", "w0", hostile, "ubuntu"));
  nlohmann::json inv = ansible_inventory(old);
  CHECK(inv["_meta"]["hostvars"]["w0"]["ansible_ssh_common_args"] == "-oProxyCommand=id");
  std::vector<ClusterNode> nodes = {{"n1", "w0", "workers", "p", "baremetal", {hostile}, "", 0}};
  REQUIRE_FALSE(render_cluster_files("c", nlohmann::json::array(), {"workers"}, nodes));
}

TEST_CASE("file readers: ssh -G reads each node's HostName and User from the written ssh_config, and nothing else") {
  ScratchDir dir;
  Result<ClusterFiles> f = render_cluster_files("c", nlohmann::json::array(), {"workers", "dev"}, nodes_of_every_shape());
  REQUIRE(f);
  const std::string config = write(dir, "ssh_config", f->ssh_config);
  struct Want {
    std::string alias, hostname, user;
  };
  // A node without User gets ssh's default (the caller's login), so only
  // HostName and the absence of a proxy are checked for it.
  for (const Want& w : {Want{"w0", "10.0.0.5", "ubuntu"}, Want{"gpu-01.rack-2", "2001:db8::1", "_ci-user"},
                        Want{"d0", "fd00::9", "debian"}, Want{"d1.lab", "2001:db8::1:0:0:1", ""}}) {
    INFO(w.alias);
    std::multimap<std::string, std::string> opts = ssh_resolved(config, w.alias);
    CHECK(one(opts, "hostname") == w.hostname);
    if (!w.user.empty()) CHECK(one(opts, "user") == w.user);
    CHECK_FALSE(runs_a_proxy(opts));
    CHECK(opts.count("proxyjump") == 0);
    CHECK(opts.count("localcommand") == 0);
  }
  // The node without an address has no block: ssh falls back to the alias.
  CHECK(one(ssh_resolved(config, "w2"), "hostname") == "w2");
}

TEST_CASE("file readers: with a known_hosts file, ssh -G pins host keys to it (quoted path with a space and %)") {
  ScratchDir dir;
  REQUIRE_FALSE(dir.path().empty());
  const std::string kh_dir = dir.path() + "/out dir 100%";
  std::filesystem::create_directories(kh_dir);
  Result<SshConfigPath> kh = SshConfigPath::parse(kh_dir + "/known_hosts");
  REQUIRE(kh);
  std::vector<SshConfigHost> hosts = {
      {*HostAlias::parse("w0"), *IpLiteral::parse("10.0.0.5"), *LoginName::parse("ubuntu")},
      {*HostAlias::parse("w1"), *IpLiteral::parse("fd00::1"), std::nullopt},
  };
  const std::string config = write(dir, "ssh_config", ssh_config_text(hosts, SshConfigOptions{*kh}));
  for (const char* alias : {"w0", "w1"}) {
    std::multimap<std::string, std::string> opts = ssh_resolved(config, alias);
    CHECK(one(opts, "stricthostkeychecking") == "true");
    CHECK(one(opts, "userknownhostsfile") == kh_dir + "/known_hosts");
    CHECK_FALSE(runs_a_proxy(opts));
  }
}

TEST_CASE("file readers: ansible-inventory sees exactly the written hosts, groups, ansible_host and ansible_user") {
  ScratchDir dir;
  Result<ClusterFiles> f = render_cluster_files("c", nlohmann::json::array(), {"workers", "dev"}, nodes_of_every_shape());
  REQUIRE(f);
  nlohmann::json inv = ansible_inventory(write(dir, "inventory.ini", f->inventory));
  CHECK(inv["_meta"]["hostvars"] == nlohmann::json::parse(R"({
    "w0": {"ansible_host": "10.0.0.5", "ansible_user": "ubuntu"},
    "gpu-01.rack-2": {"ansible_host": "2001:db8::1", "ansible_user": "_ci-user"},
    "d0": {"ansible_host": "fd00::9", "ansible_user": "debian"},
    "d1.lab": {"ansible_host": "2001:db8::1:0:0:1"}
  })"));
  CHECK(inv["workers"] == nlohmann::json::parse(R"({"hosts": ["w0", "gpu-01.rack-2"]})"));
  CHECK(inv["dev"] == nlohmann::json::parse(R"({"hosts": ["d0", "d1.lab"]})"));
  std::set<std::string> groups;
  for (const auto& [k, v] : inv.items()) groups.insert(k);
  CHECK(groups == std::set<std::string>{"_meta", "all", "workers", "dev"});
  std::set<std::string> children(inv["all"]["children"].begin(), inv["all"]["children"].end());
  CHECK(children == std::set<std::string>{"ungrouped", "workers", "dev"});
}

TEST_CASE("file readers: ssh-keygen -F finds exactly the written host key for each name") {
  ScratchDir dir;
  REQUIRE_FALSE(dir.path().empty());
  const std::string keygen = program("ssh-keygen");
  auto host_key = [&](const std::string& type, const std::string& file) {
    kiln::ProgramOutput g = run({keygen, "-q", "-t", type, "-N", "", "-C", "x", "-f", dir.path() + "/" + file});
    INFO(g.err);
    REQUIRE(kiln::exit_code(g.status) == 0);
    std::ifstream in(dir.path() + "/" + file + ".pub");
    std::string t, k;
    in >> t >> k;
    return std::pair{t, k};
  };
  const auto [ed_type, ed_key] = host_key("ed25519", "ed");
  const auto [ec_type, ec_key] = host_key("ecdsa", "ec");
  REQUIRE(ed_type == "ssh-ed25519");
  REQUIRE(ec_type == "ecdsa-sha2-nistp256");
  Result<std::string> a = known_hosts_line({"w0", "10.0.0.5", "FD00::5"}, ed_type, ed_key);
  Result<std::string> b = known_hosts_line({"w1", "10.0.0.6"}, ec_type, ec_key);
  REQUIRE(a);
  REQUIRE(b);
  const std::string file = write(dir, "known_hosts", *a + *b);

  auto found = [&](const std::string& host) {
    kiln::ProgramOutput out = run({keygen, "-F", host, "-f", file});
    std::vector<std::string> keys;  // "<type> <key>" of each line found
    std::stringstream lines(out.out);
    for (std::string line; std::getline(lines, line);) {
      if (line.empty() || line[0] == '#') continue;
      std::stringstream fields(line);
      std::string names, type, key;
      fields >> names >> type >> key;
      keys.push_back(type + " " + key);
    }
    return keys;
  };
  for (const char* host : {"w0", "10.0.0.5", "fd00::5"})
    CHECK(found(host) == std::vector<std::string>{ed_type + " " + ed_key});
  for (const char* host : {"w1", "10.0.0.6"}) CHECK(found(host) == std::vector<std::string>{ec_type + " " + ec_key});
  CHECK(found("10.0.0.7").empty());
  // A key of one type offered as another is refused before it is written.
  CHECK_FALSE(known_hosts_line({"w0"}, "ssh-ed25519", ec_key));
}

TEST_CASE("file readers: cluster files pin every node's phoned-home host keys, and one node without keys pins none") {
  ScratchDir dir;
  REQUIRE_FALSE(dir.path().empty());
  const std::string keygen = program("ssh-keygen");
  auto host_key = [&](const std::string& file) {
    kiln::ProgramOutput g = run({keygen, "-q", "-t", "ed25519", "-N", "", "-C", "x", "-f", dir.path() + "/" + file});
    REQUIRE(kiln::exit_code(g.status) == 0);
    std::ifstream in(dir.path() + "/" + file + ".pub");
    std::string t, k;
    in >> t >> k;
    return std::pair{t, k};
  };
  std::vector<ClusterNode> nodes(2);
  nodes[0].id = "11111111-1111-4111-8111-111111111111";
  nodes[0].name = "w0";
  nodes[0].group = "workers";
  nodes[0].addresses = {"10.0.0.5"};
  nodes[0].ssh = "debian@10.0.0.5";
  nodes[0].ssh_host_keys = {host_key("w0")};
  nodes[1].id = "22222222-2222-4222-8222-222222222222";
  nodes[1].name = "w1";
  nodes[1].group = "workers";
  nodes[1].addresses = {"fd00::6"};
  nodes[1].ssh_host_keys = {host_key("w1")};
  const std::string out = dir.path() + "/cluster";
  REQUIRE(write_cluster_files(out, "c", nlohmann::json::array(), {"workers"}, nodes));
  for (const auto& [alias, address, i] : {std::tuple{"w0", "10.0.0.5", 0}, std::tuple{"w1", "fd00::6", 1}}) {
    INFO(alias);
    std::multimap<std::string, std::string> opts = ssh_resolved(out + "/ssh_config", alias);
    CHECK(one(opts, "stricthostkeychecking") == "true");
    CHECK(one(opts, "userknownhostsfile") == out + "/known_hosts");
    // ssh looks the key up by HostName: that finds the node's key, and only it.
    kiln::ProgramOutput found = run({keygen, "-F", address, "-f", out + "/known_hosts"});
    const auto& [type, key] = nodes[static_cast<std::size_t>(i)].ssh_host_keys[0];
    CHECK(found.out.find(type + " " + key) != std::string::npos);
    const auto& other = nodes[static_cast<std::size_t>(1 - i)].ssh_host_keys[0];
    CHECK(found.out.find(other.second) == std::string::npos);
  }

  // A node that has not phoned home: known_hosts keeps the others' keys, but
  // nothing is pinned (ssh asks rather than refusing a node it cannot check).
  nodes[1].ssh_host_keys.clear();
  REQUIRE(write_cluster_files(out, "c", nlohmann::json::array(), {"workers"}, nodes));
  std::multimap<std::string, std::string> opts = ssh_resolved(out + "/ssh_config", "w0");
  CHECK(opts.find("userknownhostsfile")->second != out + "/known_hosts");
  CHECK(one(opts, "stricthostkeychecking") != "true");

  // A hostile key is refused before any file is written.
  nodes[1].ssh_host_keys = {{"ssh-ed25519", nodes[0].ssh_host_keys[0].second + "\nProxyCommand touch /tmp/x"}};
  Status bad = write_cluster_files(dir.path() + "/never", "c", nlohmann::json::array(), {"workers"}, nodes);
  REQUIRE_FALSE(bad);
  CHECK(bad.error().fields.at(0).field == "node w1: ssh_host_keys/0");
  CHECK_FALSE(std::filesystem::exists(dir.path() + "/never/ssh_config"));
}

TEST_CASE("file readers: ssh -G resolves every Host block of the written file to what inventory.ini and cluster.json say of that node") {
  ScratchDir dir;
  REQUIRE_FALSE(dir.path().empty());
  std::vector<ClusterNode> nodes = nodes_of_every_shape();
  // Names a reader could take for something else: all digits, mixed case,
  // a dotted quad that is no node's address, a leading underscore.
  nodes.push_back({"n6", "1234", "dev", "p", "virtual", {"10.0.2.1"}, "", 0});
  nodes.push_back({"n7", "GPU-07.Rack", "dev", "p", "virtual", {"10.0.2.2"}, "ubuntu@10.0.2.2", 0});
  nodes.push_back({"n8", "192.0.2.77", "dev", "p", "virtual", {"10.0.2.3"}, "", 0});
  nodes.push_back({"n9", "_w9", "dev", "p", "virtual", {"fd00::99"}, "_svc@fd00::99", 0});
  const std::string out = dir.path() + "/cluster";
  REQUIRE(write_cluster_files(out, "c", nlohmann::json::array(), {"workers", "dev"}, nodes));
  nlohmann::json inv = ansible_inventory(out + "/inventory.ini");
  std::ifstream cj(out + "/cluster.json");
  nlohmann::json cluster = nlohmann::json::parse(cj);

  // The aliases as the file itself declares them, not as this test made them.
  std::vector<std::string> aliases;
  std::ifstream config(out + "/ssh_config");
  for (std::string line; std::getline(config, line);)
    if (line.rfind("Host ", 0) == 0) aliases.push_back(line.substr(5));
  std::set<std::string> in_inventory;
  for (const auto& [name, vars] : inv["_meta"]["hostvars"].items()) in_inventory.insert(name);
  CHECK(std::set<std::string>(aliases.begin(), aliases.end()) == in_inventory);
  CHECK(aliases.size() == 8);  // every node with an address; w2 has none

  for (const std::string& alias : aliases) {
    INFO(alias);
    std::multimap<std::string, std::string> opts = ssh_resolved(out + "/ssh_config", alias);
    const nlohmann::json& vars = inv["_meta"]["hostvars"][alias];
    CHECK(one(opts, "hostname") == vars["ansible_host"].get<std::string>());
    if (vars.contains("ansible_user")) CHECK(one(opts, "user") == vars["ansible_user"].get<std::string>());
    CHECK_FALSE(runs_a_proxy(opts));
    CHECK(opts.count("proxyjump") == 0);
    const nlohmann::json* node = nullptr;
    for (const nlohmann::json& n : cluster["nodes"])
      if (n["name"] == alias) node = &n;
    REQUIRE(node != nullptr);
    CHECK((*node)["addresses"][0] == vars["ansible_host"]);
    // The user agrees; the address is the node's first (for d0, whose ssh
    // names its second address, ssh_config and inventory.ini use the first).
    if (!(*node)["ssh"].is_null())
      CHECK_THAT((*node)["ssh"].get<std::string>(), Catch::StartsWith(vars["ansible_user"].get<std::string>() + "@"));
  }
}

TEST_CASE("file readers: a node named as another node's address is refused, since ssh and known_hosts would take it for that node (regression)") {
  ScratchDir dir;
  REQUIRE_FALSE(dir.path().empty());
  const std::string keygen = program("ssh-keygen");
  auto host_key = [&](const std::string& file) {
    kiln::ProgramOutput g = run({keygen, "-q", "-t", "ed25519", "-N", "", "-C", "x", "-f", dir.path() + "/" + file});
    REQUIRE(kiln::exit_code(g.status) == 0);
    std::ifstream in(dir.path() + "/" + file + ".pub");
    std::string t, k;
    in >> t >> k;
    return std::pair{t, k};
  };
  // Node "10.0.0.6" lives at 10.0.0.5; node b lives at 10.0.0.6.
  std::vector<ClusterNode> nodes(2);
  nodes[0] = {"11111111-1111-4111-8111-111111111111", "10.0.0.6", "workers", "p", "baremetal", {"10.0.0.5"}, "", 0,
              {host_key("a")}};
  nodes[1] = {"22222222-2222-4222-8222-222222222222", "b", "workers", "p", "baremetal", {"10.0.0.6"}, "", 0,
              {host_key("b")}};

  // What the files said before: ssh to b's address reached the other node,
  // and known_hosts offered the other node's key for b's address.
  std::vector<SshConfigHost> hosts = {
      {*HostAlias::parse("10.0.0.6"), *IpLiteral::parse("10.0.0.5"), std::nullopt},
      {*HostAlias::parse("b"), *IpLiteral::parse("10.0.0.6"), std::nullopt},
  };
  CHECK(one(ssh_resolved(write(dir, "old_ssh_config", ssh_config_text(hosts)), "10.0.0.6"), "hostname") == "10.0.0.5");
  Result<std::string> a_line = known_hosts_line({"10.0.0.6", "10.0.0.5"}, nodes[0].ssh_host_keys[0].first,
                                                nodes[0].ssh_host_keys[0].second);
  REQUIRE(a_line);
  kiln::ProgramOutput found = run({keygen, "-F", "10.0.0.6", "-f", write(dir, "old_known_hosts", *a_line)});
  CHECK(found.out.find(nodes[0].ssh_host_keys[0].second) != std::string::npos);

  // Now: refused, naming the node and the one whose address it took.
  Result<ClusterFiles> r = render_cluster_files("c", nlohmann::json::array(), {"workers"}, nodes);
  REQUIRE_FALSE(r);
  CHECK(r.error().fields.at(0).field == "node 10.0.0.6: name");
  CHECK_THAT(r.error().message, Catch::Contains("is the address of node b"));
  // A name that is the node's own address, or no node's, is fine.
  nodes[1].addresses = {"10.0.0.7"};
  CHECK(render_cluster_files("c", nlohmann::json::array(), {"workers"}, nodes));
  nodes[0].addresses = {"10.0.0.6"};
  CHECK(render_cluster_files("c", nlohmann::json::array(), {"workers"}, nodes));
}
