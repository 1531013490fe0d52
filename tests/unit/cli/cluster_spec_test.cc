#include <catch2/catch.hpp>

#include "cli/cluster_spec.h"
#include "cli/exit_code.h"
#include "cli/spec_file.h"

using namespace kiln::cli;
using nlohmann::json;

namespace {

json good() {
  return json::parse(R"({"name": "ci-smoke", "lease_seconds": 3600, "ssh_keys": ["ssh-ed25519 AAAA ci@example"],
    "groups": [{"name": "workers", "profile": "h100-sxm-8x", "kind": "baremetal", "count": 2, "image": "ubuntu-22.04"},
               {"name": "dev", "profile": "h100-vm-1x", "kind": "virtual", "count": 1, "image": "ubuntu-22.04", "traits": []}]})");
}

std::string refusal(const json& doc) {
  auto r = parse_cluster_spec(doc);
  REQUIRE_FALSE(r.ok());
  CHECK(exit_code_for(r.error()) == kExitUsage);
  return one_line(r.error());
}

}  // namespace

TEST_CASE("cluster spec: the issue's example is accepted with its values") {
  auto r = parse_cluster_spec(good());
  REQUIRE(r.ok());
  CHECK(r->name == "ci-smoke");
  CHECK(r->lease_seconds == 3600);
  REQUIRE(r->groups.size() == 2);
  CHECK(r->allocation_name(r->groups[0]) == "ci-smoke-workers");
  CHECK(r->groups[1].kind == "virtual");
  auto part = split_allocation_name("ci-smoke-workers");
  REQUIRE(part);
  CHECK(part->cluster == "ci-smoke");
  CHECK(part->group == "workers");
  CHECK_FALSE(split_allocation_name("nodash"));
}

TEST_CASE("cluster spec: group names with '-' are accepted and their allocations map back to cluster and group") {
  json d = good();
  d["groups"][0]["name"] = "gpu-workers";
  d["groups"][1]["name"] = "dev";
  auto r = parse_cluster_spec(d);
  REQUIRE(r.ok());
  // The group's '-' would make "ci-smoke-gpu-workers" read as cluster
  // "ci-smoke-gpu", group "workers": such a group is joined by "--".
  CHECK(r->allocation_name(r->groups[0]) == "ci-smoke--gpu-workers");
  CHECK(r->allocation_name(r->groups[1]) == "ci-smoke-dev");  // unchanged for names without '-'

  // Every pair of names the checker accepts comes back whole, whichever
  // side has the dashes.
  for (const std::string cluster : {"a", "ci-smoke", "ci-smoke-2", "x_y", "a-b-c"}) {
    for (const std::string group : {"w", "gpu-workers", "a-b-c", "x_y-z", "b"}) {
      ClusterSpec spec;
      spec.name = cluster;
      ClusterGroup g;
      g.name = group;
      auto back = split_allocation_name(spec.allocation_name(g));
      INFO(cluster << " + " << group << " = " << spec.allocation_name(g));
      REQUIRE(back);
      CHECK(back->cluster == cluster);
      CHECK(back->group == group);
    }
  }
  CHECK_FALSE(split_allocation_name("--x"));
  CHECK_FALSE(split_allocation_name("x--"));
  CHECK_FALSE(split_allocation_name("x-"));
}

TEST_CASE("cluster spec: names with \"--\" or a trailing '-' are refused, since they would blur the separator") {
  const std::string rule =
      "must be 1-63 characters of a-z, 0-9, '-' and '_', starting with a letter or digit, with no \"--\" and no '-' "
      "at the end";
  json d = good();
  d["groups"][0]["name"] = "a--b";
  CHECK(refusal(d) == "groups[0].name: " + rule);
  d = good();
  d["groups"][0]["name"] = "workers-";
  CHECK(refusal(d) == "groups[0].name: " + rule);
  d = good();
  d["groups"][0]["name"] = "-w";
  CHECK(refusal(d) == "groups[0].name: " + rule);
  d = good();
  d["name"] = "ci--smoke";
  CHECK(refusal(d) == "name: " + rule);
  d = good();
  d["name"] = "ci-";
  CHECK(refusal(d) == "name: " + rule);
  d = good();
  d["name"] = std::string(30, 'c');
  d["groups"][0]["name"] = std::string(15, 'g') + "-" + std::string(15, 'g');  // 30 + "--" + 31 = 63: fits
  CHECK(parse_cluster_spec(d).ok());
  d["groups"][0]["name"] = std::string(16, 'g') + "-" + std::string(15, 'g');
  CHECK(refusal(d) == "groups[0].name: makes the allocation name " + std::string(30, 'c') + "--" + std::string(16, 'g') +
                          "-" + std::string(15, 'g') + " longer than 63 characters");
}

TEST_CASE("cluster spec: each bad field is named with what it must be") {
  json d = good();
  d["groups"][0]["count"] = 0;
  CHECK(refusal(d) == "groups[0].count: must be an integer >= 1");
  d = good();
  d["groups"][0]["count"] = "2";  // a string is not a count
  CHECK(refusal(d) == "groups[0].count: must be an integer >= 1");
  d = good();
  d["groups"][1].erase("image");
  CHECK(refusal(d) == "groups[1].image: is required");
  d = good();
  d["groups"][0]["cuont"] = 2;
  CHECK(refusal(d) == "groups[0].cuont: unknown field");
  d = good();
  d["colour"] = "blue";
  CHECK(refusal(d) == "colour: unknown field");
  d = good();
  d["groups"][0]["kind"] = "metal";
  CHECK(refusal(d) == "groups[0].kind: must be baremetal or virtual");
  d = good();
  d["lease_seconds"] = 10;
  CHECK(refusal(d) == "lease_seconds: must be an integer from 60 to 31536000");
  d = good();
  d["groups"][1]["name"] = "workers";
  CHECK(refusal(d) == "groups[1].name: duplicate group name workers");
  d = good();
  d["ssh_keys"] = json::array();
  CHECK(refusal(d) == "ssh_keys: must be a list of one or more strings");
  d = good();
  d.erase("name");
  d["groups"][0]["count"] = 1.5;
  CHECK(refusal(d) == "name: is required; groups[0].count: must be an integer >= 1");
  CHECK(refusal(json::array()) == "(spec): must be a mapping with name, ssh_keys and groups");
}

TEST_CASE("cluster spec: YAML keeps its types so a quoted count is refused") {
  auto doc = parse_yaml_text("name: x\nssh_keys: [k]\ngroups:\n  - {name: g, profile: p, kind: baremetal, count: \"2\", image: i}\n",
                             "t.yaml");
  REQUIRE(doc.ok());
  CHECK((*doc)["groups"][0]["count"].is_string());
  CHECK(refusal(*doc) == "groups[0].count: must be an integer >= 1");
  auto plain = parse_yaml_text("count: 2\nflag: true\nnothing: ~\nname: '007'\n", "t.yaml");
  REQUIRE(plain.ok());
  CHECK((*plain)["count"] == 2);
  CHECK((*plain)["flag"] == true);
  CHECK((*plain)["nothing"].is_null());
  CHECK((*plain)["name"] == "007");
  auto broken = parse_yaml_text("groups: [\n", "t.yaml");
  REQUIRE_FALSE(broken.ok());
  CHECK(one_line(broken.error()).find("t.yaml: not valid YAML or JSON at line") == 0);
}
