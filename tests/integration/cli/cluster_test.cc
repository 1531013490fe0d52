// kiln cluster up/down/list/show against a real kilnd: the spec is checked
// before anything is created, up writes the files and is idempotent, and
// whatever goes wrong (a group that cannot be had, the timeout, the CLI
// killed) no node stays allocated.
#include <catch2/catch.hpp>

#include <signal.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "cli_lab.h"
#include "tests/support/cli_run.h"
#include "tests/support/wait_until.h"
#include "tests/support/read_file.h"

using namespace kiln::testing;
using nlohmann::json;
using namespace std::chrono_literals;

using kiln::testing::read_file;

namespace {

std::string spec(const std::string& name, const std::string& groups, const std::string& extra = "") {
  return "name: " + name + "\n" + extra + "ssh_keys: [\"" + CliLab::kKey + "\"]\ngroups:\n" + groups;
}

json live_allocations(CliLab& lab) {
  json out = json::array();
  const json all = lab.get("/v1/allocations");  // named: a loop over a temporary's member would dangle
  for (const json& a : all["allocations"])
    if (a["state"] != "released") out.push_back(a);
  return out;
}

}  // namespace

TEST_CASE("cluster up: a bad spec is refused before anything is created and the error names the field") {
  CliLab lab({.nodes = 1, .quota = 1});
  struct Bad {
    std::string groups;
    std::string error;
  };
  const std::vector<Bad> bad = {
      {"  - {name: w, profile: cpu-lab, kind: baremetal, count: two, image: demo-os}\n",
       "error: groups[0].count: must be an integer >= 1\n"},
      {"  - {name: w, profile: cpu-lab, kind: baremetal, count: 0, image: demo-os}\n",
       "error: groups[0].count: must be an integer >= 1\n"},
      {"  - {name: w, profile: cpu-lab, kind: baremetal, count: 1, image: demo-os, colour: red}\n",
       "error: groups[0].colour: unknown field\n"},
      {"  - {name: w, profile: cpu-lab, kind: baremetal, count: 1}\n", "error: groups[0].image: is required\n"},
  };
  for (const Bad& b : bad) {
    INFO(b.groups);
    KilnRun r = lab.kiln("cluster up --wait -f " + lab.write("bad.yaml", spec("ci", b.groups)));
    CHECK(r.status == 2);
    CHECK(r.err == b.error);
  }
  KilnRun r = lab.kiln("cluster up -f " + lab.write("bad.yaml", spec("ci", "  - {name: w, profile: cpu-lab, kind: baremetal, count: 1, image: demo-os}\n", "lease: 5\n")));
  CHECK(r.status == 2);
  CHECK(r.err == "error: lease: unknown field\n");
  r = lab.kiln("cluster up -f /nonexistent/spec.yaml");
  CHECK(r.status == 2);
  CHECK(lab.get("/v1/allocations")["allocations"].empty());
}

TEST_CASE("cluster up: files written then up again creates nothing then down gives every node back") {
  CliLab lab;
  const std::string file = lab.write("c.yaml", spec("ci-smoke",
                                                    "  - {name: workers, profile: cpu-lab, kind: baremetal, count: 2, image: demo-os}\n"
                                                    "  - {name: dev, profile: cpu-lab, kind: baremetal, count: 1, image: demo-os, traits: []}\n",
                                                    "lease_seconds: 3600\n"));
  const std::string out = lab.dir.path() + "/out";
  KilnRun up = lab.kiln("cluster up -f " + file + " --wait --timeout 60s --output-dir " + out + " -o json");
  INFO(up.err);
  REQUIRE(up.status == 0);
  const json view = json::parse(up.out);
  CHECK(view["name"] == "ci-smoke");
  CHECK(view["state"] == "ready");
  CHECK(view["groups"].size() == 2);

  const json doc = json::parse(read_file(out + "/cluster.json"));
  REQUIRE(doc["nodes"].size() == 3);
  int workers = 0;
  for (const json& n : doc["nodes"]) {
    workers += n["group"] == "workers";
    CHECK(n["profile"] == "cpu-lab");
    CHECK(n["kind"] == "baremetal");
    CHECK(n["gpus"] == 0);  // cpu-lab has none
    CHECK(lab.get("/v1/nodes/" + n["id"].get<std::string>())["provision_state"] == "active");
    // kilnd does not report a fake node's addresses (nor yet any OS
    // addresses): the files say so instead of inventing one.
    CHECK(n["addresses"].empty());
    CHECK(n["ssh"].is_null());
  }
  CHECK(workers == 2);
  CHECK(read_file(out + "/hostfile").empty());
  CHECK(read_file(out + "/ssh_config").find("no address reported yet") != std::string::npos);
  const std::string inventory = read_file(out + "/inventory.ini");
  CHECK(inventory.find("[workers]") != std::string::npos);
  CHECK(inventory.find("[dev]") != std::string::npos);
  CHECK(up.err.find("3 of 3 nodes have no address reported by kilnd yet") != std::string::npos);
  for (const json& a : live_allocations(lab)) CHECK(a["expires_at"].is_string());  // the lease was passed on

  // Idempotent: nothing created, still two allocations, still ready.
  KilnRun again = lab.kiln("cluster up -f " + file + " --wait --timeout 30s --output-dir " + out);
  CHECK(again.status == 0);
  CHECK(again.err.find("cluster ci-smoke exists; nothing created") != std::string::npos);
  CHECK(live_allocations(lab).size() == 2);
  CHECK(lab.get("/v1/allocations")["allocations"].size() == 2);

  KilnRun list = lab.kiln("cluster list -o json");
  REQUIRE(list.status == 0);
  CHECK(json::parse(list.out)["clusters"][0]["name"] == "ci-smoke");
  CHECK(json::parse(list.out)["clusters"][0]["nodes"] == 3);
  KilnRun show = lab.kiln("cluster show ci-smoke");
  CHECK(show.status == 0);
  CHECK(show.out.find("workers") != std::string::npos);

  KilnRun down = lab.kiln("cluster down ci-smoke --wait --timeout 60s");
  INFO(down.err);
  CHECK(down.status == 0);
  CHECK(live_allocations(lab).empty());
  lab.wait_nodes("available");
  const json nodes = lab.get("/v1/nodes");
  for (const json& n : nodes["nodes"]) CHECK(n["tenant"].is_null());
  KilnRun twice = lab.kiln("cluster down ci-smoke");
  CHECK(twice.status == 0);
  CHECK(twice.err.find("nothing to release") != std::string::npos);
  CHECK(lab.kiln("cluster show ci-smoke").status == 1);
}

TEST_CASE("cluster up: a group name with '-' works and a cluster named like its prefix stays apart") {
  CliLab lab;
  // Cut at the last '-', "ci-gpu-workers" would be cluster ci-gpu's group
  // workers as well as cluster ci's group gpu-workers.
  const std::string ci = lab.write("ci.yaml", spec("ci", "  - {name: gpu-workers, profile: cpu-lab, kind: baremetal, count: 1, image: demo-os}\n"));
  const std::string ci_gpu = lab.write("ci-gpu.yaml", spec("ci-gpu", "  - {name: workers, profile: cpu-lab, kind: baremetal, count: 1, image: demo-os}\n"));
  const std::string out = lab.dir.path() + "/out";
  KilnRun up = lab.kiln("cluster up -f " + ci + " --wait --timeout 60s --output-dir " + out + " -o json");
  INFO(up.err);
  REQUIRE(up.status == 0);
  CHECK(json::parse(up.out)["groups"][0]["group"] == "gpu-workers");
  CHECK(json::parse(read_file(out + "/cluster.json"))["nodes"][0]["group"] == "gpu-workers");
  CHECK(read_file(out + "/inventory.ini").find("[gpu-workers]") != std::string::npos);
  KilnRun other = lab.kiln("cluster up -f " + ci_gpu);
  INFO(other.err);
  REQUIRE(other.status == 0);
  std::set<std::string> names;
  for (const json& a : live_allocations(lab)) names.insert(a["name"].get<std::string>());
  CHECK(names == std::set<std::string>{"ci--gpu-workers", "ci-gpu-workers"});

  KilnRun list = lab.kiln("cluster list -o json");
  REQUIRE(list.status == 0);
  const json clusters = json::parse(list.out)["clusters"];
  REQUIRE(clusters.size() == 2);
  CHECK(clusters[0]["name"] == "ci");
  CHECK(clusters[0]["groups"] == json::array({"gpu-workers"}));
  CHECK(clusters[1]["name"] == "ci-gpu");
  CHECK(clusters[1]["groups"] == json::array({"workers"}));
  KilnRun again = lab.kiln("cluster up -f " + ci);
  CHECK(again.status == 0);
  CHECK(again.err.find("cluster ci exists; nothing created") != std::string::npos);

  KilnRun down = lab.kiln("cluster down ci");
  INFO(down.err);
  CHECK(down.status == 0);
  CHECK(down.err.find("releasing allocation ci--gpu-workers") != std::string::npos);
  const json left = live_allocations(lab);
  bool ci_gpu_live = false;
  for (const json& a : left) {
    if (a["name"] == "ci-gpu-workers") ci_gpu_live = a["state"] != "releasing";
    else CHECK(a["state"] == "releasing");
  }
  CHECK(ci_gpu_live);  // cluster ci's down left cluster ci-gpu alone
  CHECK(lab.kiln("cluster show ci-gpu").status == 0);
}

TEST_CASE("cluster up: a group that cannot be had releases the groups this run created") {
  CliLab lab;
  const std::string file = lab.write("c.yaml", spec("big",
                                                    "  - {name: first, profile: cpu-lab, kind: baremetal, count: 2, image: demo-os}\n"
                                                    "  - {name: second, profile: cpu-lab, kind: baremetal, count: 2, image: demo-os}\n"));
  KilnRun r = lab.kiln("cluster up -f " + file + " --wait --timeout 60s");
  CHECK(r.status == 4);
  CHECK(r.err.find("error: group second: /count: 2 requested, 1 available") != std::string::npos);
  CHECK(r.err.find("released allocation") != std::string::npos);
  CHECK(live_allocations(lab).size() <= 1);
  for (const json& a : live_allocations(lab)) CHECK(a["state"] == "releasing");
  lab.wait_nodes("available");
  // The allocation turns released on the engine's next pass after its last member left.
  CHECK(wait_until([&] { return live_allocations(lab).empty(); }, 20s, 50ms));
}

TEST_CASE("cluster up: --timeout reached releases everything and exits 3") {
  CliLab lab({.nodes = 2, .quota = 2, .step_delay_ms = 1500});  // a deploy now takes seconds
  const std::string file = lab.write("c.yaml", spec("slow", "  - {name: g, profile: cpu-lab, kind: baremetal, count: 2, image: demo-os}\n"));
  KilnRun r = lab.kiln("cluster up -f " + file + " --wait --timeout 1s");
  CHECK(r.status == 3);
  CHECK(r.err.find("error: timed out after 1s") != std::string::npos);
  CHECK(r.err.find("released allocation") != std::string::npos);
  const json after = lab.get("/v1/allocations");
  for (const json& a : after["allocations"]) CHECK((a["state"] == "releasing" || a["state"] == "released"));
  lab.wait_nodes("available", 60);
  CHECK(wait_until([&] { return live_allocations(lab).empty(); }, 20s, 50ms));
}

TEST_CASE("cluster up: the CLI killed with SIGKILL mid-wait leaves the cluster to its lease and the reaper releases it") {
  // kilnd's shortest lease is 60 s, so this case takes a minute.
  CliLab lab({.nodes = 1, .quota = 1, .step_delay_ms = 1500});
  const std::string file = lab.write("c.yaml", spec("doomed", "  - {name: g, profile: cpu-lab, kind: baremetal, count: 1, image: demo-os}\n",
                                                    "lease_seconds: 60\n"));
  const std::string pid_file = lab.dir.path() + "/kiln.pid";
  kiln::test::run_command(lab.kiln_command("cluster up -f " + file + " --wait --timeout 10m") + " >/dev/null 2>&1 & echo $! > " + pid_file);
  REQUIRE(wait_until([&] { return live_allocations(lab).size() == 1; }, 20s, 50ms));
  const int pid = std::stoi(read_file(pid_file));
  REQUIRE(::kill(pid, SIGKILL) == 0);
  // Nothing released it: the CLI is gone, the allocation carries on.
  std::this_thread::sleep_for(500ms);
  REQUIRE(live_allocations(lab).size() == 1);
  json reaped;
  REQUIRE(wait_until([&] {
    reaped = lab.get("/v1/allocations")["allocations"][0];
    return reaped["state"] == "releasing" || reaped["state"] == "released";
  }, 90s, 500ms));
  INFO(reaped.dump(1));
  bool by_lease = false;  // the history says who released it
  for (const json& h : reaped["history"])
    by_lease = by_lease || (h["to"] == "releasing" && h.value("reason", "").find("lease expired") == 0);
  CHECK(by_lease);
  lab.wait_nodes("available", 60);
}

TEST_CASE("cluster up --tenant with a staff token writes that tenant's cluster when another tenant uses the same names") {
  CliLab lab({.nodes = 2, .quota = 2});
  lab.call("POST", "/v1/tenants",
           {{"name", "zeta"},
            {"quotas", json::array({{{"profile", "cpu-lab"}, {"kind", "baremetal"}, {"max_nodes", 2}}})}},
           201);
  const std::string file =
      lab.write("c.yaml", spec("ci", "  - {name: web, profile: cpu-lab, kind: baremetal, count: 1, image: demo-os}\n"));
  const std::string out = lab.dir.path() + "/out";
  const std::string up = "cluster up -f " + file + " --tenant acme --wait --timeout 60s --output-dir " + out;
  KilnRun first = lab.kiln(up, CliLab::kAdminToken);
  INFO(first.err);
  REQUIRE(first.status == 0);
  const std::string acme_id = json::parse(read_file(out + "/cluster.json"))["groups"][0]["allocation"];
  // zeta's allocation of the same name, newer than acme's: a bare-name
  // lookup by staff used to answer it (the newest).
  const json zeta = lab.call("POST", "/v1/allocations",
                             {{"tenant", "zeta"}, {"name", "ci-web"}, {"profile", "cpu-lab"}, {"kind", "baremetal"},
                              {"count", 1}, {"image", "demo-os"}, {"ssh_keys", json::array({CliLab::kKey})}},
                             202);
  // Up again (idempotent) rewrites the files: acme's cluster, not zeta's.
  KilnRun again = lab.kiln(up, CliLab::kAdminToken);
  INFO(again.err);
  REQUIRE(again.status == 0);
  const json doc = json::parse(read_file(out + "/cluster.json"));
  CHECK(doc["groups"][0]["allocation"] == acme_id);
  CHECK(doc["groups"][0]["allocation"] != zeta["id"]);
  // A bare name that two tenants use is a 409 for staff, exit 1 naming the way out.
  KilnRun show = lab.kiln("alloc show ci-web", CliLab::kAdminToken);
  CHECK(show.status == 1);
  CHECK_THAT(show.err, Catch::Contains("ask for it by id or as <tenant>/ci-web"));
  KilnRun by_ref = lab.kiln("alloc show zeta/ci-web -o json", CliLab::kAdminToken);
  INFO(by_ref.err);
  REQUIRE(by_ref.status == 0);
  CHECK(json::parse(by_ref.out)["id"] == zeta["id"]);
}
