// jitter on this machine and nvme_read against files the test writes.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <string>

#include "agent/validate/checks/jitter.h"
#include "agent/validate/checks/nvme_read.h"
#include "agent/validate/checks/profile.h"
#include "tests/unit/agent_checks/plan_helpers.h"
#include "tests/unit/agent_checks/temp_tree.h"

using kiln::agent::CheckStatus;
using kiln::test::TempTree;
using kiln::test::profile_from;

TEST_CASE("jitter measures scheduling gaps on this machine for the profile's duration", "[jitter]") {
  TempTree t;
  t.write("sys/class/dmi/id/sys_vendor", "QEMU\n");
  t.write("sys/class/dmi/id/product_name", "Standard PC (Q35 + ICH9, 2009)\n");
  // Generous: a shared CI VM stalls for milliseconds at times.
  auto r = kiln::agent::check_jitter(
      profile_from(R"({"jitter":{"duration_s":0.5},"thresholds":{"jitter_p999_us_max":20000}})"), t.path("sys"));
  const auto& d = r.details;
  CHECK(d["duration_s"].get<double>() >= 0.5);
  CHECK(d["duration_s"].get<double>() < 5.0);
  CHECK(d["samples"].get<long long>() > 1000);
  CHECK(r.value.get<double>() > 0);
  CHECK(d["p50_us"].get<double>() <= r.value.get<double>());
  CHECK(r.value.get<double>() <= d["max_us"].get<double>());
  CHECK(r.threshold["max"] == 20000.0);
  CHECK(r.status == CheckStatus::kPass);
  CHECK(d["hypervisor"]["sys_vendor"] == "QEMU");
  CHECK(d["hypervisor"]["detected"] == true);
}

TEST_CASE("jitter fails when the longest gap is over an impossible budget", "[jitter]") {
  TempTree t;
  // 0.01 us max gap: two clock reads are never that close, so this must fail.
  auto r = kiln::agent::check_jitter(
      profile_from(R"({"jitter":{"duration_s":0.1},"thresholds":{"jitter_max_us_max":0.01}})"), t.path("sys"));
  CHECK(r.status == CheckStatus::kFail);
  CHECK(r.details["reason"].get<std::string>().find("longest scheduling gap") == 0);
  CHECK(r.threshold["max_gap"] == 0.01);
}

TEST_CASE("nvme_read reads a file with O_DIRECT, or says why it could not", "[nvme]") {
  TempTree t;
  const std::string file = t.path("disk.img");
  {
    std::string block(1 << 20, '\0');
    for (std::size_t i = 0; i < block.size(); ++i) block[i] = static_cast<char>(i * 7);
    std::string data;
    for (int i = 0; i < 8; ++i) data += block;
    t.write("disk.img", data);
  }
  t.mkdir("sys/block");
  auto r = kiln::agent::check_nvme_read(
      profile_from(R"({"nvme":{"read_mib":16},"thresholds":{"nvme_gbps_min":0.001}})"), t.path("sys"), file);
  CHECK(r.details["target"] == file);
  CHECK(r.details["bytes"] == 8u << 20);  // the file is smaller than asked: read to its end
  CHECK(r.value.get<double>() > 0);
  if (r.details["direct"] == true) {
    CHECK(r.status == CheckStatus::kPass);
    CHECK(r.details["warnings"].size() == 1);
  } else {
    // tmpfs and some overlays refuse O_DIRECT: the figure is the page cache's.
    CHECK(r.status == CheckStatus::kSkip);
    CHECK(r.details["reason"].get<std::string>().find("refused O_DIRECT") != std::string::npos);
  }
}

TEST_CASE("nvme_read fails below its floor, on a missing target, and when NVMe is expected but absent", "[nvme]") {
  TempTree t;
  t.write("disk.img", std::string(1 << 20, 'x'));
  t.mkdir("sys/block");
  auto slow = kiln::agent::check_nvme_read(
      profile_from(R"({"nvme":{"read_mib":1},"thresholds":{"nvme_gbps_min":1e9}})"), t.path("sys"), t.path("disk.img"));
  if (slow.details["direct"] == true) {
    CHECK(slow.status == CheckStatus::kFail);
    CHECK(slow.details["reason"].get<std::string>().find("expected at least") != std::string::npos);
  }

  auto missing = kiln::agent::check_nvme_read(profile_from("{}"), t.path("sys"), t.path("absent"));
  CHECK(missing.status == CheckStatus::kFail);
  CHECK(missing.details["reason"].get<std::string>().find("No such file or directory") != std::string::npos);

  auto none = kiln::agent::check_nvme_read(profile_from("{}"), t.path("sys"));
  CHECK(none.status == CheckStatus::kSkip);
  auto expected = kiln::agent::check_nvme_read(profile_from(R"({"nvme":{"devices":2}})"), t.path("sys"));
  CHECK(expected.status == CheckStatus::kFail);
  CHECK(expected.details["reason"] == "expected 2 NVMe devices, found 0");

  // A namespace listed in sysfs is picked up (its /dev node does not exist here).
  t.mkdir("sys/block/nvme0n1");
  t.mkdir("sys/block/nvme0c0n1");
  auto listed = kiln::agent::check_nvme_read(profile_from(R"({"nvme":{"devices":1,"read_mib":1}})"), t.path("sys"));
  CHECK(listed.details["nvme_namespaces"].size() == 1);
  CHECK(listed.details["target"] == "/dev/nvme0n1");
}
