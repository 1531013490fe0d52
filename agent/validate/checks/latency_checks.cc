#include "agent/validate/checks/latency_checks.h"

#include <sys/stat.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <thread>

#include "agent/validate/checks/tool_run.h"
#include "agent/validate/parsers/gdsio.h"
#include "agent/validate/parsers/nccl_tests.h"
#include "agent/validate/parsers/perftest.h"

namespace kiln::agent {

namespace {

using nlohmann::json;
using tool_run::apply_health;
using tool_run::base;
using tool_run::locate;
using tool_run::skip_without_gpus;
using tool_run::tail;

// The message sizes the GPUDirect latency is judged on: what a collective's
// control messages and a small all-reduce's chunks look like on the wire.
constexpr std::int64_t kRdmaMinBytes = 2, kRdmaMaxBytes = 64;
constexpr std::int64_t kNcclMaxBytes = 65536;
// Where the CUDA toolkit installs gdsio; searched after the tool path.
constexpr const char* kGdsTools = "/usr/local/cuda/gds/tools";
// gdsio reads at most this much of gds.path per run (it stops after -T seconds anyway).
constexpr std::int64_t kGdsMaxBytes = std::int64_t{4} << 30;

std::string fmt(const char* f, double a, double b) {
  char buf[200];
  std::snprintf(buf, sizeof buf, f, a, b);
  return buf;
}

}  // namespace

CheckResult check_gpudirect_rdma_latency(const ValidationProfile& profile, const ToolOptions& opts) {
  CheckResult r = base("gpudirect_rdma_latency", "us");
  if (profile.gpudirect_rdma_latency_us_max) r.threshold = {{"max", *profile.gpudirect_rdma_latency_us_max}};
  r.details["tool"] = "ib_send_lat";
  if (skip_without_gpus(profile, r)) return r;
  auto tool = locate(opts, "ib_send_lat", r);
  if (!tool) return r;
  auto pair = tool_run::rdma_loopback_pair(profile, opts, r);
  if (!pair) return r;
  const std::string client_gpu = profile.gpu_count > 1 ? "1" : "0";
  // -a: every size from 2 B (the 2..64 B rows are judged); -I 0: no inline
  // data, which CUDA buffers require; -F: do not abort on a CPU-frequency
  // mismatch (the parser turns perftest's notice into a warning).
  const std::vector<std::string> common = {"-a", "-I", "0", "-F", "-n", "1000"};
  ProcessSpec server;
  server.argv = {*tool, "-d", pair->first, "--use_cuda=0"};
  server.argv.insert(server.argv.end(), common.begin(), common.end());
  server.timeout = opts.timeout;
  auto srv = BackgroundProcess::start(server);
  if (!srv) {
    add_failure(r, srv.error().message);
    return r;
  }
  std::this_thread::sleep_for(std::chrono::seconds(1));  // let the server listen, as ib_write_bw does
  std::vector<std::string> client = {*tool, "-d", pair->second, "--use_cuda=" + client_gpu};
  client.insert(client.end(), common.begin(), common.end());
  client.push_back("127.0.0.1");
  auto out = tool_run::run(opts, client, r);
  ProcessOutput server_out = (*srv)->finish(std::chrono::seconds(30));
  r.details["server_devices"] = {pair->first, pair->second};
  if (!out) return r;
  auto parsed = parse_perftest(out->out + out->err);
  if (!parsed) {
    add_failure(r, "ib_send_lat printed no result: " + tail(out->out + out->err + server_out.out, 300));
    return r;
  }
  apply_health(*parsed, r);
  if (!parsed->value("use_cuda", false)) add_failure(r, "ib_send_lat did not use a GPU buffer (--use_cuda)");
  auto rows = perftest_latency_rows(*parsed);
  if (!rows) {
    if (r.status != CheckStatus::kFail) add_failure(r, "ib_send_lat latency table: " + rows.error().message);
    return r;
  }
  json sizes = json::array();
  double worst = -1;
  json worst_p99 = nullptr;
  for (const auto& row : *rows) {
    if (row.bytes < kRdmaMinBytes || row.bytes > kRdmaMaxBytes) continue;
    sizes.push_back({{"bytes", row.bytes},
                     {"typical_us", row.typical_us},
                     {"p99_us", row.p99_us ? json(*row.p99_us) : json(nullptr)},
                     {"avg_us", row.avg_us ? json(*row.avg_us) : json(nullptr)}});
    worst = std::max(worst, row.typical_us);
    if (row.p99_us && (worst_p99.is_null() || *row.p99_us > worst_p99.get<double>())) worst_p99 = *row.p99_us;
  }
  r.details["sizes"] = sizes;
  r.details["p99_us"] = worst_p99;
  if (sizes.empty()) {
    add_failure(r, "ib_send_lat printed no row between 2 and 64 bytes");
    return r;
  }
  r.value = worst;
  if (profile.gpudirect_rdma_latency_us_max && worst > *profile.gpudirect_rdma_latency_us_max)
    add_failure(r, fmt("GPUDirect RDMA latency %.2f us (worst typical at 2..64 B), expected at most %.2f", worst,
                       *profile.gpudirect_rdma_latency_us_max));
  if (out->exit_code != 0 && r.status == CheckStatus::kPass)
    add_failure(r, "ib_send_lat exited with " + std::to_string(out->exit_code));
  return r;
}

CheckResult check_nccl_latency(const ValidationProfile& profile, const ToolOptions& opts) {
  CheckResult r = base("nccl_latency", "us");
  if (profile.nccl_latency_us_max) r.threshold = {{"max", *profile.nccl_latency_us_max}};
  r.details["tool"] = "all_reduce_perf";
  r.details["nodes"] = 1;
  if (skip_without_gpus(profile, r)) return r;
  auto tool = locate(opts, "all_reduce_perf", r);
  if (!tool) return r;
  auto out = tool_run::run(opts, {*tool, "-b", "8", "-e", std::to_string(kNcclMaxBytes), "-f", "2", "-g",
                                  std::to_string(profile.gpu_count)}, r);
  if (!out) return r;
  auto parsed = parse_nccl_tests(out->out);
  if (!parsed) {
    add_failure(r, "all_reduce_perf printed no result table: " + tail(out->out + out->err, 300));
    return r;
  }
  apply_health(*parsed, r);
  auto points = nccl_small_message_latency(*parsed, kNcclMaxBytes);
  if (!points) {
    add_failure(r, "all_reduce_perf table: " + points.error().message);
    return r;
  }
  json sizes = json::array();
  json at8 = nullptr;
  for (const auto& p : *points) {
    sizes.push_back({{"bytes", p.bytes}, {"time_us", p.time_us}});
    if (p.bytes == 8) at8 = p.time_us;
  }
  r.details["sizes"] = sizes;
  if (at8.is_null()) {
    add_failure(r, "all_reduce_perf printed no 8-byte row");
    return r;
  }
  r.value = at8;
  if (profile.nccl_latency_us_max && at8.get<double>() > *profile.nccl_latency_us_max)
    add_failure(r, fmt("all_reduce latency %.2f us at 8 B, expected at most %.2f", at8.get<double>(),
                       *profile.nccl_latency_us_max));
  if (out->exit_code != 0 && r.status == CheckStatus::kPass)
    add_failure(r, "all_reduce_perf exited with " + std::to_string(out->exit_code) + ": " + tail(out->err, 300));
  return r;
}

CheckResult check_gds_read(const ValidationProfile& profile, const ToolOptions& opts) {
  CheckResult r = base("gds_read", "GB/s");
  if (profile.gds_read_gbps_min) r.threshold = {{"min", *profile.gds_read_gbps_min}};
  if (skip_without_gpus(profile, r)) return r;
  ToolOptions with_cuda = opts;
  with_cuda.search_path = opts.search_path + (opts.search_path.empty() ? "" : ":") + kGdsTools;
  auto tool = locate(with_cuda, "gdsio", r);
  if (!tool) {
    r.details["reason"] = "gdsio not installed (cuFile / GPUDirect Storage tools absent)";
    return r;
  }
  if (profile.gds_path.empty()) {
    r.status = CheckStatus::kSkip;
    r.details["reason"] = "profile names no file to read (gds.path)";
    return r;
  }
  struct stat st {};
  if (::stat(profile.gds_path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) {
    add_failure(r, "gds.path " + profile.gds_path + " is not a regular file");
    return r;
  }
  const std::int64_t bytes = std::min<std::int64_t>(st.st_size, kGdsMaxBytes) / (1 << 20) * (1 << 20);
  if (bytes < (1 << 20)) {
    add_failure(r, "gds.path " + profile.gds_path + " is smaller than 1 MiB");
    return r;
  }
  r.details["path"] = profile.gds_path;
  // -I 0: sequential read; -x 0 GPU-direct, -x 2 through host memory; 4
  // threads of 1 MiB I/O for 10 s each, on GPU 0.
  auto measure = [&](const char* xfer, const char* expected) -> json {
    auto out = tool_run::run(opts, {*tool, "-f", profile.gds_path, "-d", "0", "-w", "4", "-s",
                                    std::to_string(bytes >> 20) + "M", "-i", "1M", "-x", xfer, "-I", "0", "-T", "10"},
                             r);
    if (!out) return nullptr;
    auto parsed = parse_gdsio(out->out + out->err);
    if (!parsed) {
      add_failure(r, std::string("gdsio -x ") + xfer + " printed no summary: " + tail(out->out + out->err, 300));
      return nullptr;
    }
    apply_health(*parsed, r);
    for (const auto& run : (*parsed)["runs"])
      if (run["io_type"] == "READ" && run["xfer_type"] == expected) return run["throughput_gb_s"];
    add_failure(r, std::string("gdsio -x ") + xfer + " reported no READ with XferType " + expected);
    return nullptr;
  };
  const json direct = measure("0", "GPUD");
  const json bounce = measure("2", "CPU_GPU");
  r.details["gpu_direct_gbps"] = direct;
  r.details["host_bounce_gbps"] = bounce;
  r.details["ratio"] = direct.is_number() && bounce.is_number() && bounce.get<double>() > 0
                           ? json(direct.get<double>() / bounce.get<double>())
                           : json(nullptr);
  r.value = direct;
  if (profile.gds_read_gbps_min && direct.is_number() && direct.get<double>() < *profile.gds_read_gbps_min)
    add_failure(r, fmt("GPUDirect Storage read %.2f GB/s, expected at least %.2f", direct.get<double>(),
                       *profile.gds_read_gbps_min));
  return r;
}

}  // namespace kiln::agent
