// gpu_inventory, gpu_health and XID parsing: the no-NVML rules on this
// machine, and the verdicts on NVML snapshots built by the test.
#include <catch2/catch.hpp>

#include "agent/validate/checks/gpu_health.h"
#include "agent/validate/checks/gpu_inventory.h"
#include "agent/validate/checks/kernel_log.h"
#include "agent/validate/checks/nvml.h"
#include "agent/validate/checks/profile.h"
#include "tests/unit/agent_checks/plan_helpers.h"
#include "tests/unit/agent_checks/temp_tree.h"

using kiln::agent::CheckStatus;
using kiln::agent::NvmlSnapshot;
using kiln::agent::ValidationProfile;
using kiln::test::TempTree;
using kiln::test::profile_from;

namespace {

// NVML that cannot load, whatever the machine has installed.
kiln::Result<NvmlSnapshot> no_nvml() { return kiln::agent::read_nvml("/nonexistent/libnvidia-ml.so.1"); }

NvmlSnapshot h100_node(int gpus) {
  NvmlSnapshot s;
  s.driver_version = "550.54.15";
  s.cuda_version = "12.4";
  for (int i = 0; i < gpus; ++i) {
    kiln::agent::GpuDeviceInfo g;
    g.index = static_cast<unsigned>(i);
    g.name = "NVIDIA H100 80GB HBM3";
    g.memory_total_bytes = 85'520'809'984ULL;
    g.ecc = kiln::agent::GpuEcc{};
    g.remapped_rows = kiln::agent::GpuRemappedRows{};
    g.throttle_reasons = 0x1;  // idle
    s.devices.push_back(g);
  }
  return s;
}

constexpr const char* kH100 =
    R"({"gpu":{"count":8,"model":"H100","memory_gib_min":79,"driver_min":"535.104","cuda_min":"12.2"}})";

}  // namespace

TEST_CASE("read_nvml reports why it cannot load the library", "[nvml]") {
  auto r = no_nvml();
  REQUIRE_FALSE(r);
  CHECK(r.error().code == kiln::Code::kUnavailable);
  CHECK(r.error().message.find("cannot load /nonexistent/libnvidia-ml.so.1") == 0);
}

TEST_CASE("gpu_inventory without NVML: skip for a CPU profile, 'expected 8 GPUs, found 0' for a GPU one",
          "[inventory]") {
  TempTree t;
  t.mkdir("sys/bus/pci/devices");
  auto cpu = kiln::agent::check_gpu_inventory(profile_from(R"({"gpu":{"count":0}})"), no_nvml(), t.path("sys"));
  CHECK(cpu.status == CheckStatus::kSkip);
  CHECK(cpu.value == 0);

  auto gpu = kiln::agent::check_gpu_inventory(profile_from(kH100), no_nvml(), t.path("sys"));
  CHECK(gpu.status == CheckStatus::kFail);
  CHECK(gpu.value == 0);
  CHECK(gpu.details["reason"].get<std::string>().rfind("expected 8 GPUs, found 0: cannot load", 0) == 0);
  CHECK(gpu.threshold["expected"] == 8);
}

TEST_CASE("gpu_inventory cross-checks the PCI bus when the driver is unusable", "[inventory]") {
  TempTree t;
  for (int i = 0; i < 8; ++i) t.pci_device("0000:" + std::to_string(10 + i) + ":00.0", "0x10de", "0x030200");
  auto r = kiln::agent::check_gpu_inventory(profile_from(kH100), no_nvml(), t.path("sys"));
  CHECK(r.status == CheckStatus::kFail);
  CHECK(r.details["pci_nvidia_gpus"] == 8);
  CHECK(r.details["reason"].get<std::string>().find("(PCI lists 8 NVIDIA GPUs: driver not usable)") !=
        std::string::npos);
}

TEST_CASE("gpu_inventory judges an NVML snapshot against the profile", "[inventory]") {
  TempTree t;
  for (int i = 0; i < 8; ++i) t.pci_device("0000:" + std::to_string(10 + i) + ":00.0", "0x10de", "0x030200");
  const auto p = profile_from(kH100);
  SECTION("all as promised") {
    auto r = kiln::agent::check_gpu_inventory(p, h100_node(8), t.path("sys"));
    CHECK(r.status == CheckStatus::kPass);
    CHECK(r.value == 8);
    CHECK(r.details["gpus"].size() == 8);
  }
  SECTION("a GPU missing from NVML but present on the bus") {
    auto r = kiln::agent::check_gpu_inventory(p, h100_node(7), t.path("sys"));
    CHECK(r.status == CheckStatus::kFail);
    CHECK(r.details["reasons"][0] == "expected 8 GPUs, found 7");
    CHECK(r.details["reasons"][1] == "PCI lists 8 NVIDIA GPUs but NVML sees 7");
  }
  SECTION("wrong model, small memory, old driver") {
    NvmlSnapshot s = h100_node(8);
    s.devices[3].name = "NVIDIA A100-SXM4-80GB";
    s.devices[5].memory_total_bytes = 40ULL << 30;
    s.driver_version = "535.54.03";
    s.cuda_version = "12.1";
    auto r = kiln::agent::check_gpu_inventory(p, s, t.path("sys"));
    CHECK(r.status == CheckStatus::kFail);
    const std::string all = r.details["reasons"].dump();
    CHECK(all.find("GPU3 is 'NVIDIA A100-SXM4-80GB', expected model H100") != std::string::npos);
    CHECK(all.find("GPU5 has 40.0 GiB, expected at least 79.0 GiB") != std::string::npos);
    CHECK(all.find("driver 535.54.03 is older than 535.104") != std::string::npos);
    CHECK(all.find("driver supports CUDA 12.1, expected >= 12.2") != std::string::npos);
  }
}

TEST_CASE("compare_versions orders dotted versions numerically", "[profile]") {
  CHECK(kiln::agent::compare_versions("550.54.15", "535.104.05") > 0);
  CHECK(kiln::agent::compare_versions("535.54", "535.104") < 0);
  CHECK(kiln::agent::compare_versions("12.4", "12.4.0") == 0);
  CHECK(kiln::agent::compare_versions("12.10", "12.9") > 0);
}

TEST_CASE("XID lines are parsed from dmesg text and /dev/kmsg records", "[xid]") {
  const std::string log =
      "[    5.123456] nvidia: loading out-of-tree module taints kernel.\n"
      "[ 1234.567890] NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, name=python, GPU has fallen off the bus.\n"
      "4,1892,2345678901,-;NVRM: Xid (PCI:0000:86:00): 48, pid='<unknown>', name=<unknown>, "
      "An uncorrectable double bit error (DBE) has been detected on GPU in the framebuffer at partition 6.\n"
      "NVRM: Xid (PCI:0000:18:00): 13, Graphics SM Warp Exception on (GPC 0, TPC 1, SM 0)\n"
      "NVRM: Xid (PCI:0000:18:00): not a number here\n"
      "NVRM: GPU at PCI:0000:18:00: GPU-abc\n";
  const auto x = kiln::agent::parse_xid_events(log);
  REQUIRE(x.size() == 3);
  CHECK(x[0].pci == "0000:3b:00");
  CHECK(x[0].code == 79);
  CHECK(x[0].message == "pid=1234, name=python, GPU has fallen off the bus.");
  CHECK(x[1].pci == "0000:86:00");
  CHECK(x[1].code == 48);
  CHECK(x[2].code == 13);
  CHECK(std::string(kiln::agent::xid_meaning(79)) == "GPU has fallen off the bus");
}

TEST_CASE("read_kernel_log reads a saved log and says why it cannot", "[xid]") {
  TempTree t;
  t.write("kmsg", "6,1,100,-;Linux version 6.1\n3,2,200,-;NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus.\n");
  kiln::agent::HostPaths p;
  p.kmsg = t.path("kmsg");
  p.dmesg_fallback = false;
  auto log = kiln::agent::read_kernel_log(p);
  REQUIRE(log);
  CHECK(kiln::agent::parse_xid_events(*log).size() == 1);
  p.kmsg = t.path("absent");
  auto missing = kiln::agent::read_kernel_log(p);
  REQUIRE_FALSE(missing);
  CHECK(missing.error().message.find("No such file or directory") != std::string::npos);
}

TEST_CASE("gpu_health fails on XIDs, ECC, remapping and harmful throttling", "[health]") {
  const auto p = profile_from(R"({"gpu":{"count":2,"xid_ignore":[13]}})");
  const kiln::Result<std::string> clean_log = std::string("[1.0] nothing here\n");
  SECTION("healthy") {
    auto r = kiln::agent::check_gpu_health(p, h100_node(2), clean_log);
    CHECK(r.status == CheckStatus::kPass);
    CHECK(r.value == 0);
    CHECK(r.details["gpus"][0]["throttle_reasons"][0] == "gpu_idle");
  }
  SECTION("an XID, and an ignored one") {
    const kiln::Result<std::string> log = std::string(
        "NVRM: Xid (PCI:0000:18:00): 13, Graphics Exception\nNVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus.\n");
    auto r = kiln::agent::check_gpu_health(p, h100_node(2), log);
    CHECK(r.status == CheckStatus::kFail);
    CHECK(r.value == 1);
    CHECK(r.details["reason"] == "XID 79 on PCI 0000:3b:00 (GPU has fallen off the bus)");
    CHECK(r.details["xid_events"][0]["ignored"] == true);
  }
  SECTION("device faults") {
    NvmlSnapshot s = h100_node(2);
    s.devices[0].ecc->volatile_uncorrected = 2;
    s.devices[1].remapped_rows->pending = true;
    s.devices[1].throttle_reasons = 0x40 | 0x4;
    auto r = kiln::agent::check_gpu_health(p, s, clean_log);
    CHECK(r.status == CheckStatus::kFail);
    CHECK(r.value == 3);
    const std::string all = r.details["reasons"].dump();
    CHECK(all.find("GPU0: 2 uncorrected ECC errors since boot") != std::string::npos);
    CHECK(all.find("GPU1: row remapping pending") != std::string::npos);
    CHECK(all.find("GPU1: clocks slowed (sw_power_cap, hw_thermal_slowdown)") != std::string::npos);
  }
  SECTION("no NVML: fail for a GPU profile, skip for a CPU one; an unreadable log is a warning") {
    const kiln::Result<std::string> unreadable = kiln::Error(kiln::Code::kUnavailable, "cannot read the kernel log");
    auto r = kiln::agent::check_gpu_health(p, no_nvml(), unreadable);
    CHECK(r.status == CheckStatus::kFail);
    CHECK(r.details["reason"].get<std::string>().rfind("NVML unavailable", 0) == 0);
    CHECK(r.details["warnings"][0] == "cannot read the kernel log");
    auto cpu = kiln::agent::check_gpu_health(profile_from(R"({"gpu":{"count":0}})"), no_nvml(), clean_log);
    CHECK(cpu.status == CheckStatus::kSkip);
  }
}

TEST_CASE("profile errors name the field", "[profile]") {
  auto bad = ValidationProfile::from_json(nlohmann::json::parse(R"({"gpu":{"count":"eight"}})"));
  REQUIRE_FALSE(bad);
  CHECK(bad.error().fields.at(0).field == "/gpu/count");
  auto neg = ValidationProfile::from_json(nlohmann::json::parse(R"({"jitter":{"duration_s":-1}})"));
  REQUIRE_FALSE(neg);
  CHECK(neg.error().fields.at(0).field == "/jitter/duration_s");
  auto ok = ValidationProfile::from_json(nlohmann::json::parse(R"({"thresholds":{"hbm_gbps_min":4080}})"));
  REQUIRE(ok);
  CHECK(ok->hbm_gbps_min.value() == 4080);
  CHECK(ok->gpu_count == 0);
}
