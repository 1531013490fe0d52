// What a BMC reports is hostile text: a captured tree (GH200) served by
// kiln-vbmc with a newline-and-ProxyCommand serial number and a terminal
// escape in a GPU's model. The driver cleans them where they enter
// (drivers/redfish/props.h, common/machine_values.h printable_field): no
// control character reaches the inventory, the GPUs still merge by serial,
// and a warning names what was cleaned.

#include <utility>  // before Asio

#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "tests/integration/redfish/driver_harness.h"
#include "tests/integration/redfish/vbmc_process.h"
#include "tests/support/scratch_dir.h"

namespace {

using namespace kiln;
using nlohmann::json;
namespace fs = std::filesystem;

const std::string kRepoTrees = KILN_REPO_REDFISH_FIXTURES;
const std::string kHostileSerial = "1640124000234\nProxyCommand touch /tmp/pwn\r\x1b]0;x\x07";
// Invalid UTF-8 never gets this far: parse_json refuses the whole body.
const std::string kHostileModel = "NVIDIA GH200\x1b[2J 96GB\tHBM3\xe2\x80\xae";

// Sets `key` to `value` in the JSON file at `path` (control characters go
// on the wire as \u00XX escapes, as a BMC's JSON would carry them).
void rewrite(const fs::path& path, const char* key, const std::string& value) {
  json j = json::parse(std::ifstream(path));
  REQUIRE(j.contains(key));
  j[key] = value;
  std::ofstream(path, std::ios::binary | std::ios::trunc) << j.dump(2);
}

bool clean(const std::string& s) {
  for (unsigned char c : s)
    if (c < 0x20 || c == 0x7f) return false;
  return s.find("\xe2\x80\xae") == std::string::npos;
}

// Every string anywhere in `j`.
void all_strings(const json& j, std::vector<std::string>& out) {
  if (j.is_string()) out.push_back(j.get<std::string>());
  if (j.is_structured())
    for (const auto& v : j) all_strings(v, out);
}

// A copy of the captured GH200 tree in `dir`, to be altered and served.
fs::path copy_gh200(const kiln::testing::ScratchDir& dir) {
  REQUIRE_FALSE(dir.path().empty());
  const fs::path tree = fs::path(dir.path()) / "gh200";
  fs::copy(kRepoTrees + "/nvidia-gh200", tree, fs::copy_options::recursive);
  return tree;
}

// The inventory's warning about a body over the bound, or "".
std::string too_large_warning(const json& inv) {
  for (const auto& w : inv.value("warnings", json::array()))
    if (w.get<std::string>().find("too large") != std::string::npos) return w.get<std::string>();
  return "";
}

}  // namespace

TEST_CASE("BMC values: control characters in SerialNumber and Model never reach the inventory",
          "[redfish][inventory][security]") {
  kiln::testing::ScratchDir dir;
  const fs::path tree = copy_gh200(dir);
  const fs::path v1 = tree / "redfish" / "v1";
  for (const fs::path& p : {v1 / "Systems/HGX_Baseboard_0/Processors/GPU_0/index.json",
                            v1 / "Chassis/HGX_GPU_0/index.json",
                            v1 / "Chassis/HGX_GPU_0/PCIeDevices/GPU_0/index.json"}) {
    rewrite(p, "SerialNumber", kHostileSerial);
    rewrite(p, "Model", kHostileModel);
  }

  testing::VbmcProcess v(testing::vbmc_args({"--mockup", tree.string()}));
  testing::DriverHarness h(v);
  Result<json> inv = h.inspect();
  INFO((inv ? std::string() : inv.error().message));
  REQUIRE(inv);
  INFO(inv->dump(1));
  // The served tree really carried the bytes (the test can fail).
  REQUIRE(inv->contains("gpus"));
  REQUIRE((*inv)["gpus"].size() == 2);  // still merged by (cleaned) serial
  std::set<std::string> serials;
  std::set<std::string> models;
  for (const auto& g : (*inv)["gpus"]) {
    serials.insert(g["serial"].get<std::string>());
    models.insert(g["model"].get<std::string>());
  }
  CHECK(serials == std::set<std::string>{"1640124000234 ProxyCommand touch /tmp/pwn ]0;x", "1640124000373"});
  CHECK(models == std::set<std::string>{"NVIDIA GH200[2J 96GB HBM3", "NVIDIA GH200 96GB HBM3"});
  std::vector<std::string> strings;
  all_strings(*inv, strings);
  for (const std::string& s : strings) {
    INFO(json(s).dump());
    CHECK(clean(s));
  }
  bool warned = false;
  for (const auto& w : (*inv)["warnings"])
    warned = warned || w.get<std::string>().find("removed from: ") != std::string::npos;
  CHECK(warned);
}

TEST_CASE("BMC replies: a body over the driver's bound is not read, and the inspection names the resource it skipped",
          "[redfish][inventory][security]") {
  kiln::testing::ScratchDir dir;
  const fs::path tree = copy_gh200(dir);
  const fs::path chassis = tree / "redfish" / "v1" / "Chassis/HGX_GPU_0/index.json";
  // A bound of 256 KiB stands in for the 16 MiB default, which would take
  // the test's time in JSON: one resource the inspection reads grows past it.
  RedfishDriverOptions o = testing::fast_options();
  o.max_response_bytes = 256 * 1024;
  auto serve_with = [&](std::size_t padding) {
    json j = json::parse(std::ifstream(chassis));
    j["Description"] = std::string(padding, 'x');
    std::ofstream(chassis, std::ios::binary | std::ios::trunc) << j.dump();
  };
  {
    serve_with(200 * 1024);
    testing::VbmcProcess v(testing::vbmc_args({"--mockup", tree.string()}));
    testing::DriverHarness h(v, testing::kPassword, o);
    Result<json> inv = h.inspect();
    INFO((inv ? std::string() : inv.error().message));
    REQUIRE(inv);
    CHECK(too_large_warning(*inv).empty());
  }
  {
    serve_with(300 * 1024);
    testing::VbmcProcess v(testing::vbmc_args({"--mockup", tree.string()}));
    testing::DriverHarness h(v, testing::kPassword, o);
    Result<json> inv = h.inspect();
    INFO((inv ? std::string() : inv.error().message));
    REQUIRE(inv);
    CHECK(too_large_warning(*inv) == "skipped: redfish: GET " + v.url() +
                                         "/redfish/v1/Chassis/HGX_GPU_0: read from " + v.url() +
                                         ": response body too large");
  }
}
