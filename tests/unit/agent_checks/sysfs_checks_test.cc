// pcie_links and gpudirect_rdma against sysfs trees the tests write.
#include <catch2/catch.hpp>

#include "agent/validate/checks/gpudirect_rdma.h"
#include "agent/validate/checks/pcie_links.h"
#include "agent/validate/checks/profile.h"
#include "agent/validate/checks/sysfs.h"
#include "tests/unit/agent_checks/plan_helpers.h"
#include "tests/unit/agent_checks/temp_tree.h"

using kiln::agent::CheckStatus;
using kiln::test::TempTree;
using kiln::test::profile_from;

namespace {

void write_gpu_node(const TempTree& t, const std::string& gpu0_width) {
  t.pci_device("0000:18:00.0", "0x10de", "0x030200", "32.0 GT/s PCIe", "32.0 GT/s PCIe", gpu0_width, "16");
  t.pci_device("0000:2a:00.0", "0x10de", "0x030200", "32.0 GT/s PCIe", "32.0 GT/s PCIe", "16", "16");
  t.pci_device("0000:1a:00.0", "0x15b3", "0x020700", "32.0 GT/s PCIe", "32.0 GT/s PCIe", "16", "16");
  // An NVSwitch (bridge class) and a root port: neither is judged.
  t.pci_device("0000:05:00.0", "0x10de", "0x068000", "2.5 GT/s PCIe", "32.0 GT/s PCIe", "1", "16");
  t.pci_device("0000:00:01.0", "0x8086", "0x060400", "2.5 GT/s PCIe", "32.0 GT/s PCIe", "1", "16");
}

}  // namespace

TEST_CASE("pcie_links passes when every GPU and NIC runs at full width and speed", "[pcie]") {
  TempTree t;
  write_gpu_node(t, "16");
  auto r = kiln::agent::check_pcie_links(profile_from(R"({"gpu":{"count":2}})"), t.path("sys"));
  CHECK(r.status == CheckStatus::kPass);
  CHECK(r.value == 0);
  CHECK(r.details["devices"].size() == 3);  // two GPUs and the NIC; not the NVSwitch or the root port
  CHECK(r.details["devices"][0]["generation"] == 5);
}

TEST_CASE("pcie_links fails a GPU trained at x8 of x16", "[pcie]") {
  TempTree t;
  write_gpu_node(t, "8");
  auto r = kiln::agent::check_pcie_links(profile_from(R"({"gpu":{"count":2}})"), t.path("sys"));
  CHECK(r.status == CheckStatus::kFail);
  CHECK(r.value == 1);
  CHECK(r.details["reason"].get<std::string>() == "GPU 0000:18:00.0 link is x8, capable of x16");
}

TEST_CASE("pcie_links fails a slow NIC link but only warns for an idle GPU's slow link", "[pcie]") {
  TempTree t;
  t.pci_device("0000:18:00.0", "0x10de", "0x030200", "2.5 GT/s PCIe", "32.0 GT/s PCIe", "16", "16");
  t.pci_device("0000:1a:00.0", "0x15b3", "0x020700", "16.0 GT/s PCIe", "32.0 GT/s PCIe", "16", "16");
  auto lenient = kiln::agent::check_pcie_links(profile_from(R"({"gpu":{"count":1}})"), t.path("sys"));
  CHECK(lenient.status == CheckStatus::kFail);
  CHECK(lenient.value == 1);
  REQUIRE(lenient.details["reasons"].size() == 1);
  CHECK(lenient.details["reasons"][0].get<std::string>().find("NIC 0000:1a:00.0") == 0);
  CHECK(lenient.details["warnings"].size() == 1);

  auto strict = kiln::agent::check_pcie_links(
      profile_from(R"({"gpu":{"count":1},"pcie":{"strict_gpu_speed":true}})"), t.path("sys"));
  CHECK(strict.value == 2);
}

TEST_CASE("pcie_links: no GPU on the bus fails a GPU profile and skips a CPU one", "[pcie]") {
  TempTree t;
  t.pci_device("0000:00:03.0", "0x1af4", "0x020000");  // virtio-net: no link attributes
  auto gpu = kiln::agent::check_pcie_links(profile_from(R"({"gpu":{"count":8}})"), t.path("sys"));
  CHECK(gpu.status == CheckStatus::kFail);
  CHECK(gpu.details["reason"] == "expected 8 GPUs, found 0 on the PCI bus");
  auto cpu = kiln::agent::check_pcie_links(profile_from(R"({"gpu":{"count":0}})"), t.path("sys"));
  CHECK(cpu.status == CheckStatus::kSkip);
  CHECK(cpu.details["devices"][0]["link"] == "no link info");
}

namespace {

void write_ib_port(const TempTree& t, const std::string& dev, const std::string& state, const std::string& rate) {
  const std::string p = "sys/class/infiniband/" + dev + "/ports/1/";
  t.write(p + "state", state + "\n");
  t.write(p + "rate", rate + "\n");
  t.write(p + "link_layer", "InfiniBand\n");
}

kiln::agent::HostPaths paths_in(const TempTree& t) {
  kiln::agent::HostPaths p;
  p.sys = t.path("sys");
  p.proc = t.path("proc");
  p.kmsg = t.path("kmsg");
  p.dmesg_fallback = false;
  return p;
}

constexpr const char* kRdmaProfile = R"({"gpu":{"count":8},"rdma":{"ports":2,"rate_gbps":400}})";

}  // namespace

TEST_CASE("gpudirect_rdma passes with peermem and every port ACTIVE at the expected rate", "[rdma]") {
  TempTree t;
  t.mkdir("sys/module/nvidia_peermem");
  write_ib_port(t, "mlx5_0", "4: ACTIVE", "400 Gb/sec (4X NDR)");
  write_ib_port(t, "mlx5_1", "4: ACTIVE", "400 Gb/sec (4X NDR)");
  auto r = kiln::agent::check_gpudirect_rdma(profile_from(kRdmaProfile), paths_in(t));
  CHECK(r.status == CheckStatus::kPass);
  CHECK(r.value == 2);
  CHECK(r.details["gpu_memory_registration"] == "nvidia_peermem");
}

TEST_CASE("gpudirect_rdma fails when ports are DOWN", "[rdma]") {
  TempTree t;
  t.mkdir("sys/module/nvidia_peermem");
  write_ib_port(t, "mlx5_0", "4: ACTIVE", "400 Gb/sec (4X NDR)");
  write_ib_port(t, "mlx5_1", "1: DOWN", "10 Gb/sec (4X SDR)");
  auto r = kiln::agent::check_gpudirect_rdma(profile_from(kRdmaProfile), paths_in(t));
  CHECK(r.status == CheckStatus::kFail);
  CHECK(r.value == 1);
  CHECK(r.details["reason"] == "mlx5_1/1 is 1: DOWN");
}

TEST_CASE("gpudirect_rdma fails an ACTIVE port at a lower rate, and no registration path", "[rdma]") {
  TempTree t;
  write_ib_port(t, "mlx5_0", "4: ACTIVE", "400 Gb/sec (4X NDR)");
  write_ib_port(t, "mlx5_1", "4: ACTIVE", "200 Gb/sec (4X HDR)");
  auto r = kiln::agent::check_gpudirect_rdma(profile_from(kRdmaProfile), paths_in(t));
  CHECK(r.status == CheckStatus::kFail);
  const auto reasons = r.details["reasons"].dump();
  CHECK(reasons.find("mlx5_1/1 runs at 200 Gb/sec (4X HDR), expected 400 Gb/s") != std::string::npos);
  CHECK(reasons.find("nvidia_peermem not loaded") != std::string::npos);

  // The open kernel module's dma-buf is the other registration path.
  t.write("proc/driver/nvidia/version",
          "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  550.54.15  Release Build\n");
  auto r2 = kiln::agent::check_gpudirect_rdma(profile_from(kRdmaProfile), paths_in(t));
  CHECK(r2.details["gpu_memory_registration"] == "dma-buf");
  CHECK(r2.details["reasons"].size() == 2);  // the slow port and the count
}

TEST_CASE("gpudirect_rdma skips when the profile expects no RDMA, fails when none is present", "[rdma]") {
  TempTree t;
  t.mkdir("sys");
  auto none = kiln::agent::check_gpudirect_rdma(profile_from(R"({"gpu":{"count":0}})"), paths_in(t));
  CHECK(none.status == CheckStatus::kSkip);
  auto missing = kiln::agent::check_gpudirect_rdma(profile_from(kRdmaProfile), paths_in(t));
  CHECK(missing.status == CheckStatus::kFail);
  CHECK(missing.details["reason"] == "expected 2 RDMA ports, found no RDMA device");
}
