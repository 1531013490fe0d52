// nccl-tests and NCCL debug logs: every fact SOURCES.md lists per fixture.
#include <catch2/catch.hpp>

#include "agent/validate/parsers/nccl_debug.h"
#include "agent/validate/parsers/nccl_tests.h"
#include "tests/unit/agent_parsers/fixtures.h"

using kiln::agent::parse_nccl_debug;
using kiln::agent::parse_nccl_tests;
using nlohmann::json;

namespace {

const json& row_of(const json& d, std::int64_t size) {
  for (const auto& r : d["rows"])
    if (r["size"] == size) return r;
  FAIL("no row of size " << size);
  static const json none;
  return none;
}

void all_wrong_zero(const json& d) {
  for (const auto& r : d["rows"]) {
    CHECK(r["out_of_place"]["wrong"] == 0);
    CHECK(r["in_place"]["wrong"] == 0);
  }
  CHECK(d["wrong_total"] == 0);
}

}  // namespace

TEST_CASE("nccl-tests: H100 8 GPU single node (GKE A3 High)", "[fixtures][nccl-tests]") {
  KILN_PARSE_FIXTURE(d, parse_nccl_tests, "nccl-tests/h100-8gpu-single-node-gke-a3-high.txt");
  CHECK(d["table_format"] == "current");
  CHECK(d["op"] == "all_reduce");
  CHECK(d["nranks"] == 8);
  CHECK(d["hosts"].size() == 1);
  for (const auto& dev : d["devices"]) {
    CHECK(dev["pid"] == 181);
    CHECK(dev["model"] == "NVIDIA H100 80GB HBM3");
  }
  CHECK(d["devices"][2]["busid"] == "0x0a");
  CHECK(d["params"]["nthread"] == 1);
  CHECK(d["params"]["ngpus"] == 8);
  CHECK(d["nccl_version"] == "2.22.3+cuda12.6");
  REQUIRE(d["rows"].size() == 31);
  CHECK(d["rows"].front()["size"] == 8);
  CHECK(d["rows"].back()["size"] == 8589934592LL);
  const json& big = row_of(d, 8589934592LL);
  CHECK(big["out_of_place"]["algbw"] == 274.24);
  CHECK(big["out_of_place"]["busbw"] == 479.93);
  CHECK(big["in_place"]["algbw"] == 274.25);
  CHECK(big["in_place"]["busbw"] == 479.93);
  CHECK(big["type"] == "float");
  CHECK(big["redop"] == "sum");
  CHECK(big["root"] == -1);
  all_wrong_zero(d);
  CHECK(d["out_of_bounds"]["count"] == 0);
  CHECK(d["out_of_bounds"]["ok"] == true);
  CHECK(d["avg_busbw"] == 145.47);
  CHECK(d["max_busbw"]["busbw"] == 479.93);
  CHECK(d["largest_size"]["busbw_out_of_place"] == 479.93);
  CHECK(d["health"]["status"] == "pass");
}

TEST_CASE("nccl-tests: H100 16 GPU two GCP A3 Mega VMs", "[fixtures][nccl-tests]") {
  KILN_PARSE_FIXTURE(d, parse_nccl_tests, "nccl-tests/h100-16gpu-2node-gcp-a3mega.txt");
  CHECK(d["table_format"] == "current");
  CHECK(d["nranks"] == 16);
  CHECK(d["hosts"] == json({"ztan-mig-235z", "ztan-mig-gq73"}));
  CHECK(d["devices"][0]["busid"] == "0000:04:00");
  CHECK(d["devices"][0]["pid"] != d["devices"][1]["pid"]);
  CHECK(d["nccl_version"].is_null());
  REQUIRE(d["rows"].size() == 31);
  CHECK(d["rows"].front()["size"] == 8);
  const json& big = row_of(d, 8589934592LL);
  CHECK(big["out_of_place"]["busbw"] == 338.82);
  CHECK(big["in_place"]["busbw"] == 337.35);
  CHECK(big["out_of_place"]["algbw"] == 180.71);
  CHECK(big["in_place"]["algbw"] == 179.92);
  CHECK(d["avg_busbw"] == 70.742);
  CHECK(d["largest_size"]["size"] == 8589934592LL);
  all_wrong_zero(d);
  CHECK(d["health"]["status"] == "pass");
}

TEST_CASE("nccl-tests: two XE9680 over IB with Open MPI noise in the device list", "[fixtures][nccl-tests]") {
  KILN_PARSE_FIXTURE(d, parse_nccl_tests, "nccl-tests/h100-16gpu-2node-hgx-xe9680-ib-mpi-noise.txt");
  CHECK(d["nranks"] == 16);  // the two "[bm-h100-01:29250]" lines are not devices
  CHECK(d["hosts"] == json({"bm-h100-01", "bm-h100-02"}));
  CHECK(d["nccl_version"] == "2.26.2+cuda12.8");
  REQUIRE(d["rows"].size() == 32);
  CHECK(d["rows"].back()["size"] == 17179869184LL);
  const json& big = row_of(d, 17179869184LL);
  CHECK(big["out_of_place"]["busbw"] == 469.21);
  CHECK(big["in_place"]["busbw"] == 469.10);
  CHECK(big["out_of_place"]["algbw"] == 250.24);
  CHECK(big["in_place"]["algbw"] == 250.19);
  CHECK(d["avg_busbw"] == 139.56);
  all_wrong_zero(d);
  CHECK(d["health"]["status"] == "pass");
}

TEST_CASE("nccl-tests: V100 2019 old 12-column format with a last-row dip", "[fixtures][nccl-tests]") {
  KILN_PARSE_FIXTURE(d, parse_nccl_tests, "nccl-tests/v100-16gpu-2node-nccl2.4-old-format.txt");
  CHECK(d["table_format"] == "old");
  CHECK(d["params"]["iters"] == 100);
  CHECK(d["params"]["validation"] == 1);
  CHECK_FALSE(d["params"].contains("agg_iters"));
  CHECK_FALSE(d["params"].contains("graph"));
  CHECK(d["nranks"] == 16);
  for (const auto& dev : d["devices"]) CHECK(dev["busid"] == "0x00");
  CHECK(d["nccl_version"] == "2.4.6+cuda10.0");
  REQUIRE(d["rows"].size() == 31);
  CHECK(d["rows"].back()["size"] == 8589934592LL);
  CHECK(row_of(d, 65536)["out_of_place"]["error"] == 5e-07);
  CHECK(row_of(d, 8)["out_of_place"]["error"] == 4e-07);
  CHECK(d["rows"][0]["root"].is_null());
  CHECK(d["max_busbw"]["busbw"] == 15.80);
  CHECK(d["max_busbw"]["size"] == 4294967296LL);
  CHECK(d["largest_size"]["busbw_out_of_place"] == 9.93);
  CHECK(d["largest_size"]["busbw_in_place"] == 9.92);
  CHECK(d["avg_busbw"] == 5.16186);
  CHECK(d["health"]["status"] == "pass");
}

TEST_CASE("nccl-tests: K80 over TCP, validation off, low bandwidth", "[fixtures][nccl-tests]") {
  KILN_PARSE_FIXTURE(d, parse_nccl_tests, "nccl-tests/k80-2node-socket-low-busbw.txt");
  CHECK(d["table_format"] == "current");
  CHECK(d["params"]["validation"] == 0);
  CHECK(d["nranks"] == 2);
  REQUIRE(d["rows"].size() == 11);
  CHECK(d["rows"].front()["size"] == 1048576);
  CHECK(d["rows"].back()["size"] == 1073741824);
  for (const auto& r : d["rows"]) {
    CHECK(r["out_of_place"]["wrong"].is_null());  // "N/A"
    CHECK(r["out_of_place"]["busbw"] == r["out_of_place"]["algbw"]);
  }
  CHECK(d["wrong_total"].is_null());
  CHECK(d["max_busbw"]["busbw"] == 0.63);
  CHECK(d["max_busbw"]["size"] == 268435456);
  CHECK(d["largest_size"]["busbw_out_of_place"] == 0.61);
  CHECK(d["largest_size"]["busbw_in_place"] == 0.61);
  CHECK(d["avg_busbw"] == 0.565546);
  CHECK_FALSE(d["health"]["warnings"].empty());  // validation off
}

TEST_CASE("nccl-tests: #wrong > 0 and a FAILED footer fail health", "[nccl-tests]") {
  const std::string text =
      "# nccl-tests version 2.17.6 nccl-headers=22807 nccl-library=22807\n"
      "# Collective test starting: all_gather_perf\n"
      "# nThread 1 nGpus 2 minBytes 8 maxBytes 16 step: 1048576(bytes) warmup iters: 5 iters: 20 agg iters: 1 "
      "validation: 1 graph: 0 unalign: 0\n"
      "#\n#  Rank  0 Group  0 Pid 1 on h device  0 [0000:01:00] G\n"
      "#  Rank  1 Group  0 Pid 1 on h device  1 [0000:02:00] G\n"
      "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong\n"
      "          16             2     float    none      -1    10.00    0.00    0.00      3    10.00    0.00    0.00      0\n"
      "# Out of bounds values : 3 FAILED\n"
      "# Avg bus bandwidth    : 0.001 FAILED\n";
  auto r = parse_nccl_tests(text);
  REQUIRE(r.ok());
  CHECK((*r)["op"] == "all_gather");
  CHECK((*r)["op_source"] == "header");
  CHECK((*r)["nccl_tests_version"] == "2.17.6");
  CHECK((*r)["params"]["step_kind"] == "bytes");
  CHECK((*r)["wrong_total"] == 3);
  CHECK((*r)["out_of_bounds"]["ok"] == false);
  CHECK((*r)["health"]["status"] == "fail");
  CHECK((*r)["health"]["reasons"].size() >= 3);
}

TEST_CASE("nccl-tests: op inferred from the table when not printed", "[nccl-tests]") {
  const std::string gather =
      "#  Rank  0 Group  0 Pid 1 on h device  0 [0x01] G\n#  Rank  1 Group  0 Pid 1 on h device  1 [0x02] G\n"
      "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong\n"
      "        1024           128     float    none       0    10.00    0.10    0.05      0    10.00    0.10    0.05      0\n"
      "# Avg bus bandwidth    : 0.05 \n";
  auto r = parse_nccl_tests(gather);
  REQUIRE(r.ok());
  CHECK((*r)["op"].is_null());
  CHECK((*r)["op_candidates"] == json({"gather", "scatter"}));
  CHECK((*r)["health"]["status"] == "pass");
  auto named = parse_nccl_tests("$ mpirun -np 2 ./build/gather_perf -b 1K -e 1K\n" + gather);
  REQUIRE(named.ok());
  CHECK((*named)["op"] == "gather");
  CHECK((*named)["op_source"] == "command");
}

TEST_CASE("nccl-debug: 2 x p4d over EFA with GPUDirect RDMA", "[fixtures][nccl-debug]") {
  KILN_PARSE_FIXTURE(d, parse_nccl_debug, "nccl-debug/a100-p4d-2node-efa-ofi-gdrdma.txt");
  CHECK(d["nccl_version"] == "2.9.9+cuda11.2");
  CHECK(d["ranks_seen"].size() == 16);
  CHECK(d["network"]["name"] == "AWS Libfabric");
  CHECK(d["network"]["kind"] == "OFI");
  CHECK(d["network"]["using_network_lines"] == 16);
  CHECK(d["network"]["ofi_provider"] == "efa");
  CHECK(d["connection_counts"]["P2P/IPC/read"] == 256);
  CHECK(d["connection_counts"]["NET/AWS Libfabric/GDRDMA"] == 64);
  CHECK(d["net_connections"] == 64);
  CHECK(d["net_gdrdma_connections"] == 64);
  CHECK(d["net_device_counts"] == json({{"0", 16}, {"1", 16}, {"2", 16}, {"3", 16}}));
  std::size_t sends = 0, receives = 0;
  for (const auto& c : d["connections"]) {
    if (c["direction"] == "send") ++sends;
    if (c["direction"] == "receive") ++receives;
  }
  CHECK(sends == 32);
  CHECK(receives == 32);
  CHECK(d["connected_all_rings"] == 16);
  CHECK(d["connected_all_trees"] == 16);
  CHECK(d["channel_counts"] == json({{"coll", 8}, {"p2p", 8}, {"p2p_per_peer", 1}}));
  CHECK(d["summary"]["transports"] == json({"NET/OFI", "P2P/IPC"}));
  CHECK(d["summary"]["gdrdma"] == true);
  CHECK(d["summary"]["net"] == "OFI");
  CHECK(d["summary"]["socket_fallback"] == false);
  REQUIRE(d["nccl_tests"].is_object());
  CHECK(d["nccl_tests"]["table_format"] == "old");
  CHECK(d["nccl_tests"]["largest_size"]["size"] == 4294967296LL);
  CHECK(d["nccl_tests"]["largest_size"]["busbw_out_of_place"] == 43.81);
  CHECK(d["nccl_tests"]["largest_size"]["busbw_in_place"] == 43.72);
  CHECK(d["nccl_tests"]["avg_busbw"] == 11.2432);
  CHECK(d["nccl_tests"]["nranks"] == 16);
  CHECK(d["health"]["status"] == "pass");
}

TEST_CASE("nccl-debug: 24 ranks on GKE falling back to sockets", "[fixtures][nccl-debug]") {
  KILN_PARSE_FIXTURE(d, parse_nccl_debug, "nccl-debug/h100-24rank-3node-gke-socket-fallback-gdr-disabled.txt");
  CHECK(d["nccl_version"] == "2.22.3+cuda12.6");
  CHECK(d["network"]["ib_no_device"] == true);
  CHECK(d["network"]["ib_no_device_lines"] == 2);
  CHECK(d["network"]["socket_devices"] == json({"eth0:10.140.0.7<0>"}));
  CHECK(d["network"]["name"] == "Socket");
  CHECK(d["network"]["socket_threads"] == 4);
  CHECK(d["network"]["sockets_per_thread"] == 1);
  CHECK(d["network"]["socket_thread_lines"] == 8);
  REQUIRE(d["gdr_hca"].size() == 1);
  CHECK(d["gdr_hca"][0] == json({{"plugin", "NET/Socket"}, {"hca_index", 0}, {"hca", "eth0"}, {"enabled", false}}));
  CHECK(d["ring_channels"] == 16);
  CHECK(d["connection_counts"]["P2P/CUMEM"] == 16);
  CHECK(d["connection_counts"]["NET/Socket"] == 8);
  std::vector<std::int64_t> net_channels;
  for (const auto& c : d["connections"]) {
    if (c["transport"] == "NET/Socket") {
      CHECK(c["direction"] == "receive");
      CHECK(c["from_rank"] == 16);
      CHECK(c["to_rank"] == 0);
      net_channels.push_back(c["channel"].get<std::int64_t>());
    }
  }
  CHECK(net_channels == std::vector<std::int64_t>{0, 1, 2, 3, 8, 9, 10, 11});
  CHECK(d["summary"]["transports"] == json({"NET/Socket", "P2P/CUMEM"}));
  CHECK(d["summary"]["gdrdma"] == false);
  CHECK(d["summary"]["net"] == "Socket");
  CHECK(d["summary"]["socket_fallback"] == true);
  CHECK(d["nccl_tests"].is_null());
  CHECK(d["health"]["status"] == "fail");
  CHECK(d["health"]["reasons"].size() == 2);
}

TEST_CASE("nccl-debug: IB with GDR disabled and NCCL WARN lines", "[nccl-debug]") {
  const std::string text =
      "n1:10:10 [0] NCCL INFO NCCL version 2.19.3+cuda12.2\n"
      "n1:10:20 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/RoCE ; OOB eth0:10.0.0.1<0>\n"
      "n1:10:20 [0] NCCL INFO NET/IB : GPU Direct RDMA Disabled for HCA 0 'mlx5_0' (no module)\n"
      "n1:10:20 [0] NCCL INFO Using network IB\n"
      "n1:10:30 [0] NCCL INFO Channel 00/0 : 8[0] -> 0[0] [receive] via NET/IB/0\n"
      "n1:10:30 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via SHM/direct/direct\n"
      "n1:10:30 [0] NCCL WARN Cuda failure 'out of memory'\n";
  auto r = parse_nccl_debug(text);
  REQUIRE(r.ok());
  const json& d = *r;
  CHECK(d["network"]["ib_devices"] == json({"mlx5_0:1/IB", "mlx5_1:1/RoCE"}));
  CHECK(d["summary"]["net"] == "IB");
  CHECK(d["summary"]["transports"] == json({"NET/IB", "SHM"}));
  CHECK(d["summary"]["gdrdma"] == false);
  CHECK(d["health"]["status"] == "fail");  // GDR disabled, NET without GDRDMA
  CHECK(d["warnings"].size() == 1);
}

TEST_CASE("nccl-debug: a NET/Socket thread line without 'Using' has no counts (found by fuzzing)", "[nccl-debug]") {
  // Before the fix the parser dereferenced an empty optional here (ASan:
  // heap-use-after-free in split_ws under fuzz/tool_output).
  const std::string text =
      "n1:10:10 [0] NCCL INFO NCCL version 2.22.3+cuda12.6\n"
      "n1:10:20 [0] NCCL INFO NET/Socket : Using [0]eth0:10.140.0.7<0>\n"
      "n1:10:20 [0] NCCL INFO NET/Socket : 4 threads and 1 sockets per thread\n"
      "n1:10:20 [0] NCCL INFO NET/Socket : Using 2 threads and 8 sockets per thread\n";
  auto r = parse_nccl_debug(text);
  REQUIRE(r.ok());
  const json& d = *r;
  CHECK(d["network"]["socket_thread_lines"] == 2);
  CHECK(d["network"]["socket_threads"] == 2);
  CHECK(d["network"]["sockets_per_thread"] == 8);
}

TEST_CASE("nccl-tests: a garbled #wrong column saturates the total instead of overflowing (found by fuzzing)", "[nccl-tests]") {
  const std::string text =
      "# nThread 1 nGpus 1 minBytes 8 maxBytes 16 step: 2(factor) warmup iters: 5 iters: 20 agg iters: 1 "
      "validation: 1 graph: 0\n"
      "#\n"
      "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw "
      "#wrong\n"
      "           8             2     float     sum      -1    33.66    0.00    0.00 7777777777777777777    33.55    "
      "0.00    0.00 7777777777777777777\n"
      "          16             4     float     sum      -1    32.28    0.00    0.00      0    33.02    0.00    0.00      "
      "0\n";
  auto r = parse_nccl_tests(text);
  REQUIRE(r.ok());
  CHECK((*r)["wrong_total"] == INT64_MAX);
  CHECK((*r)["health"]["status"] == "fail");
}
