// kiln against a real kilnd: power actions with --wait, the live event
// stream in each output format, and the patch verbs of the resources kilnd
// lets change.
#include <catch2/catch.hpp>

#include <yaml-cpp/yaml.h>

#include <sstream>

#include "cli_lab.h"
#include "tests/support/cli_run.h"

using namespace kiln::testing;
using nlohmann::json;

namespace {

// Merges `options` into node a0's fake-driver options (a delay, a failure).
void set_fake_options(CliLab& lab, const json& options) {
  auto r = lab.admin->request("PATCH", "/v1/nodes/a0", json{{"bmc", {{"options", options}}}}.dump(),
                              {{"Authorization", std::string("Bearer ") + CliLab::kAdminToken},
                               {"Content-Type", "application/merge-patch+json"}});
  INFO(r.body);
  REQUIRE(r.status == 200);
}

std::vector<std::string> lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

}  // namespace

TEST_CASE("node power --wait: waits for the power state, exits 3 at --timeout and 1 when the action failed") {
  CliLab lab({.nodes = 1, .quota = 1});
  const std::string admin = CliLab::kAdminToken;
  // A power action that takes a while, so an answer read before it ends
  // still shows the old power state.
  set_fake_options(lab, {{"power_delay_ms", 1500}});

  KilnRun on = lab.kiln("node power on a0 --wait --timeout 30s -o json", admin);
  INFO(on.err);
  REQUIRE(on.status == 0);
  CHECK(json::parse(on.out)["power_state"] == "on");
  CHECK(json::parse(on.out)["target_power_state"].is_null());
  // Without --wait the answer is the accepted action, still on its way.
  KilnRun off = lab.kiln("node power off a0 -o json", admin);
  REQUIRE(off.status == 0);
  CHECK(json::parse(off.out)["power_state"] == "on");
  CHECK(json::parse(off.out)["target_power_state"] == "off");
  KilnRun waited = lab.kiln("node wait a0 --power off --timeout 30s -o json", admin);
  INFO(waited.err);
  REQUIRE(waited.status == 0);
  CHECK(json::parse(waited.out)["power_state"] == "off");
  // In a pipe, one plain line per change.
  CHECK(waited.err.find("a0: power ") != std::string::npos);

  // The deadline passes first: 3, and the action goes on.
  set_fake_options(lab, {{"power_delay_ms", 4000}});
  KilnRun slow = lab.kiln("node power reboot a0 --wait --timeout 1s", admin);
  CHECK(slow.status == 3);
  CHECK(slow.err.find("error: timed out after 1s; the operation goes on\n") != std::string::npos);
  CHECK(lab.get("/v1/nodes/a0")["target_power_state"] == "on");
  CHECK(lab.kiln("node wait a0 --power on --timeout 30s", admin).status == 0);

  // The driver fails the action: 1, with kilnd's reason.
  set_fake_options(lab, {{"power_delay_ms", 0}, {"fail", {"power"}}});
  KilnRun failed = lab.kiln("node power off a0 --wait --timeout 30s", admin);
  CHECK(failed.status == 1);
  CHECK(failed.err.find("error: node a0 power is on, not off: fake driver: injected failure in power\n") !=
        std::string::npos);

  KilnRun bad = lab.kiln("node wait a0 --power dim", admin);
  CHECK(bad.status == 2);
  CHECK(bad.err == "error: --power: must be on or off\n");
  bad = lab.kiln("node power on a0 --wait --timeout soon", admin);
  CHECK(bad.status == 2);
  CHECK(bad.err.rfind("error: --timeout: ", 0) == 0);
}

TEST_CASE("events --follow: one JSON object per line with -o json, a YAML document per event with -o yaml") {
  CliLab lab({.nodes = 1, .quota = 1});
  const std::string admin = CliLab::kAdminToken;
  // The lab's set-up left events (enrol, manage, provide); --since 0 replays
  // them, and the stream then follows until `timeout` stops the CLI.
  const std::string follow = "timeout 3 " + lab.kiln_command("events --follow --since 0", admin);
  const KilnRun listed = lab.kiln("events --limit 1000 -o json", admin);
  REQUIRE(listed.status == 0);
  const json events = json::parse(listed.out)["events"];
  REQUIRE(events.size() >= 3);

  kiln::test::CommandRun j = kiln::test::run_command(follow + " -o json 2>/dev/null");
  CHECK(j.status == 124);  // still following when stopped
  const std::vector<std::string> json_lines = lines(j.out);
  REQUIRE(json_lines.size() >= events.size());
  for (std::size_t i = 0; i < json_lines.size(); ++i) {
    INFO(json_lines[i]);
    const json e = json::parse(json_lines[i]);  // each line a whole document
    REQUIRE(e.is_object());
    if (i < events.size()) CHECK(e == events[i]);  // the API's JSON, unchanged
  }

  kiln::test::CommandRun y = kiln::test::run_command(follow + " -o yaml 2>/dev/null");
  const std::vector<YAML::Node> docs = YAML::LoadAll(y.out);
  REQUIRE(docs.size() >= events.size());
  for (std::size_t i = 0; i < events.size(); ++i) {
    REQUIRE(docs[i].IsMap());
    CHECK(docs[i]["seq"].as<int64_t>() == events[i]["seq"].get<int64_t>());
    CHECK(docs[i]["type"].as<std::string>() == events[i]["type"].get<std::string>());
  }

  kiln::test::CommandRun v = kiln::test::run_command(follow + " -o value -c seq -c type 2>/dev/null");
  const std::vector<std::string> value_lines = lines(v.out);
  REQUIRE(value_lines.size() >= events.size());
  CHECK(value_lines[0] == std::to_string(events[0]["seq"].get<int64_t>()) + "\t" + events[0]["type"].get<std::string>());

  KilnRun filtered = lab.kiln("events --follow --node a0", admin);
  CHECK(filtered.status == 2);
  CHECK(filtered.err == "error: --node: goes without --follow\n");
}

TEST_CASE("patch verbs: image, profile and tenant take a merge patch from flags or -f") {
  CliLab lab({.nodes = 1, .quota = 1});
  const std::string admin = CliLab::kAdminToken;
  const std::string image = lab.get("/v1/images")["images"][0]["id"];

  KilnRun r = lab.kiln("image patch " + image + " --private -o json", admin);
  INFO(r.err);
  REQUIRE(r.status == 0);
  CHECK(json::parse(r.out)["public"] == false);
  CHECK(lab.get("/v1/images/" + image)["public"] == false);
  r = lab.kiln("image patch " + image + " --public -o json", admin);
  REQUIRE(r.status == 0);
  CHECK(lab.get("/v1/images/" + image)["public"] == true);
  // kilnd's own refusal names its field: bad input, 2.
  r = lab.kiln("image patch " + image + " -f " + lab.write("img.yaml", "public: maybe\n"), admin);
  CHECK(r.status == 2);
  CHECK(r.err.rfind("error: /public: ", 0) == 0);

  r = lab.kiln("profile patch cpu-lab --description 'lab CPUs, no GPU' -o json", admin);
  INFO(r.err);
  REQUIRE(r.status == 0);
  CHECK(lab.get("/v1/profiles/cpu-lab")["description"] == "lab CPUs, no GPU");

  r = lab.kiln("tenant patch acme --display-name 'Acme Corp' -o json", admin);
  INFO(r.err);
  REQUIRE(r.status == 0);
  CHECK(json::parse(r.out)["display_name"] == "Acme Corp");
  const std::string quotas =
      lab.write("q.yaml", "quotas:\n  - {profile: cpu-lab, kind: baremetal, max_nodes: 7}\n");
  r = lab.kiln("tenant patch acme -f " + quotas, admin);
  REQUIRE(r.status == 0);
  const json tenant = lab.get("/v1/tenants/acme");
  CHECK(tenant["display_name"] == "Acme Corp");  // a merge patch leaves what it does not name
  CHECK(tenant["quotas"][0]["max_nodes"] == 7);

  r = lab.kiln("tenant patch acme", admin);
  CHECK(r.status == 2);
  CHECK(r.err == "error: -f: nothing to change: give -f FILE (a merge patch) or flags\n");
  r = lab.kiln("tenant patch acme --display-name Mine");  // a tenant token: admin only
  CHECK(r.status == 1);
  CHECK(r.err.rfind("error: ", 0) == 0);
  CHECK(lab.get("/v1/tenants/acme")["display_name"] == "Acme Corp");
  r = lab.kiln("image patch " + image + " --name other", admin);
  CHECK(r.status == 2);
  CHECK(r.err == "error: --name: unknown flag for this command (see --help)\n");
}
