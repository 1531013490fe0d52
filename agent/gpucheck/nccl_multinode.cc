// nccl_multinode: this node's part of an all-reduce across the nodes of an
// allocation (gpu_checks.h has the contract; docs/agent-protocol.md the
// protocol). kilnd is the rendezvous: kiln-agent on node-rank 0 starts this
// program, reads the unique id it prints and hands it to the other nodes'
// agents, which start this program with --unique-id.
//
// Nothing here may wait forever: a node that never starts, or dies mid-way,
// would otherwise leave the others in ncclCommInitRank or in a spinning
// all-reduce kernel until the agent kills them with no report. So the
// communicators are non-blocking (config.blocking = 0): every wait polls
// ncclCommGetAsyncError / cudaStreamQuery against a deadline and ends in
// ncclCommAbort, and the report says which wait ran out.
#include <nccl.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include "agent/gpucheck/cuda_device.h"
#include "agent/gpucheck/gpu_checks.h"
#include "agent/gpucheck/kernels.h"
#include "agent/gpucheck/nccl_debug_log.h"
#include "agent/gpucheck/nccl_error.h"

namespace kiln::gpucheck {

namespace {

using Clock = std::chrono::steady_clock;

#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 14, 0)
constexpr bool kNonBlocking = true;
#else
// No ncclCommInitRankConfig: set-up blocks, bounded only by kiln-agent
// killing this process (it allows --timeout-s plus a margin).
constexpr bool kNonBlocking = false;
#endif


bool nccl_ok(ncclResult_t rc) { return rc == ncclSuccess || rc == ncclInProgress; }

// One local GPU as a rank of the communicator; freed with its device current.
struct LocalRank {
  int device = 0;
  int global = 0;  // node_rank * G + device
  int sm_count = 0;
  ncclComm_t comm = nullptr;
  DeviceBuffer send, recv;
  Stream stream;
  std::unique_ptr<EventTimer> timer;
};

std::string to_hex(const ncclUniqueId& id) {
  static const char* kDigits = "0123456789abcdef";
  std::string s;
  for (char c : id.internal) {
    const auto b = static_cast<unsigned char>(c);
    s.push_back(kDigits[b >> 4]);
    s.push_back(kDigits[b & 15]);
  }
  return s;
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// "nccl:<256 hex>" into the id; false when malformed (main.cc checks first).
bool from_text(const std::string& text, ncclUniqueId& id) {
  const std::string prefix = "nccl:";
  if (text.rfind(prefix, 0) != 0 || text.size() != prefix.size() + 2 * sizeof id.internal) return false;
  for (std::size_t i = 0; i < sizeof id.internal; ++i) {
    const int hi = hex_value(text[prefix.size() + 2 * i]), lo = hex_value(text[prefix.size() + 2 * i + 1]);
    if (hi < 0 || lo < 0) return false;
    id.internal[i] = static_cast<char>(hi * 16 + lo);
  }
  return true;
}

// Waits until no communicator is ncclInProgress. "" when all are ready;
// otherwise the first error, or `timeout_reason` at the deadline.
std::string wait_comms(std::vector<LocalRank>& ranks, Clock::time_point deadline, const std::string& timeout_reason) {
  for (;;) {
    bool pending = false;
    for (auto& k : ranks) {
      if (!k.comm) continue;
      ncclResult_t state = ncclSuccess;
      if (ncclResult_t rc = ncclCommGetAsyncError(k.comm, &state); rc != ncclSuccess)
        return "GPU" + std::to_string(k.device) + ": " + nccl_error("ncclCommGetAsyncError", rc);
      if (state == ncclInProgress) pending = true;
      else if (state != ncclSuccess) return "GPU" + std::to_string(k.device) + ": " + nccl_error("NCCL", state);
    }
    if (!pending) return "";
    if (Clock::now() >= deadline) return timeout_reason;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

// Waits for every local stream to drain, watching NCCL's asynchronous
// errors: a peer that died leaves the all-reduce kernel spinning, and only
// ncclCommAbort (by the caller) frees the GPU.
std::string wait_streams(std::vector<LocalRank>& ranks, Clock::time_point deadline, const std::string& timeout_reason) {
  for (;;) {
    bool busy = false;
    for (auto& k : ranks) {
      cudaSetDevice(k.device);
      const cudaError_t e = cudaStreamQuery(k.stream.get());
      if (e == cudaErrorNotReady) busy = true;
      else if (e != cudaSuccess) return "GPU" + std::to_string(k.device) + ": " + cuda_error("all-reduce", e);
      ncclResult_t state = ncclSuccess;
      ncclCommGetAsyncError(k.comm, &state);
      if (state != ncclSuccess && state != ncclInProgress)
        return "GPU" + std::to_string(k.device) + ": " + nccl_error("NCCL", state);
    }
    if (!busy) return "";
    if (Clock::now() >= deadline) return timeout_reason;
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

// Ends every communicator: finalize and destroy after a clean run (bounded;
// abort if finalizing hangs), abort after a failure.
void close_comms(std::vector<LocalRank>& ranks, bool clean) {
  if (clean) {
    for (auto& k : ranks) {
      if (!k.comm) continue;
      cudaSetDevice(k.device);
      if (!nccl_ok(ncclCommFinalize(k.comm))) clean = false;
    }
    if (clean) clean = wait_comms(ranks, Clock::now() + std::chrono::seconds(30), "finalize timed out").empty();
  }
  for (auto& k : ranks) {
    if (!k.comm) continue;
    cudaSetDevice(k.device);
    if (clean) ncclCommDestroy(k.comm);
    else ncclCommAbort(k.comm);
    k.comm = nullptr;
  }
}

std::string seconds(int s) { return std::to_string(s) + " s"; }

}  // namespace

agent::CheckResult check_nccl_multinode(const GpucheckOptions& opts, int devices) {
  const MultinodeOptions& m = opts.multinode;
  const auto started = Clock::now();
  agent::CheckResult r;
  r.name = "nccl_multinode";
  r.unit = "GB/s";
  r.status = agent::CheckStatus::kPass;
  if (m.min_busbw) r.threshold = {{"min", *m.min_busbw}};
  const int g = opts.expect_gpus > 0 ? opts.expect_gpus : devices;
  const int nranks = m.nodes * g;
  int version = 0;
  ncclGetVersion(&version);
  r.details = {{"collective", "nccl"}, {"rank", m.node_rank}, {"nodes", m.nodes},       {"gpus_per_node", g},
               {"ranks", nranks},      {"sizes", nlohmann::json::array()},              {"nccl_version", version}};
  if (devices < g) {
    agent::add_failure(r, "expected " + std::to_string(g) + " GPUs per node, found " + std::to_string(devices));
    return r;
  }
  if (devices > g)
    agent::add_warning(r, std::to_string(devices) + " GPUs found, the first " + std::to_string(g) +
                              " used (every node must bring the same count)");

  NcclDebugLog debug_log;  // before ncclGetUniqueId / ncclCommInit*, which read NCCL's environment
  const std::size_t max_bytes = std::max<std::size_t>(m.max_mib, 1) << 20;
  const std::size_t max_count = max_bytes / sizeof(float);

  // Buffers first: a node that cannot even allocate should not announce a
  // unique id others would wait on.
  std::vector<LocalRank> ranks(static_cast<std::size_t>(g));
  std::string error;
  for (int d = 0; d < g && error.empty(); ++d) {
    LocalRank& k = ranks[d];
    k.device = d;
    k.global = m.node_rank * g + d;
    k.sm_count = device_info(d).sm_count;
    cudaError_t e = cudaSetDevice(d);
    if (e == cudaSuccess) e = k.send.allocate(max_bytes);
    if (e == cudaSuccess) e = k.recv.allocate(max_bytes);
    if (e == cudaSuccess) e = k.stream.create();
    if (e == cudaSuccess) {
      k.timer = std::make_unique<EventTimer>();
      e = k.timer->error();
    }
    if (e == cudaSuccess)
      e = launch_fill(static_cast<float*>(k.send.get()), max_count, static_cast<float>(k.global + 1), k.sm_count,
                      k.stream.get());
    if (e == cudaSuccess) e = cudaStreamSynchronize(k.stream.get());
    if (e != cudaSuccess) error = "GPU" + std::to_string(d) + ": " + cuda_error("set-up", e);
  }

  ncclUniqueId id{};
  if (error.empty()) {
    if (m.unique_id.empty()) {
      if (ncclResult_t rc = ncclGetUniqueId(&id); rc != ncclSuccess) {
        error = nccl_error("ncclGetUniqueId", rc);
      } else {
        // kiln-agent waits for exactly this line; it must leave now, not
        // when the process exits.
        std::cout << nlohmann::json{{"unique_id", "nccl:" + to_hex(id)}}.dump() << '\n' << std::flush;
      }
    } else if (!from_text(m.unique_id, id)) {
      error = "--unique-id is not nccl:<256 hex digits>";
    }
  }

  // Every local GPU joins inside one group: NCCL needs all of a process's
  // ranks to join together or the first call waits for the others.
  if (error.empty()) {
    ncclResult_t rc = ncclGroupStart();
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 14, 0)
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    for (auto& k : ranks) {
      if (!nccl_ok(rc)) break;
      cudaSetDevice(k.device);
      rc = ncclCommInitRankConfig(&k.comm, nranks, id, k.global, &config);
    }
#else
    for (auto& k : ranks) {
      if (!nccl_ok(rc)) break;
      cudaSetDevice(k.device);
      rc = ncclCommInitRank(&k.comm, nranks, id, k.global);
    }
#endif
    const ncclResult_t end = ncclGroupEnd();
    if (!nccl_ok(rc)) error = nccl_error("ncclCommInitRank", rc);
    else if (!nccl_ok(end)) error = nccl_error("ncclGroupEnd", end);
    else
      error = wait_comms(ranks, started + std::chrono::seconds(m.timeout_s),
                         "timed out after " + seconds(m.timeout_s) + " waiting for all " + std::to_string(nranks) +
                             " ranks (" + std::to_string(m.nodes) + " nodes x " + std::to_string(g) +
                             " GPUs) to join");
  }
  r.details["non_blocking_init"] = kNonBlocking;

  // The sweep: 1 MiB, x4, ..., always max_mib; within the same timeout_s
  // from the start, so kilnd (which waits timeout_s plus a minute for the
  // result) hears from every node.
  std::vector<std::size_t> sizes;
  for (std::size_t b = std::min<std::size_t>(1 << 20, max_bytes); b < max_bytes; b *= 4) sizes.push_back(b);
  sizes.push_back(max_bytes);
  const double factor = nranks > 1 ? 2.0 * (nranks - 1) / nranks : 0.0;
  const auto deadline = started + std::chrono::seconds(m.timeout_s);
  double last_busbw = -1;
  // One all-reduce of `count` floats on every local rank; the slowest local
  // rank's time in milliseconds, or nullopt with `error` set.
  const auto run_once = [&](std::size_t count, const std::string& late) -> std::optional<double> {
    for (auto& k : ranks) {
      cudaSetDevice(k.device);
      k.timer->start(k.stream.get());
    }
    ncclResult_t rc = ncclGroupStart();
    for (auto& k : ranks) {
      if (!nccl_ok(rc)) break;
      rc = ncclAllReduce(k.send.get(), k.recv.get(), count, ncclFloat, ncclSum, k.comm, k.stream.get());
    }
    const ncclResult_t end = ncclGroupEnd();
    if (!nccl_ok(rc) || !nccl_ok(end)) {
      error = nccl_error("ncclAllReduce", nccl_ok(rc) ? end : rc);
      return std::nullopt;
    }
    if (error = wait_comms(ranks, deadline, late); !error.empty()) return std::nullopt;
    for (auto& k : ranks) {
      cudaSetDevice(k.device);
      k.timer->stop(k.stream.get());
    }
    if (error = wait_streams(ranks, deadline, late); !error.empty()) return std::nullopt;
    double slowest_ms = 0;
    for (auto& k : ranks) {
      cudaSetDevice(k.device);
      const float ms = k.timer->elapsed_ms();
      if (ms < 0) {
        error = "GPU" + std::to_string(k.device) + ": " + cuda_error("all-reduce", cudaGetLastError());
        return std::nullopt;
      }
      slowest_ms = std::max(slowest_ms, static_cast<double>(ms));
    }
    return slowest_ms;
  };
  for (std::size_t bytes : sizes) {
    if (!error.empty()) break;
    const std::size_t count = bytes / sizeof(float);
    const std::string late = "timed out after " + seconds(m.timeout_s) + " in the " + std::to_string(bytes >> 20) +
                             " MiB all-reduce (a node stopped, the network stalled or the sweep is too long for "
                             "the timeout)";
    double best_us = -1;
    for (int it = 0; it <= opts.iterations && error.empty(); ++it) {  // iteration 0 warms up
      const std::optional<double> ms = run_once(count, late);
      if (ms && it > 0) best_us = best_us < 0 ? *ms * 1e3 : std::min(best_us, *ms * 1e3);
    }
    if (!error.empty()) break;
    const double algbw = static_cast<double>(bytes) / (best_us * 1e-6) / 1e9;
    last_busbw = algbw * factor;
    r.details["sizes"].push_back(
        {{"bytes", bytes}, {"time_us", best_us}, {"algbw_gbps", algbw}, {"busbw_gbps", last_busbw}});
  }

  // Correctness at the largest size: both ends of every local result. Exact
  // in floats while the sum stays below 2^24; beyond that (over ~5800 ranks)
  // rounding in NCCL's partial sums is allowed for.
  if (error.empty()) {
    const double expect = static_cast<double>(nranks) * (nranks + 1) / 2.0;
    const double tolerance = expect > 16777216.0 ? expect * 1e-6 : 0.0;
    std::vector<float> head(std::min<std::size_t>(1024, max_count)), tail(head.size());
    for (auto& k : ranks) {
      cudaSetDevice(k.device);
      cudaError_t e = cudaMemcpy(head.data(), k.recv.get(), head.size() * sizeof(float), cudaMemcpyDeviceToHost);
      if (e == cudaSuccess)
        e = cudaMemcpy(tail.data(), static_cast<float*>(k.recv.get()) + max_count - tail.size(),
                       tail.size() * sizeof(float), cudaMemcpyDeviceToHost);
      if (e != cudaSuccess) {
        error = "GPU" + std::to_string(k.device) + ": " + cuda_error("cudaMemcpy", e);
        break;
      }
      auto wrong = [&](float v) { return std::fabs(static_cast<double>(v) - expect) > tolerance; };
      const auto bad = std::count_if(head.begin(), head.end(), wrong) + std::count_if(tail.begin(), tail.end(), wrong);
      if (bad > 0) {
        error = "rank " + std::to_string(k.global) + " (GPU" + std::to_string(k.device) +
                "): all-reduce result wrong in " + std::to_string(bad) + " of " +
                std::to_string(head.size() + tail.size()) + " sampled values";
        break;
      }
    }
  }

  // Small-message latency, after the correctness check has read the large
  // result, across the same communicator (the nodes'
  // network, not just this node's): 8 B x8 up to 64 KiB, the median over
  // kLatencyRounds timed all-reduces after kLatencyWarmup, each the slowest
  // local rank's time. A median, as nccl-tests' average is over many
  // iterations: one late scheduling slot should not set a node's latency.
  // The shape is nccl_latency's (docs/validation.md), tool "nccl_multinode".
  if (error.empty()) {
    constexpr int kLatencyWarmup = 5, kLatencyRounds = 20;
    nlohmann::json lat_sizes = nlohmann::json::array();
    for (std::size_t bytes = 8; bytes <= 65536 && bytes <= max_bytes && error.empty();
         bytes = bytes == 32768 ? 65536 : bytes * 8) {
      const std::string late = "timed out after " + seconds(m.timeout_s) + " in the " + std::to_string(bytes) +
                               " B latency all-reduce (a node stopped or the network stalled)";
      std::vector<double> us;
      for (int it = 0; it < kLatencyWarmup + kLatencyRounds && error.empty(); ++it) {
        const std::optional<double> ms = run_once(std::max<std::size_t>(bytes / sizeof(float), 1), late);
        if (ms && it >= kLatencyWarmup) us.push_back(*ms * 1e3);
      }
      if (!error.empty()) break;
      std::sort(us.begin(), us.end());
      const double median = us.size() % 2 ? us[us.size() / 2] : (us[us.size() / 2 - 1] + us[us.size() / 2]) / 2;
      lat_sizes.push_back({{"bytes", bytes}, {"time_us", median}});
    }
    if (error.empty() && !lat_sizes.empty())
      r.details["latency"] = {{"tool", "nccl_multinode"},
                              {"nodes", m.nodes},
                              {"statistic", "median of 20"},
                              {"time_us_at_8b", lat_sizes[0]["time_us"]},
                              {"sizes", std::move(lat_sizes)}};
  }

  close_comms(ranks, error.empty());
  for (auto it = ranks.rbegin(); it != ranks.rend(); ++it) {
    cudaSetDevice(it->device);
    it->timer.reset();
  }
  while (!ranks.empty()) {  // buffers and streams, each with its device current
    cudaSetDevice(ranks.back().device);
    ranks.pop_back();
  }

  if (!error.empty()) {
    agent::add_failure(r, error);
  } else {
    r.value = last_busbw;
    if (m.min_busbw && last_busbw < *m.min_busbw) {
      char b[200];
      std::snprintf(b, sizeof b, "all-reduce bus bandwidth %.2f GB/s at %zu MiB, expected at least %.2f GB/s",
                    last_busbw, max_bytes >> 20, *m.min_busbw);
      agent::add_failure(r, b);
    }
  }

  // What NCCL chose between the nodes, from its own log.
  if (auto parsed = debug_log.parse(); !parsed) {
    agent::add_warning(r, parsed.error().message);
  } else {
    const auto& p = *parsed;
    r.details["transport"] = p.value("summary", nlohmann::json::object());
    r.details["nccl_debug"] = {{"network", p.value("network", nlohmann::json())},
                               {"connection_counts", p.value("connection_counts", nlohmann::json::object())},
                               {"ring_channels", p.value("ring_channels", nlohmann::json())},
                               {"warnings", p.value("warnings", nlohmann::json::array())}};
    if (r.details["transport"].value("socket_fallback", false))
      agent::add_warning(r, "NCCL fell back to TCP sockets between nodes (no usable RDMA network)");
  }
  return r;
}

}  // namespace kiln::gpucheck
