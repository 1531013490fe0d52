// The gemm check: sustained dense GEMM TFLOPS per GPU through cuBLASLt.
//
// For each type asked for (BF16 always first, then FP8 where every GPU has
// FP8 tensor cores, then TF32 when asked), in two phases:
//
//   1. Search, on every GPU at once, one host thread each: for each candidate
//      shape (kCandidates), ask cuBLASLt's heuristic for its top
//      kAlgosPerShape algorithms and time each for ~100 ms; the fastest
//      shape + algorithm wins. Its result is then verified against a host
//      dot product (LtMatmul::verify, D first filled with NaN), so a broken
//      GEMM never reports a huge figure.
//   2. Sustain, again on every GPU at once: the winner back to back for
//      `gemm_seconds`, one TFLOPS sample per ~100 ms window (CUDA events),
//      while a sampler thread reads each GPU's SM clock, power and NVML
//      clock-event reasons every 100 ms. The result is verified again at the
//      end (a GPU that computes wrong when hot is caught too).
//
// All GPUs run at once, not one after the other, because that is how a
// tenant's job loads the node: the chassis' cooling and power delivery are
// only tested when every GPU draws full power together (a node that cannot
// feed eight GPUs shows power-brake or thermal reasons only then), and the
// check takes `gemm_seconds` rather than eight times that. Each thread only
// touches its own device; results meet after join().
//
// The verdict (floors, throttle rules, the report's shape) is gemm_verdict.cc.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>

#include "agent/gpucheck/cuda_device.h"
#include "agent/gpucheck/gemm_math.h"
#include "agent/gpucheck/gemm_verdict.h"
#include "agent/gpucheck/gpu_checks.h"
#include "agent/gpucheck/lt_matmul.h"
#include "agent/validate/checks/nvml.h"

namespace kiln::gpucheck {

namespace {

// Large enough that launch overhead and wave quantisation are small on an
// H100/H200 (132 SMs), small enough to fit any 40 GB+ GPU many times over
// (16384^3 BF16: 1.5 GiB; TF32: 3 GiB). bench/gpu/gemm_probe.cc searches far
// more widely to show these reach cuBLASLt's best (docs/validation.md).
const std::vector<GemmShape> kCandidates = {
    {8192, 8192, 8192}, {12288, 12288, 12288}, {16384, 16384, 8192}, {16384, 16384, 16384}};
constexpr int kAlgosPerShape = 4;
constexpr double kSearchMs = 100;
constexpr double kWindowMs = 100;
constexpr std::size_t kWorkspaceBytes = 64u << 20;  // cuBLASLt's Hopper kernels want up to 32 MiB
constexpr auto kSamplePeriod = std::chrono::milliseconds(100);

// One GPU's state across the two phases of one type.
struct DeviceWork {
  int device = 0;
  std::unique_ptr<LtMatmul> gemm;
  LtAlgo best;
  double best_ms = 0;
  GemmGpuRun run;
  nlohmann::json search = nlohmann::json::array();
  std::atomic<bool> running{false};  // set while the sustained windows run
};

// Phase 1 on one GPU.
void search(DeviceWork& w, GemmDtype dtype) {
  auto g = LtMatmul::create(w.device, dtype, kCandidates, kWorkspaceBytes);
  if (!g) {
    w.run.error = g.error().message;
    return;
  }
  w.gemm = std::move(*g);
  double best_tflops = -1;
  std::string last_error;
  for (const GemmShape& s : kCandidates) {
    nlohmann::json entry = {{"m", s.m}, {"n", s.n}, {"k", s.k}};
    auto algos = w.gemm->set_shape(s) ? w.gemm->heuristics(kAlgosPerShape)
                                      : Result<std::vector<LtAlgo>>(Error(Code::kInternal, "set_shape"));
    if (!algos) {
      entry["error"] = last_error = algos.error().message;
      w.search.push_back(std::move(entry));
      continue;
    }
    double shape_best = -1;
    for (const LtAlgo& a : *algos) {
      double ms = 0;
      auto t = w.gemm->time(a, 2, kSearchMs, 3, ms);
      if (!t) {
        last_error = t.error().message;
        continue;
      }
      shape_best = std::max(shape_best, *t);
      if (*t > best_tflops) {
        best_tflops = *t;
        w.best = a;
        w.best_ms = ms;
        w.run.shape = s;
      }
    }
    entry["algos"] = algos->size();
    entry["best_tflops"] = shape_best >= 0 ? nlohmann::json(shape_best) : nlohmann::json();
    w.search.push_back(std::move(entry));
  }
  if (best_tflops < 0) {
    w.run.error = "no candidate GEMM ran" + (last_error.empty() ? "" : ": " + last_error);
    return;
  }
  if (auto st = w.gemm->set_shape(w.run.shape); !st) {
    w.run.error = st.error().message;
    return;
  }
  w.run.algo = LtMatmul::describe(w.best);
  if (auto st = w.gemm->verify(w.best, true); !st) w.run.error = st.error().message;
}

// Phase 2 on one GPU.
void sustain(DeviceWork& w, int seconds) {
  const int per_window = std::max(1, static_cast<int>(std::lround(kWindowMs / std::max(w.best_ms, 1e-3))));
  auto samples = w.gemm->run_windows(w.best, per_window, std::chrono::seconds(seconds), &w.running);
  if (!samples) {
    w.run.error = samples.error().message;
    return;
  }
  w.run.tflops = std::move(*samples);
  if (auto st = w.gemm->verify(w.best, false); !st) w.run.error = "after the timed run: " + st.error().message;
}

// Reads NVML every kSamplePeriod until stopped, recording each GPU's reading
// only while that GPU's windows run (so idle moments before and after do not
// count). Without NVML the runs keep nvml_sampled = false and say so.
class Sampler {
 public:
  Sampler(const std::string& library, std::deque<DeviceWork>& work) : work_(work) {
    std::vector<std::string> buses;
    for (const auto& w : work) buses.push_back(device_info(w.device).pci_bus_id);
    auto reader = agent::NvmlLiveReader::open(library, buses);
    if (!reader) {
      error_ = reader.error().message;
      return;
    }
    reader_ = std::move(*reader);
    thread_ = std::thread([this] { loop(); });
  }
  ~Sampler() { stop(); }
  Sampler(const Sampler&) = delete;
  Sampler& operator=(const Sampler&) = delete;

  void stop() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
  }
  const std::string& error() const { return error_; }

 private:
  void loop() {
    std::unique_lock<std::mutex> lock(mu_);
    while (!cv_.wait_for(lock, kSamplePeriod, [this] { return stopping_; })) {
      const std::vector<agent::GpuLiveSample> now = reader_->sample();
      for (std::size_t i = 0; i < now.size() && i < work_.size(); ++i) {
        DeviceWork& w = work_[i];
        if (!w.running.load()) continue;
        // The GPU's own thread does not touch these fields until the sampler
        // is stopped (after join), so writing them here is race-free.
        if (now[i].sm_clock_mhz) w.run.sm_clock_mhz.push_back(*now[i].sm_clock_mhz);
        if (now[i].power_w) w.run.power_w.push_back(*now[i].power_w);
        if (now[i].throttle_reasons) {
          w.run.throttle_mask |= *now[i].throttle_reasons;
          w.run.nvml_sampled = true;
        }
      }
    }
  }

  std::deque<DeviceWork>& work_;
  std::unique_ptr<agent::NvmlLiveReader> reader_;
  std::string error_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::thread thread_;
};

// Runs `fn(work)` for every GPU on its own thread and waits for all.
template <typename Fn>
void on_every_gpu(std::deque<DeviceWork>& work, Fn fn) {
  std::vector<std::thread> threads;
  for (auto& w : work)
    threads.emplace_back([&w, &fn] {
      if (w.run.error.empty()) fn(w);
    });
  for (auto& t : threads) t.join();
}

GemmTypeRun run_type(GemmDtype dtype, const GpucheckOptions& opts, int devices, std::string& sampler_error) {
  std::deque<DeviceWork> work;  // deque: DeviceWork holds an atomic and never moves
  for (int d = 0; d < devices; ++d) {
    DeviceWork& w = work.emplace_back();
    w.device = d;
    w.run.index = d;
    w.run.name = device_info(d).name;
  }
  on_every_gpu(work, [dtype](DeviceWork& w) { search(w, dtype); });
  {
    Sampler sampler(opts.nvml_library, work);
    if (!sampler.error().empty()) sampler_error = sampler.error();
    on_every_gpu(work, [&opts](DeviceWork& w) { sustain(w, opts.gemm_seconds); });
  }
  GemmTypeRun out;
  out.dtype = dtype;
  for (auto& w : work) {
    out.gpus.push_back(std::move(w.run));
    if (w.device == 0) out.search = std::move(w.search);
    w.gemm.reset();  // frees the buffers before the next type allocates its own
  }
  return out;
}

}  // namespace

agent::CheckResult check_gemm(const GpucheckOptions& opts, int devices) {
  GemmFloors floors{opts.gemm_min_tflops, opts.gemm_min_fraction_of_spec};
  std::vector<GemmTypeRun> runs;
  nlohmann::json skipped = nlohmann::json::object();
  std::string sampler_error;
  for (const std::string& name : opts.gemm_dtypes) {
    const std::optional<GemmDtype> dtype = parse_gemm_dtype(name);
    if (!dtype) continue;  // main.cc accepts only known names
    std::string unsupported;
    for (int d = 0; d < devices && unsupported.empty(); ++d) {
      int major = 0, minor = 0;
      cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, d);
      cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, d);
      if (!gemm_dtype_supported(*dtype, major, minor))
        unsupported = "GPU" + std::to_string(d) + " (compute capability " + std::to_string(major) + "." +
                      std::to_string(minor) + ") has no " + name + " tensor cores";
    }
    if (!unsupported.empty() && *dtype != GemmDtype::kBf16) {
      skipped[name] = unsupported;
      continue;
    }
    runs.push_back(run_type(*dtype, opts, devices, sampler_error));
  }
  agent::CheckResult r = gemm_verdict(runs, floors, opts.gemm_seconds, skipped);
  if (!sampler_error.empty()) r.details["nvml"] = sampler_error;
  return r;
}

}  // namespace kiln::gpucheck
