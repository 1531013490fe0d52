// Hostile input: empty, another tool's output, truncation at many offsets,
// terminal escapes and CRLF, random bytes. Parsers must return an error or a
// result, never crash, throw (parse_tool_output turns a throw into kInternal)
// or read out of bounds (the ASan build runs these too).
#include <catch2/catch.hpp>
#include "tests/support/skip.h"

#include <random>
#include <string>
#include <vector>

#include "agent/validate/parsers/parse.h"
#include "tests/unit/agent_parsers/fixtures.h"

using kiln::Code;
using kiln::agent::parse_tool_output;
using kiln::agent::tool_output_formats;
using nlohmann::json;

namespace {

// Fixture files per format folder (same names as the formats).
const std::vector<std::pair<std::string, std::vector<std::string>>> kFixtures = {
    {"nccl-tests",
     {"h100-16gpu-2node-gcp-a3mega.txt", "h100-16gpu-2node-hgx-xe9680-ib-mpi-noise.txt",
      "h100-8gpu-single-node-gke-a3-high.txt", "k80-2node-socket-low-busbw.txt",
      "v100-16gpu-2node-nccl2.4-old-format.txt"}},
    {"nccl-debug", {"a100-p4d-2node-efa-ofi-gdrdma.txt", "h100-24rank-3node-gke-socket-fallback-gdr-disabled.txt"}},
    {"topo",
     {"a100-pcie-1gpu-4nic-pcie-only-realigned.txt", "h100-8gpu-nv18-6nic-blank-cpu-affinity.txt",
      "h100-8gpu-nv18-gke-a3-vm-no-nics.txt"}},
    {"nvlink",
     {"a100-8gpu-all-links-up.txt", "h100-1gpu-18-links-up-gke.txt", "v100-gpu3-two-links-inactive-issue-excerpt.txt"}},
    {"perftest",
     {"a30-vgpu-use-cuda-client-mr-alloc-failure.txt", "roce-4qp-rdma-cm-client-98gbps.txt",
      "roce-dgx-spark-run-infinitely-client.txt", "roce-post-list-8byte-msgs-low-bw.txt",
      "mlx4-ib-write-lat-all-sizes-client.txt", "mlx4-ib-send-lat-all-sizes-client.txt",
      "cx3-ib-read-lat-cpu-freq-warning-client.txt"}},
    {"dcgm",
     {"a100-p4de-8gpu-r2-pass-dcgm3.3.3.txt", "a100-pcie-r2-fragment-pcie-fail-nvlink-down-dcgm2.4.6.txt",
      "h100-r3-error-plugins-not-loaded-dcgm4.4.0.txt", "l40s-4gpu-r2-pcie-fail-internal-error-dcgm4.2.3.txt",
      "r3-fragment-deployment-error-row-remap-pending.txt"}},
    {"smi-query",
     {"a100-80gb-q-excerpt-dram-ce-row-remap-pending.txt", "h100-1gpu-q-d-ecc-perf-temp-power-535.309.txt",
      "h100-8gpu-q-535.161.08-hw-power-brake-active.txt", "h100-sxm-1gpu-nvidia-smi-a-545.txt"}},
    {"nvbandwidth",
     {"8gpu-d2d-memcpy-write-ce-readme.txt", "a100-1gpu-h2d-memcpy-sm-v0.8.txt", "a6000-6gpu-pcie-d2d-read-ce-v0.8.txt"}},
    {"cyclictest",
     {"arm64-non-rt-4thread-quiet-max-10ms.txt", "arm64-preempt-rt-4thread-with-header.txt",
      "nuttx-samv71-histogram-1thread.txt", "x86-preempt-rt-6thread-json-rt-tests-2.80.txt"}},
    {"gdsio",
     {"p400-gpud-seq-read-256k.txt", "p400-cpu-gpu-seq-read-256k.txt", "p400-cpuonly-seq-read-256k.txt",
      "p400-vm-gpud-seq-read-256k.txt", "p400-vm-cpu-gpu-seq-read-256k.txt", "p400-vm-gpud-write-1k.txt"}},
};

// An ok result must carry the common fields; an error must be "not this format".
void check_outcome(const kiln::Result<json>& r, const std::string& what) {
  INFO(what);
  if (r.ok()) {
    REQUIRE(r->is_object());
    CHECK(r->contains("format"));
    REQUIRE(r->contains("health"));
    const std::string status = (*r)["health"]["status"];
    CHECK((status == "pass" || status == "fail"));
  } else {
    CHECK(r.error().code == Code::kInvalidArgument);
    CHECK_FALSE(r.error().message.empty());
  }
}

// Offsets: every byte near both ends, ~150 spread over the middle.
std::vector<std::size_t> cut_points(std::size_t n) {
  std::vector<std::size_t> cuts;
  for (std::size_t i = 0; i < n && i < 64; ++i) cuts.push_back(i);
  const std::size_t step = std::max<std::size_t>(1, n / 150);
  for (std::size_t i = 64; i < n; i += step) cuts.push_back(i);
  for (std::size_t i = n > 32 ? n - 32 : 0; i < n; ++i) cuts.push_back(i);
  return cuts;
}

// Colours every line and ends it with CRLF, as a captured terminal would.
std::string decorate(const std::string& text) {
  std::string out;
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t nl = text.find('\n', start);
    const bool has_nl = nl != std::string::npos;
    if (!has_nl) nl = text.size();
    out += "\x1b[1;32m" + text.substr(start, nl - start) + "\x1b[0m\x1b]0;title\x07";
    if (has_nl) out += "\r\n";
    start = nl + 1;
  }
  return out;
}

}  // namespace

TEST_CASE("every format rejects empty and blank input", "[robustness]") {
  REQUIRE(tool_output_formats().size() == 10);
  for (const auto& f : tool_output_formats()) {
    for (const std::string text : {"", "\n\n", "   \t  \r\n", "\x1b[0m"}) {
      auto r = parse_tool_output(f, text);
      INFO(f);
      REQUIRE_FALSE(r.ok());
      CHECK(r.error().code == Code::kInvalidArgument);
    }
  }
}

TEST_CASE("unknown format is an error naming the known ones", "[robustness]") {
  auto r = parse_tool_output("iperf", "anything");
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code == Code::kInvalidArgument);
  CHECK(r.error().message.find("nccl-tests") != std::string::npos);
  CHECK(r.error().message.find("cyclictest") != std::string::npos);
}

TEST_CASE("every parser rejects the other tools' fixtures", "[fixtures][robustness]") {
  if (!kiln::test::read_fixture("README.md")) {
    KILN_SKIP("skipping: fixtures absent under " << KILN_FIXTURES_DIR);
  }
  for (const auto& [folder, files] : kFixtures) {
    for (const auto& file : files) {
      KILN_FIXTURE(text, folder + "/" + file);
      for (const auto& format : tool_output_formats()) {
        if (format == folder) continue;
        auto r = parse_tool_output(format, text);
        INFO(format << " <- " << folder << "/" << file);
        // An NCCL debug log of an nccl-tests run contains that run's table.
        if (format == "nccl-tests" && folder == "nccl-debug" && text.find("Avg bus bandwidth") != std::string::npos) {
          CHECK(r.ok());
          continue;
        }
        REQUIRE_FALSE(r.ok());
        CHECK(r.error().code == Code::kInvalidArgument);
      }
    }
  }
}

TEST_CASE("fixtures truncated at many offsets never crash any parser", "[fixtures][robustness]") {
  if (!kiln::test::read_fixture("README.md")) {
    KILN_SKIP("skipping: fixtures absent under " << KILN_FIXTURES_DIR);
  }
  for (const auto& [folder, files] : kFixtures) {
    for (const auto& file : files) {
      KILN_FIXTURE(text, folder + "/" + file);
      for (std::size_t cut : cut_points(text.size())) {
        const std::string part = text.substr(0, cut);
        check_outcome(parse_tool_output(folder, part), folder + "/" + file + " cut at " + std::to_string(cut));
        // The other parsers see the same prefix less often (they mostly reject it fast).
        if (cut % 7 == 0)
          for (const auto& format : tool_output_formats())
            check_outcome(parse_tool_output(format, part), format + " <- " + file + " cut at " + std::to_string(cut));
      }
    }
  }
}

TEST_CASE("a truncated nccl-tests run does not pass", "[fixtures][robustness]") {
  KILN_FIXTURE(text, "nccl-tests/h100-8gpu-single-node-gke-a3-high.txt");
  const std::size_t footer = text.find("# Out of bounds");
  REQUIRE(footer != std::string::npos);
  const std::string cut = text.substr(0, footer - 40);  // mid-row, before the footer
  auto r = parse_tool_output("nccl-tests", cut);
  REQUIRE(r.ok());
  CHECK((*r)["health"]["status"] == "fail");
  CHECK((*r)["rows"].size() == 30);
  CHECK((*r)["skipped_rows"] == 1);
}

TEST_CASE("ANSI colour, OSC titles and CRLF do not change what is extracted", "[fixtures][robustness]") {
  if (!kiln::test::read_fixture("README.md")) {
    KILN_SKIP("skipping: fixtures absent under " << KILN_FIXTURES_DIR);
  }
  for (const auto& [folder, files] : kFixtures) {
    for (const auto& file : files) {
      KILN_FIXTURE(text, folder + "/" + file);
      if (!text.empty() && text.find_first_not_of(" \t\r\n") != std::string::npos && text[text.find_first_not_of(" \t\r\n")] == '{')
        continue;  // JSON: escapes inside would make it invalid JSON, not a terminal capture
      auto plain = parse_tool_output(folder, text);
      auto fancy = parse_tool_output(folder, decorate(text));
      INFO(folder << "/" << file);
      REQUIRE(plain.ok());
      REQUIRE(fancy.ok());
      CHECK(*plain == *fancy);
    }
  }
}

TEST_CASE("escape sequences split across a line and truncated escapes", "[robustness]") {
  const std::string topo = "\t\x1b[4mGPU0\tGPU1\tCPU Affinity\tNUMA Affinity\x1b[0m\n"
                           "GPU0\t X \tNV4\t0-7\t0\nGPU1\tNV4\t X \t0-7\t0\n";
  auto r = parse_tool_output("topo", topo);
  REQUIRE(r.ok());
  CHECK((*r)["summary"]["all_gpu_pairs_nvlink"] == true);
  for (const auto& f : tool_output_formats()) {
    check_outcome(parse_tool_output(f, "GPU 0: X (UUID: GPU-1)\n\t Link 0: 25 GB/s\x1b["), f);
    check_outcome(parse_tool_output(f, "T: 0 ( 1) P:80 I:200 C:5 Min: 1 Act: 2 Avg: 1 Max: 3\x1b]0;unterminated"), f);
  }
}

TEST_CASE("random bytes never crash a parser", "[robustness]") {
  std::mt19937 rng(12345);
  static const char kAlphabet[] = "GPU0123456789 :|+-#\t\n\r.[]()<>/xXNV_TCPMinMaxAvgLinkRunningSUM\x1b\0\xff";
  const std::string alphabet(kAlphabet, sizeof(kAlphabet) - 1);  // keeps the NUL
  for (int round = 0; round < 200; ++round) {
    std::string s;
    const int len = static_cast<int>(rng() % 400);
    for (int i = 0; i < len; ++i) s.push_back(alphabet[rng() % alphabet.size()]);
    for (const auto& f : tool_output_formats()) check_outcome(parse_tool_output(f, s), f + " random round " + std::to_string(round));
  }
}
