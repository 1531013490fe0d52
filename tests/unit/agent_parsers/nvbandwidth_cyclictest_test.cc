// nvbandwidth and cyclictest fixtures.
#include <catch2/catch.hpp>

#include "agent/validate/parsers/cyclictest.h"
#include "agent/validate/parsers/nvbandwidth.h"
#include "tests/unit/agent_parsers/fixtures.h"

using kiln::agent::parse_cyclictest;
using kiln::agent::parse_nvbandwidth;
using nlohmann::json;

TEST_CASE("nvbandwidth: README 8 GPU write CE, old style", "[fixtures][nvbandwidth]") {
  KILN_PARSE_FIXTURE(d, parse_nvbandwidth, "nvbandwidth/8gpu-d2d-memcpy-write-ce-readme.txt");
  CHECK(d["version"].is_null());
  REQUIRE(d["tests"].size() == 1);
  const json& t = d["tests"][0];
  CHECK(t["name"] == "device_to_device_memcpy_write_ce");
  CHECK(t["sum"].is_null());
  REQUIRE(t["matrices"].size() == 1);
  const json& m = t["matrices"][0];
  CHECK(m["title"] == "memcpy CE GPU(row) <- GPU(column) bandwidth (GB/s)");
  CHECK(m["direction"] == "<-");
  CHECK(m["unit"] == "GB/s");
  REQUIRE(m["values"].size() == 8);
  for (int i = 0; i < 8; ++i) {
    REQUIRE(m["values"][i].size() == 8);
    CHECK(m["values"][i][i] == 0.0);
  }
  CHECK(m["values"][0][1] == 276.07);
  CHECK(m["values"][6][0] == 274.89);
  CHECK(m["value_count"] == 56);
  CHECK(m["min"] == 274.89);
  CHECK(m["max"] == 276.76);
  CHECK(d["health"]["status"] == "pass");
}

TEST_CASE("nvbandwidth: 6 x A6000 PCIe read CE, v0.8", "[fixtures][nvbandwidth]") {
  KILN_PARSE_FIXTURE(d, parse_nvbandwidth, "nvbandwidth/a6000-6gpu-pcie-d2d-read-ce-v0.8.txt");
  CHECK(d["version"] == "v0.8");
  CHECK(d["git_version"] == "v0.8");
  CHECK(d["cuda_runtime_version"] == 13000);
  CHECK(d["cuda_driver_version"] == 13000);
  CHECK(d["driver_version"] == "580.95.05");
  REQUIRE(d["tests"].size() == 1);
  const json& t = d["tests"][0];
  CHECK(t["name"] == "device_to_device_memcpy_read_ce");  // named by the SUM line
  CHECK(t["sum"] == 715.53);
  CHECK(d["sums"] == json({{"device_to_device_memcpy_read_ce", 715.53}}));
  const json& m = t["matrices"][0];
  CHECK(m["title"] == "memcpy CE GPU(row) -> GPU(column) bandwidth (GB/s)");
  REQUIRE(m["values"].size() == 6);
  for (int i = 0; i < 6; ++i) CHECK(m["values"][i][i].is_null());  // N/A
  CHECK(m["min"] == 21.80);
  CHECK(m["max"] == 26.35);
  CHECK(m["value_count"] == 30);
  CHECK(m["values"][0][1] == 26.34);
  CHECK(m["values"][3][4] == 26.34);
  CHECK(m["values"][0][5] == 21.80);
  CHECK(d["health"]["status"] == "pass");
}

TEST_CASE("nvbandwidth: A100 host to device SM, v0.8", "[fixtures][nvbandwidth]") {
  KILN_PARSE_FIXTURE(d, parse_nvbandwidth, "nvbandwidth/a100-1gpu-h2d-memcpy-sm-v0.8.txt");
  CHECK(d["devices"] == json({{{"index", 0}, {"name", "NVIDIA A100-SXM4-40GB"}, {"bus_id", "00000000:99:00"}}}));
  CHECK(d["cuda_runtime_version"] == 12060);
  CHECK(d["driver_version"] == "560.35.05");
  REQUIRE(d["tests"].size() == 1);
  CHECK(d["tests"][0]["name"] == "host_to_device_memcpy_sm");
  CHECK(d["tests"][0]["matrices"][0]["values"] == json({{25.13}}));
  CHECK(d["tests"][0]["matrices"][0]["row_kind"] == "CPU");
  CHECK(d["tests"][0]["sum"] == 25.13);
  CHECK(d["notes"].size() == 2);
  CHECK(d["health"]["status"] == "pass");
}

TEST_CASE("nvbandwidth: data verification failure fails health", "[nvbandwidth]") {
  auto r = parse_nvbandwidth(
      "nvbandwidth Version: v0.7\n\nRunning device_to_device_memcpy_read_ce.\n"
      " Invalid value when checking the pattern at 0x70a640000000\n Current offset : 11136 \n"
      "ASSERT in expression h_errorFlag == 0 in void memcmpPatternHelper() : memcpy.cpp:165\n");
  REQUIRE(r.ok());
  CHECK((*r)["tests"][0]["errors"].size() == 3);
  CHECK((*r)["health"]["status"] == "fail");
}

TEST_CASE("cyclictest: PREEMPT_RT arm64 with header lines", "[fixtures][cyclictest]") {
  KILN_PARSE_FIXTURE(d, parse_cyclictest, "cyclictest/arm64-preempt-rt-4thread-with-header.txt");
  CHECK(d["header"]["cpu_dma_latency_us"] == 0);
  CHECK(d["header"]["policy"] == "fifo");
  CHECK(d["header"]["loadavg"] == "1.04 1.00 0.54 1/150 2022");
  REQUIRE(d["threads"].size() == 4);
  const std::int64_t cycles[] = {1546988, 1546942, 1546914, 1546880};
  const std::int64_t mins[] = {6, 6, 6, 5};
  const std::int64_t maxs[] = {306, 342, 399, 333};
  for (int i = 0; i < 4; ++i) {
    const json& t = d["threads"][i];
    CHECK(t["thread"] == i);
    CHECK(t["priority"] == 80);
    CHECK(t["interval_us"] == 200);
    CHECK(t["cycles"] == cycles[i]);
    CHECK(t["min_us"] == mins[i]);
    CHECK(t["avg_us"] == 16);
    CHECK(t["max_us"] == maxs[i]);
  }
  CHECK(d["threads"][0]["tid"] == 2013);
  CHECK(d["max_latency_us"] == 399);
  CHECK(d["health"]["status"] == "pass");
}

TEST_CASE("cyclictest: non-RT arm64, 10.5 ms worst case", "[fixtures][cyclictest]") {
  KILN_PARSE_FIXTURE(d, parse_cyclictest, "cyclictest/arm64-non-rt-4thread-quiet-max-10ms.txt");
  REQUIRE(d["threads"].size() == 4);
  const std::int64_t cycles[] = {116545, 116493, 116280, 116194};
  const std::int64_t mins[] = {4, 5, 5, 5};
  const std::int64_t avgs[] = {8, 10, 8, 8};
  const std::int64_t maxs[] = {2807, 2588, 2886, 10533};
  for (int i = 0; i < 4; ++i) {
    CHECK(d["threads"][i]["cycles"] == cycles[i]);
    CHECK(d["threads"][i]["min_us"] == mins[i]);
    CHECK(d["threads"][i]["avg_us"] == avgs[i]);
    CHECK(d["threads"][i]["max_us"] == maxs[i]);
  }
  CHECK(d["header"]["policy"].is_null());
  CHECK(d["max_latency_us"] == 10533);
}

TEST_CASE("cyclictest: NuttX histogram, one thread", "[fixtures][cyclictest]") {
  KILN_PARSE_FIXTURE(d, parse_cyclictest, "cyclictest/nuttx-samv71-histogram-1thread.txt");
  CHECK(d["threads"].empty());
  const json& h = d["histogram"];
  REQUIRE(h["buckets"].size() == 20);
  for (int i = 0; i < 20; ++i) CHECK(h["buckets"][i]["latency_us"] == i);
  CHECK(h["buckets"][10]["counts"] == json({603045}));
  CHECK(h["buckets"][11]["counts"] == json({1395782}));
  CHECK(h["buckets"][12]["counts"] == json({804}));
  CHECK(h["buckets"][16]["counts"] == json({30}));
  for (int i = 17; i < 20; ++i) CHECK(h["buckets"][i]["counts"] == json::array({0}));
  CHECK(h["total"] == json({1999931}));
  CHECK(h["min_us"] == json({10}));
  CHECK(h["avg_us"] == json({10}));
  CHECK(h["max_us"] == json({16}));
  CHECK(h["overflows"] == json::array({0}));
  CHECK(d["max_latency_us"] == 16);
  CHECK(d["thread_count"] == 1);
  CHECK(d["health"]["status"] == "pass");
}

TEST_CASE("cyclictest: rt-tests 2.80 --json, 6 threads", "[fixtures][cyclictest]") {
  KILN_PARSE_FIXTURE(d, parse_cyclictest, "cyclictest/x86-preempt-rt-6thread-json-rt-tests-2.80.txt");
  CHECK(d["source"] == "json");
  CHECK(d["json"]["rt_test_version"] == "2.80");
  CHECK(d["json"]["cmdline"].get<std::string>().rfind("cyclictest --mainaffinity=0,1", 0) == 0);
  CHECK(d["json"]["num_threads"] == 6);
  CHECK(d["json"]["sysinfo"]["nodename"] == "[redacted]");
  REQUIRE(d["threads"].size() == 6);
  const std::int64_t cycles[] = {300000, 300000, 299999, 299998, 299999, 299999};
  const std::int64_t maxs[] = {20, 20, 340, 279, 128, 22};
  const double avgs[] = {2.56, 2.46, 2.58, 2.69, 2.59, 2.57};
  for (int i = 0; i < 6; ++i) {
    const json& t = d["threads"][i];
    CHECK(t["cpu"] == 6 + i);
    CHECK(t["cycles"] == cycles[i]);
    CHECK(t["min_us"] == 2);
    CHECK(t["max_us"] == maxs[i]);
    CHECK(t["avg_us"] == avgs[i]);
    CHECK(t["histogram_total"] == t["cycles"]);
  }
  CHECK(d["threads"][2]["histogram"]["340"] == 1);
  CHECK(d["max_latency_us"] == 340);
  CHECK(d["health"]["status"] == "pass");
}

TEST_CASE("cyclictest: multi-thread rt-tests histogram with overflows", "[cyclictest]") {
  auto r = parse_cyclictest(
      "# Histogram\n000000 000000\t000000\n000001 000010\t000007\n"
      "# Total: 000000010 000000009\n# Min Latencies: 00001 00001\n# Avg Latencies: 00001 00001\n"
      "# Max Latencies: 00250 00001\n# Histogram Overflows: 00002 00000\n"
      "# Histogram Overflow at cycle number:\n# Thread 0: 00004 00009\n# Thread 1:\n"
      "T: 0 ( 100) P:99 I:1000 C:     12 Min:      1 Act:    1 Avg:    1 Max:     250\n"
      "T: 1 ( 101) P:99 I:1500 C:      9 Min:      1 Act:    1 Avg:    1 Max:       1\n");
  REQUIRE(r.ok());
  CHECK((*r)["histogram"]["buckets"][1]["counts"] == json({10, 7}));
  CHECK((*r)["histogram"]["overflows"] == json({2, 0}));
  CHECK((*r)["threads"].size() == 2);
  CHECK((*r)["max_latency_us"] == 250);
  CHECK((*r)["health"]["status"] == "fail");
}
