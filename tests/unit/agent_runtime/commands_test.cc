// NodeCommands: the real command table, with the power action replaced.
#include <catch2/catch.hpp>

#include "agent/runtime/commands.h"
#include "common/crypto.h"
#include "tests/unit/agent_checks/temp_tree.h"

using nlohmann::json;

namespace {
const kiln::Logger kQuiet(kiln::LogLevel::kOff);
}

TEST_CASE("reboot and poweroff act only after the result is posted", "[commands]") {
  std::vector<kiln::agent::PowerAction> actions;
  kiln::agent::NodeCommandOptions o;
  o.power = [&](kiln::agent::PowerAction a) { actions.push_back(a); };
  kiln::agent::NodeCommands commands(o, kQuiet);
  auto reboot = commands.run("reboot", json::object(), "s");
  CHECK(reboot.ok);
  CHECK(reboot.result == json::object());
  CHECK(actions.empty());
  REQUIRE(reboot.after_post);
  reboot.after_post();
  auto off = commands.run("poweroff", json::object(), "s");
  off.after_post();
  CHECK(actions == std::vector{kiln::agent::PowerAction::kReboot, kiln::agent::PowerAction::kPowerOff});
}

TEST_CASE("inspect runs the collectors under the configured root", "[commands]") {
  kiln::test::TempTree t;
  t.write("proc/meminfo", "MemTotal: 1024 kB\n");
  t.mkdir("sys/firmware/efi");
  kiln::agent::NodeCommandOptions o;
  o.root = t.root();
  o.nvml_library = "";
  kiln::agent::NodeCommands commands(o, kQuiet);
  auto r = commands.run("inspect", json::object(), "s");
  REQUIRE(r.ok);
  CHECK(r.result["memory"]["total_bytes"] == 1024 * 1024);
  CHECK(r.result["boot_mode"] == "uefi");
}

TEST_CASE("unknown commands and bad arguments are error outcomes", "[commands]") {
  kiln::agent::NodeCommands commands({}, kQuiet);
  auto unknown = commands.run("format_c", json::object(), "s");
  CHECK_FALSE(unknown.ok);
  CHECK(unknown.error == "unknown command 'format_c'");
  auto bad = commands.run("write_image", {{"url", 42}}, "s");
  CHECK_FALSE(bad.ok);
  CHECK(bad.error.find("bad arguments") != std::string::npos);
  auto no_sha = commands.run("write_image", {{"url", "http://127.0.0.1:1/x"}}, "s");
  CHECK_FALSE(no_sha.ok);
  auto plan = commands.run("validate", {{"plan", "no-such-plan"}, {"profile", json::object()}}, "s");
  CHECK_FALSE(plan.ok);
}

TEST_CASE("wipe with no eligible disks under the root reports an empty list", "[commands]") {
  kiln::test::TempTree t;
  t.write("sys/block/sr0/size", "2048\n");
  t.write("sys/block/sr0/removable", "1\n");
  kiln::agent::NodeCommandOptions o;
  o.root = t.root();
  kiln::agent::NodeCommands commands(o, kQuiet);
  auto r = commands.run("wipe", {{"full_overwrite", false}}, "s");
  REQUIRE(r.ok);
  CHECK(r.result["disks"].empty());
}

TEST_CASE("write_config_drive goes to the disk write_image wrote, or the one named", "[commands]") {
  kiln::agent::NodeCommands commands({}, kQuiet);
  const std::string iso = std::string(32768, '\0') + "\x01" "CD001" + std::string(2042, '\0');
  json args = {{"iso_base64", kiln::base64_encode(iso)}};
  auto none = commands.run("write_config_drive", args, "s");
  CHECK_FALSE(none.ok);
  CHECK(none.error == "write_config_drive: no image was written by this agent and no device was named");
  auto bad = commands.run("write_config_drive", {{"iso_base64", "%%%"}, {"device", "/nonexistent"}}, "s");
  CHECK_FALSE(bad.ok);
  CHECK(bad.error.rfind("write_config_drive: iso_base64: ", 0) == 0);
  // A named device without a partition table: the writer's own refusal comes back.
  kiln::test::TempTree t;
  t.write("disk.img", std::string(4 * 1024 * 1024, '\0'));
  args["device"] = t.path("disk.img");
  auto blank = commands.run("write_config_drive", args, "s");
  CHECK_FALSE(blank.ok);
  CHECK(blank.error.find("has no partition table") != std::string::npos);
}
