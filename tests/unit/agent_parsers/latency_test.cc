// The latency extractions (perftest latency tables, nccl-tests small-message
// times) and the gdsio parser, on the real outputs in
// shared/fixtures/validation (perftest/, nccl-tests/, gdsio/ and their
// SOURCES.md), plus refusals. Inputs written here by hand are labelled so:
// no real output was found for them.
#include <catch2/catch.hpp>

#include "agent/validate/parsers/gdsio.h"
#include "agent/validate/parsers/nccl_tests.h"
#include "agent/validate/parsers/parse.h"
#include "agent/validate/parsers/perftest.h"
#include "tests/unit/agent_parsers/fixtures.h"

using kiln::agent::nccl_small_message_latency;
using kiln::agent::parse_gdsio;
using kiln::agent::parse_nccl_tests;
using kiln::agent::parse_perftest;
using kiln::agent::perftest_latency_rows;
using nlohmann::json;

namespace {

std::vector<kiln::agent::PerftestLatencyRow> lat_rows(const json& parsed) {
  auto rows = perftest_latency_rows(parsed);
  if (!rows) FAIL(rows.error().message);
  return *rows;
}

}  // namespace

TEST_CASE("perftest latency: ib_write_lat -a, all sizes with percentiles", "[fixtures][perftest][latency]") {
  KILN_PARSE_FIXTURE(d, parse_perftest, "perftest/mlx4-ib-write-lat-all-sizes-client.txt");
  CHECK(d["test"] == "RDMA_Write Latency Test");
  CHECK(d["kind"] == "lat");
  CHECK(d["device"] == "mlx4_0");
  CHECK(d["status"] == "pass");
  CHECK(d["columns"].size() == 9);
  const auto rows = lat_rows(d);
  REQUIRE(rows.size() == 23);  // 2 B .. 8 MiB
  CHECK(rows[0].bytes == 2);
  CHECK(rows[0].iterations == 20000);
  CHECK(rows[0].min_us == 0.88);
  CHECK(rows[0].max_us == 6.84);
  CHECK(rows[0].typical_us == 0.98);
  CHECK(rows[0].avg_us == 1.03);
  CHECK(rows[0].stdev_us == 0.20);
  CHECK(rows[0].p99_us == 1.21);
  CHECK(rows[0].p999_us == 5.42);
  CHECK(rows[5].bytes == 64);
  CHECK(rows[5].typical_us == 1.09);
  CHECK(rows[22].bytes == 8388608);
  CHECK(rows[22].p999_us == 2335.48);
}

TEST_CASE("perftest latency: ib_send_lat -a with a stray line before the title", "[fixtures][perftest][latency]") {
  KILN_PARSE_FIXTURE(d, parse_perftest, "perftest/mlx4-ib-send-lat-all-sizes-client.txt");
  CHECK(d["test"] == "Send Latency Test");
  CHECK(d["kind"] == "lat");
  CHECK(d["settings"]["Max inline data"] == "236[B]");
  CHECK(d["status"] == "pass");
  const auto rows = lat_rows(d);
  REQUIRE(rows.size() == 23);
  CHECK(rows[0].bytes == 2);
  CHECK(rows[0].typical_us == 1.07);
  CHECK(rows[0].p99_us == 1.68);
  CHECK(rows[4].bytes == 32);
  CHECK(rows[4].max_us == 24.87);
  CHECK(rows[5].bytes == 64);
  CHECK(rows[5].typical_us == 1.16);
  CHECK(rows[5].p99_us == 1.76);
  CHECK(rows[22].stdev_us == 65.03);
}

TEST_CASE("perftest latency: a CPU-frequency warning between header and row", "[fixtures][perftest][latency]") {
  KILN_PARSE_FIXTURE(d, parse_perftest, "perftest/cx3-ib-read-lat-cpu-freq-warning-client.txt");
  CHECK(d["test"] == "RDMA_Read Latency Test");
  CHECK(d["status"] == "pass");
  REQUIRE(d["warnings"].size() == 1);
  CHECK(d["warnings"][0].get<std::string>().rfind("Conflicting CPU frequency values detected", 0) == 0);
  const auto rows = lat_rows(d);
  REQUIRE(rows.size() == 1);
  CHECK(rows[0].bytes == 2);
  CHECK(rows[0].iterations == 1000);
  CHECK(rows[0].typical_us == 1.79);
  CHECK(rows[0].p99_us == 1.88);
  CHECK(rows[0].p999_us == 6.12);
}

TEST_CASE("perftest latency: older table without avg or percentiles (hand-made)", "[perftest][latency]") {
  // Hand-made: the header is perftest 1.x's own printf (" #bytes #iterations
  // t_min[usec] t_max[usec] t_typical[usec]"); no captured output of that
  // version with a citable source was found.
  const char* text =
      "                    RDMA_Write Latency Test\n"
      " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]\n"
      " 2       1000          1.10           5.20         1.20\n";
  auto d = parse_perftest(text);
  REQUIRE(d);
  const auto rows = lat_rows(*d);
  REQUIRE(rows.size() == 1);
  CHECK(rows[0].typical_us == 1.20);
  CHECK_FALSE(rows[0].avg_us);
  CHECK_FALSE(rows[0].p99_us);
}

TEST_CASE("perftest latency: bandwidth tables and garbage are refused with the field named", "[fixtures][perftest][latency]") {
  KILN_PARSE_FIXTURE(bw, parse_perftest, "perftest/roce-4qp-rdma-cm-client-98gbps.txt");
  auto r = perftest_latency_rows(bw);
  REQUIRE_FALSE(r);
  CHECK(r.error().message.find("t_typical") != std::string::npos);

  // Hand-made refusals: a time out of bounds, t_typical outside [t_min, t_max].
  const std::string head = "RDMA_Write Latency Test\n #bytes #iterations t_min[usec] t_max[usec] t_typical[usec]\n";
  auto huge = parse_perftest(head + " 2 1000 1.0 2e9 1.5\n");
  REQUIRE(huge);
  auto h = perftest_latency_rows(*huge);
  REQUIRE_FALSE(h);
  CHECK(h.error().message == "rows/0/t_max_usec is out of bounds [0, 1e7] us");
  auto inverted = parse_perftest(head + " 2 1000 3.0 4.0 9.0\n");
  REQUIRE(inverted);
  auto i = perftest_latency_rows(*inverted);
  REQUIRE_FALSE(i);
  CHECK(i.error().message == "rows/0: t_typical must lie between t_min and t_max");
  auto zero = parse_perftest(head + " 0 1000 1.0 2.0 1.5\n");
  REQUIRE(zero);
  CHECK_FALSE(perftest_latency_rows(*zero));
  CHECK_FALSE(perftest_latency_rows(json::array()));
}

TEST_CASE("perftest latency: CUDA refusals of a latency run fail health", "[perftest][latency]") {
  // The two lines are perftest_parameters.c's own words (linux-rdma/perftest):
  // --use_cuda with ib_write_lat, and a CUDA message not larger than the inline size.
  for (const char* line : {"Perftest supports CUDA latency tests with read/send verbs only",
                           "Perftest doesn't support CUDA tests with inline messages"}) {
    auto d = parse_perftest(std::string("---------------------------------------------------------------------------------------\n") +
                            line + "\n");
    REQUIRE(d);
    CHECK((*d)["status"] == "fail");
    CHECK((*d)["errors"][0] == line);
  }
}

TEST_CASE("nccl-tests latency: 8 B .. 64 KiB out-of-place times from real tables", "[fixtures][nccl-tests][latency]") {
  KILN_PARSE_FIXTURE(d, parse_nccl_tests, "nccl-tests/h100-8gpu-single-node-gke-a3-high.txt");
  auto pts = nccl_small_message_latency(d);
  REQUIRE(pts);
  REQUIRE(pts->size() == 14);  // 8, 16, ..., 65536
  CHECK(pts->front().bytes == 8);
  CHECK(pts->front().time_us == 33.66);
  CHECK((*pts)[1].bytes == 16);
  CHECK((*pts)[1].time_us == 32.28);
  CHECK(pts->back().bytes == 65536);
  CHECK(pts->back().time_us == 34.08);

  KILN_PARSE_FIXTURE(two, parse_nccl_tests, "nccl-tests/h100-16gpu-2node-hgx-xe9680-ib-mpi-noise.txt");
  auto p2 = nccl_small_message_latency(two);
  REQUIRE(p2);
  CHECK(p2->front().time_us == 68.52);  // the first, cold, 8-byte all-reduce across two nodes
  CHECK(p2->back().time_us == 33.84);

  KILN_PARSE_FIXTURE(old, parse_nccl_tests, "nccl-tests/v100-16gpu-2node-nccl2.4-old-format.txt");
  auto p3 = nccl_small_message_latency(old);
  REQUIRE(p3);
  CHECK(p3->front().time_us == 58.10);
  CHECK(p3->back().time_us == 255.2);
}

TEST_CASE("nccl-tests latency: a sweep that starts large or a garbled time is refused", "[nccl-tests][latency]") {
  json big = {{"rows", json::array({{{"size", 8388608}, {"out_of_place", {{"time_us", 100.0}}}}})}};
  auto r = nccl_small_message_latency(big);
  REQUIRE_FALSE(r);
  CHECK(r.error().message == "rows: no row at or under 65536 bytes (the sweep did not start small)");
  json bad = {{"rows", json::array({{{"size", 8}, {"out_of_place", {{"time_us", nullptr}}}}})}};
  auto b = nccl_small_message_latency(bad);
  REQUIRE_FALSE(b);
  CHECK(b.error().message == "rows/0/out_of_place/time_us is missing or not a number");
  json neg = {{"rows", json::array({{{"size", 8}, {"out_of_place", {{"time_us", -1.0}}}}})}};
  CHECK_FALSE(nccl_small_message_latency(neg));
  CHECK_FALSE(nccl_small_message_latency(json::object()));
}

TEST_CASE("gdsio: GPU-direct and host-bounce reads on a Quadro P400 + NVMe", "[fixtures][gdsio]") {
  KILN_PARSE_FIXTURE(g, parse_gdsio, "gdsio/p400-gpud-seq-read-256k.txt");
  CHECK(g["format"] == "gdsio");
  CHECK(g["health"]["status"] == "pass");
  REQUIRE(g["runs"].size() == 1);
  const json& r = g["runs"][0];
  CHECK(r["io_type"] == "READ");
  CHECK(r["xfer_type"] == "GPUD");
  CHECK(r["threads"] == 1);
  CHECK(r["dataset_kib"] == 18421760);
  CHECK(r["dataset_target_kib"] == 10485760);
  CHECK(r["io_size"] == "256");
  CHECK(r["throughput_gib_s"] == 1.919940);
  CHECK(r["throughput_gb_s"].get<double>() == Approx(2.0615).epsilon(1e-4));
  CHECK(r["avg_latency_us"] == 127.156003);
  CHECK(r["ops"] == 71960);
  CHECK(r["total_time_s"] == 9.150475);

  KILN_PARSE_FIXTURE(b, parse_gdsio, "gdsio/p400-cpu-gpu-seq-read-256k.txt");
  CHECK(b["runs"][0]["xfer_type"] == "CPU_GPU");
  CHECK(b["runs"][0]["throughput_gib_s"] == 1.644660);
  KILN_PARSE_FIXTURE(c, parse_gdsio, "gdsio/p400-cpuonly-seq-read-256k.txt");
  CHECK(c["runs"][0]["xfer_type"] == "CPUONLY");
  CHECK(c["runs"][0]["avg_latency_us"] == 127.125028);
}

TEST_CASE("gdsio: the same test inside a VM, and a 1 KiB write", "[fixtures][gdsio]") {
  KILN_PARSE_FIXTURE(g, parse_gdsio, "gdsio/p400-vm-gpud-seq-read-256k.txt");
  CHECK(g["runs"][0]["throughput_gib_s"] == 1.650979);
  CHECK(g["runs"][0]["dataset_kib"] == 17141760);
  KILN_PARSE_FIXTURE(b, parse_gdsio, "gdsio/p400-vm-cpu-gpu-seq-read-256k.txt");
  CHECK(b["runs"][0]["throughput_gib_s"] == 1.568393);
  KILN_PARSE_FIXTURE(w, parse_gdsio, "gdsio/p400-vm-gpud-write-1k.txt");
  CHECK(w["runs"][0]["io_type"] == "WRITE");
  CHECK(w["runs"][0]["io_size"] == "1");
  CHECK(w["runs"][0]["throughput_gib_s"] == 0.000893);
  CHECK(w["runs"][0]["avg_latency_us"] == 1067.162200);
  CHECK(w["runs"][0]["ops"] == 10000);
}

TEST_CASE("gdsio: two summaries, a wrapped one, and the parse_tool_output name", "[fixtures][gdsio]") {
  KILN_FIXTURE(a, "gdsio/p400-gpud-seq-read-256k.txt");
  KILN_FIXTURE(b, "gdsio/p400-cpu-gpu-seq-read-256k.txt");
  auto both = kiln::agent::parse_tool_output("gdsio", a + b);
  REQUIRE(both);
  REQUIRE((*both)["runs"].size() == 2);
  CHECK((*both)["runs"][1]["xfer_type"] == "CPU_GPU");
  // The same line wrapped after "(KiB)" (as terminals and some logs do).
  std::string wrapped = a;
  wrapped.replace(wrapped.find(" IOSize:"), 1, "\n");
  auto w = parse_gdsio(wrapped);
  REQUIRE(w);
  CHECK((*w)["runs"][0]["throughput_gib_s"] == 1.919940);
}

TEST_CASE("gdsio: garbage, a cut-short summary and error lines are refused or fail", "[gdsio]") {
  auto none = parse_gdsio("hello\nworld\n");
  REQUIRE_FALSE(none);
  CHECK(none.error().message == "not gdsio output: no 'IoType:' summary and no gdsio/cuFile/nvidia-fs error line");
  // Another tool's error line is not gdsio output.
  CHECK_FALSE(parse_gdsio("mpirun: process failed to start\n"));
  // Hand-made: the summary cut after Throughput, and a throughput that is no number.
  auto cut = parse_gdsio("IoType: READ XferType: GPUD Threads: 1 DataSetSize: 1/1(KiB) IOSize: 4(KiB) Throughput: 1.5");
  REQUIRE(cut);
  CHECK(cut->at("runs").empty());
  CHECK(cut->at("health")["status"] == "fail");
  CHECK(cut->at("refused")[0].get<std::string>().find("Throughput") != std::string::npos);
  auto nan = parse_gdsio(
      "IoType: READ XferType: GPUD Threads: 1 DataSetSize: 1/1(KiB) IOSize: 4(KiB) Throughput: nan GiB/sec, "
      "Avg_Latency: 1 usecs ops: 1 total_time 1 secs");
  REQUIRE(nan);
  CHECK(nan->at("runs").empty());
  CHECK(nan->at("refused")[0] == "summary 0: Throughput: 'nan' is not a number in range");
  auto threads = parse_gdsio(
      "IoType: READ XferType: GPUD Threads: 0 DataSetSize: 1/1(KiB) IOSize: 4(KiB) Throughput: 1 GiB/sec, "
      "Avg_Latency: 1 usecs ops: 1 total_time 1 secs");
  REQUIRE(threads);
  CHECK(threads->at("runs").empty());
  // An error line alone (cuFile's words when the driver is missing) is gdsio output that failed.
  auto err = parse_gdsio("cuFile driver failed to open\n");
  REQUIRE(err);
  CHECK(err->at("health")["status"] == "fail");
  CHECK(err->at("errors")[0] == "cuFile driver failed to open");
}
