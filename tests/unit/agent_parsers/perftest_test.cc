// perftest (ib_write_bw) fixtures.
#include <catch2/catch.hpp>

#include <algorithm>

#include "agent/validate/parsers/perftest.h"
#include "tests/unit/agent_parsers/fixtures.h"

using kiln::agent::parse_perftest;
using nlohmann::json;

TEST_CASE("perftest: RoCE 4 QP rdma_cm client at 98 Gb/s", "[fixtures][perftest]") {
  KILN_PARSE_FIXTURE(d, parse_perftest, "perftest/roce-4qp-rdma-cm-client-98gbps.txt");
  CHECK(d["test"] == "RDMA_Write BW Test");
  CHECK(d["device"] == "mlx5_5");
  CHECK(d["qps"] == 4);
  CHECK(d["link_type"] == "Ethernet");
  CHECK(d["transport"] == "IB");
  CHECK(d["gid_index"] == 3);
  CHECK(d["mtu"] == 4096);
  CHECK(d["rdma_cm"] == true);
  CHECK(d["settings"]["rdma_cm QPs"] == "ON");
  CHECK(d["settings"]["Data ex. method"] == "rdma_cm");
  CHECK(d["settings"]["TOS"] == "41");
  REQUIRE(d["local"].size() == 4);
  REQUIRE(d["remote"].size() == 4);
  for (const auto& a : d["local"]) CHECK(a["gid"] == "00:00:00:00:00:00:00:00:00:00:255:255:10:224:04:233");
  for (const auto& a : d["remote"]) CHECK(a["gid"] == "00:00:00:00:00:00:00:00:00:00:255:255:10:224:05:57");
  CHECK(d["local"][0]["qpn"] == "0x0093");
  CHECK(d["bw_unit"] == "Gb/sec");
  REQUIRE(d["rows"].size() == 1);
  CHECK(d["rows"][0] == json({{"bytes", 65536}, {"iterations", 20000}, {"bw_peak", 98.01}, {"bw_average", 98.01},
                              {"msg_rate_mpps", 0.186932}}));
  CHECK(d["table_closed"] == true);
  CHECK(d["use_cuda"] == false);
  CHECK(d["status"] == "pass");
}

TEST_CASE("perftest: DGX Spark --run_infinitely client, no closing line", "[fixtures][perftest]") {
  KILN_PARSE_FIXTURE(d, parse_perftest, "perftest/roce-dgx-spark-run-infinitely-client.txt");
  CHECK(d["warnings"] == json({"WARNING: BW peak won't be measured in this run."}));
  CHECK(d["test"] == "RDMA_Write BW Test");
  CHECK(d["device"] == "rocep1s0f0");
  CHECK(d["mtu"] == 1024);
  CHECK(d["cq_moderation"] == 1);
  CHECK(d["qps"] == 1);
  REQUIRE(d["local"].size() == 1);
  CHECK(d["local"][0]["gid"] == "00:00:00:00:00:00:00:00:00:00:255:255:192:168:200:13");
  CHECK(d["remote"][0]["psn"] == "0x531b7");
  REQUIRE(d["rows"].size() == 5);
  const double avg[] = {92.57, 92.57, 92.57, 92.56, 92.57};
  for (int i = 0; i < 5; ++i) {
    CHECK(d["rows"][i]["bytes"] == 65536);
    CHECK(d["rows"][i]["bw_peak"] == 0.0);
    CHECK(d["rows"][i]["bw_average"] == avg[i]);
  }
  CHECK(d["bw_average_max"] == 92.57);
  CHECK(d["table_closed"] == false);
  CHECK(d["status"] == "pass");
}

TEST_CASE("perftest: post list with 8-byte messages", "[fixtures][perftest]") {
  KILN_PARSE_FIXTURE(d, parse_perftest, "perftest/roce-post-list-8byte-msgs-low-bw.txt");
  CHECK(d["test"] == "RDMA_Write Post List BW Test");
  CHECK(d["device"] == "ib0");
  CHECK(d["link_type"] == "Ethernet");
  CHECK(d["gid_index"] == 2);
  CHECK(d["settings"]["PCIe relax order"] == "Unsupported");
  CHECK(d["settings"]["ibv_wr* API"] == "OFF");
  CHECK(d["tx_depth"] == 256);
  CHECK(d["post_list"] == 128);
  CHECK(d["cq_moderation"] == 128);
  REQUIRE(d["rows"].size() == 1);
  CHECK(d["rows"][0] == json({{"bytes", 8}, {"iterations", 224958464}, {"bw_peak", 0.0}, {"bw_average", 0.48},
                              {"msg_rate_mpps", 7.498617}}));
  CHECK(d["errors"].empty());
  CHECK(d["status"] == "pass");  // the bandwidth gate, not the parser, judges 0.48 Gb/s
}

TEST_CASE("perftest: --use_cuda on a vGPU, MR allocation fails", "[fixtures][perftest]") {
  KILN_PARSE_FIXTURE(d, parse_perftest, "perftest/a30-vgpu-use-cuda-client-mr-alloc-failure.txt");
  CHECK(d["use_cuda"] == true);
  CHECK(d["cuda"]["pci_address"] == "02:00");
  CHECK(d["cuda"]["device_name"] == "NVIDIA A30-8C");
  CHECK(d["cuda"]["buffer_bytes"] == 262144);
  CHECK(d["cuda"]["device_index"] == 0);
  CHECK(d["rows"].empty());
  const json& e = d["errors"];
  auto has = [&](const std::string& s) { return std::find(e.begin(), e.end(), json(s)) != e.end(); };
  CHECK(has("Couldn't allocate MR"));
  CHECK(has("failed to create mr"));
  CHECK(has("Failed to create MR"));
  CHECK(has("Failed to initialize RDMA contexts."));
  CHECK(has("Segmentation fault (core dumped)"));
  CHECK(std::count(e.begin(), e.end(), json("ERRNO: Bad address.")) == 3);
  CHECK(d["status"] == "fail");
  CHECK(d["health"]["status"] == "fail");
}

TEST_CASE("perftest: MB/sec table and a latency table map by header", "[perftest]") {
  auto bw = parse_perftest(
      "                    Send BW Test\n Dual-port       : OFF          Device         : mlx5_0\n"
      "---------------------------------------------------------------------------------------\n"
      " #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]\n"
      " 65536      1000             11000.12            10990.50               0.175848\n");
  REQUIRE(bw.ok());
  CHECK((*bw)["bw_unit"] == "MB/sec");
  CHECK((*bw)["rows"][0]["bw_average"] == 10990.50);
  auto lat = parse_perftest(
      "                    RDMA_Write Latency Test\n"
      " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]   "
      "99% percentile[usec]   99.9% percentile[usec] \n"
      " 2       1000          0.97           3.01         1.00               1.01             0.05            1.10     "
      "               3.01   \n");
  REQUIRE(lat.ok());
  CHECK((*lat)["kind"] == "lat");
  CHECK((*lat)["rows"][0]["t_typical_usec"] == 1.00);
  CHECK((*lat)["rows"][0]["99_9_percentile_usec"] == 3.01);
}
