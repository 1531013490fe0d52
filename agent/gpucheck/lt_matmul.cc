#include "agent/gpucheck/lt_matmul.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>

#include "agent/gpucheck/cublaslt_loader.h"
#include "agent/gpucheck/kernels.h"

namespace kiln::gpucheck {

namespace {

constexpr std::size_t kScaleSlot = 256;

cudaDataType_t input_type(GemmDtype t) {
  switch (t) {
    case GemmDtype::kBf16: return CUDA_R_16BF;
    case GemmDtype::kFp8: return CUDA_R_8F_E4M3;
    case GemmDtype::kTf32: return CUDA_R_32F;
  }
  return CUDA_R_32F;
}

cudaDataType_t output_type(GemmDtype t) { return t == GemmDtype::kTf32 ? CUDA_R_32F : CUDA_R_16BF; }

cublasComputeType_t compute_type(GemmDtype t) {
  return t == GemmDtype::kTf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
}

FillType fill_type(GemmDtype t) {
  switch (t) {
    case GemmDtype::kBf16: return FillType::kBf16;
    case GemmDtype::kFp8: return FillType::kFp8E4m3;
    case GemmDtype::kTf32: return FillType::kFloat;
  }
  return FillType::kFloat;
}

Error cuda_failure(const char* call, cudaError_t e) { return Error(Code::kUnavailable, cuda_error(call, e)); }

Error lt_failure(const char* call, cublasStatus_t s) {
  return Error(Code::kUnavailable, std::string(call) + ": " + cublasLtGetStatusString(s) + " (" +
                                       std::to_string(static_cast<int>(s)) + ")");
}

#define KILN_CUDA(call)                                                  \
  do {                                                                   \
    if (cudaError_t e_ = (call); e_ != cudaSuccess) return cuda_failure(#call, e_); \
  } while (0)
#define KILN_LT(call)                                                              \
  do {                                                                             \
    if (cublasStatus_t s_ = (call); s_ != CUBLAS_STATUS_SUCCESS) return lt_failure(#call, s_); \
  } while (0)

// Element `index` of a host copy of A, B or D, as a double.
double element(GemmDtype t, bool output, const std::vector<unsigned char>& bytes, std::size_t index) {
  if (t == GemmDtype::kTf32) {
    float f = 0;
    std::memcpy(&f, bytes.data() + index * 4, 4);
    return f;
  }
  if (t == GemmDtype::kFp8 && !output) return fp8_e4m3_to_float(bytes[index]);
  std::uint16_t h = 0;
  std::memcpy(&h, bytes.data() + index * 2, 2);
  return bf16_to_float(h);
}

}  // namespace

Result<std::unique_ptr<LtMatmul>> LtMatmul::create(int device, GemmDtype dtype, const std::vector<GemmShape>& shapes,
                                                   std::size_t workspace_bytes, double max_fraction) {
  std::unique_ptr<LtMatmul> g(new LtMatmul(device, dtype));
  g->shapes_ = shapes;
  g->workspace_bytes_ = workspace_bytes;
  for (const GemmShape& s : shapes) {
    g->a_elems_ = std::max<std::size_t>(g->a_elems_, static_cast<std::size_t>(s.m * s.k));
    g->b_elems_ = std::max<std::size_t>(g->b_elems_, static_cast<std::size_t>(s.k * s.n));
    g->d_elems_ = std::max<std::size_t>(g->d_elems_, static_cast<std::size_t>(s.m * s.n));
  }
  if (auto st = g->make_current(); !st) return st.take_error();
  KILN_CUDA(cudaDeviceGetAttribute(&g->sm_count_, cudaDevAttrMultiProcessorCount, device));
  const std::size_t in = gemm_input_bytes(dtype), out = gemm_output_bytes(dtype);
  const std::size_t need = (g->a_elems_ + g->b_elems_) * in + g->d_elems_ * out + workspace_bytes;
  std::size_t free_b = 0, total_b = 0;
  KILN_CUDA(cudaMemGetInfo(&free_b, &total_b));
  if (static_cast<double>(need) > max_fraction * static_cast<double>(free_b))
    return Error(Code::kUnavailable, "the GEMM buffers need " + std::to_string(need >> 20) + " MiB, " +
                                         std::to_string(free_b >> 20) + " MiB of device memory is free");
  KILN_CUDA(g->stream_.create());
  KILN_CUDA(g->a_.allocate(g->a_elems_ * in));
  KILN_CUDA(g->b_.allocate(g->b_elems_ * in));
  KILN_CUDA(g->d_.allocate(g->d_elems_ * out));
  KILN_CUDA(g->workspace_.allocate(std::max<std::size_t>(workspace_bytes, 256)));
  // Each scale in its own 256-byte slot: cuBLASLt's FP8 kernels want every
  // pointer they are given (scales included) aligned like cudaMalloc's, and
  // the heuristic does not check it, so a second float packed at +4 bytes
  // made every proposed algorithm fail at cublasLtMatmul (NOT_SUPPORTED) on
  // an H100.
  KILN_CUDA(g->scales_.allocate(2 * kScaleSlot));
  KILN_CUDA(launch_fill_uniform(g->a_.get(), g->a_elems_, fill_type(dtype), 1, g->sm_count_, g->stream_.get()));
  KILN_CUDA(launch_fill_uniform(g->b_.get(), g->b_elems_, fill_type(dtype), 2, g->sm_count_, g->stream_.get()));
  KILN_CUDA(cudaMemsetAsync(g->d_.get(), 0, g->d_elems_ * out, g->stream_.get()));
  const float one = 1.0f;
  auto* scale_bytes = static_cast<unsigned char*>(g->scales_.get());
  for (std::size_t slot = 0; slot < 2; ++slot)
    KILN_CUDA(cudaMemcpyAsync(scale_bytes + slot * kScaleSlot, &one, sizeof one, cudaMemcpyHostToDevice,
                              g->stream_.get()));
  KILN_CUDA(cudaStreamSynchronize(g->stream_.get()));

  if (Status loaded = load_cublaslt(); !loaded) return loaded.error();
  KILN_LT(cublasLtCreate(&g->handle_));
  KILN_LT(cublasLtMatmulDescCreate(&g->op_, compute_type(dtype), CUDA_R_32F));
  const cublasOperation_t trans_a = CUBLAS_OP_T, trans_b = CUBLAS_OP_N;
  KILN_LT(cublasLtMatmulDescSetAttribute(g->op_, CUBLASLT_MATMUL_DESC_TRANSA, &trans_a, sizeof trans_a));
  KILN_LT(cublasLtMatmulDescSetAttribute(g->op_, CUBLASLT_MATMUL_DESC_TRANSB, &trans_b, sizeof trans_b));
  if (dtype == GemmDtype::kFp8) {
    // Unit scales: the inputs are already in E4M3's range. D is BF16, so it
    // takes no scale (D_SCALE is for FP8 outputs).
    const void* a_scale = g->scales_.get();
    const void* b_scale = static_cast<const unsigned char*>(g->scales_.get()) + kScaleSlot;
    KILN_LT(cublasLtMatmulDescSetAttribute(g->op_, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &a_scale, sizeof a_scale));
    KILN_LT(cublasLtMatmulDescSetAttribute(g->op_, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &b_scale, sizeof b_scale));
  }
  KILN_LT(cublasLtMatmulPreferenceCreate(&g->pref_));
  const std::uint64_t ws = workspace_bytes;
  KILN_LT(cublasLtMatmulPreferenceSetAttribute(g->pref_, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws));
  return g;
}

LtMatmul::~LtMatmul() {
  cudaSetDevice(device_);
  if (stream_.get()) cudaStreamSynchronize(stream_.get());
  (void)clear_layouts();
  if (pref_) cublasLtMatmulPreferenceDestroy(pref_);
  if (op_) cublasLtMatmulDescDestroy(op_);
  if (handle_) cublasLtDestroy(handle_);
}

Status LtMatmul::make_current() const {
  KILN_CUDA(cudaSetDevice(device_));
  return ok_status();
}

Status LtMatmul::clear_layouts() {
  for (cublasLtMatrixLayout_t* l : {&a_layout_, &b_layout_, &d_layout_}) {
    if (*l) cublasLtMatrixLayoutDestroy(*l);
    *l = nullptr;
  }
  return ok_status();
}

Status LtMatmul::set_shape(const GemmShape& s) {
  if (std::find(shapes_.begin(), shapes_.end(), s) == shapes_.end())
    return Error::invalid("shape", "not one of the shapes the buffers were sized for");
  if (auto st = make_current(); !st) return st;
  (void)clear_layouts();
  const auto u = [](long long v) { return static_cast<std::uint64_t>(v); };
  KILN_LT(cublasLtMatrixLayoutCreate(&a_layout_, input_type(dtype_), u(s.k), u(s.m), s.k));
  KILN_LT(cublasLtMatrixLayoutCreate(&b_layout_, input_type(dtype_), u(s.k), u(s.n), s.k));
  KILN_LT(cublasLtMatrixLayoutCreate(&d_layout_, output_type(dtype_), u(s.m), u(s.n), s.m));
  shape_ = s;
  return ok_status();
}

Result<std::vector<LtAlgo>> LtMatmul::heuristics(int requested) {
  if (auto st = make_current(); !st) return st.take_error();
  std::vector<cublasLtMatmulHeuristicResult_t> found(static_cast<std::size_t>(std::max(requested, 1)));
  int returned = 0;
  KILN_LT(cublasLtMatmulAlgoGetHeuristic(handle_, op_, a_layout_, b_layout_, d_layout_, d_layout_, pref_,
                                         static_cast<int>(found.size()), found.data(), &returned));
  std::vector<LtAlgo> out;
  for (int i = 0; i < returned; ++i) {
    const auto& h = found[static_cast<std::size_t>(i)];
    if (h.state != CUBLAS_STATUS_SUCCESS || h.workspaceSize > workspace_bytes_) continue;
    out.push_back(LtAlgo{h.algo, i, h.workspaceSize});
  }
  if (out.empty())
    return Error(Code::kNotFound, std::string("cuBLASLt proposed no algorithm for ") + gemm_dtype_name(dtype_) + " " +
                                      std::to_string(shape_.m) + "x" + std::to_string(shape_.n) + "x" +
                                      std::to_string(shape_.k));
  return out;
}

Status LtMatmul::enqueue(const LtAlgo& algo, int count) {
  const float alpha = 1.0f, beta = 0.0f;
  for (int i = 0; i < count; ++i)
    KILN_LT(cublasLtMatmul(handle_, op_, &alpha, a_.get(), a_layout_, b_.get(), b_layout_, &beta, d_.get(), d_layout_,
                           d_.get(), d_layout_, &algo.algo, workspace_.get(), workspace_bytes_, stream_.get()));
  return ok_status();
}

Result<double> LtMatmul::time(const LtAlgo& algo, int warmup, double target_ms, int min_iterations,
                              double& ms_per_gemm) {
  if (auto st = make_current(); !st) return st.take_error();
  EventTimer timer;
  KILN_CUDA(timer.error());
  if (auto st = enqueue(algo, std::max(warmup, 1)); !st) return st.take_error();
  // One timed GEMM sizes the real measurement.
  KILN_CUDA(timer.start(stream_.get()));
  if (auto st = enqueue(algo, 1); !st) return st.take_error();
  KILN_CUDA(timer.stop(stream_.get()));
  float one = timer.elapsed_ms();
  if (one <= 0) {
    KILN_CUDA(cudaStreamSynchronize(stream_.get()));
    return Error(Code::kUnavailable, "CUDA event timing failed");
  }
  const int iterations = std::max(min_iterations, static_cast<int>(std::ceil(target_ms / one)));
  KILN_CUDA(timer.start(stream_.get()));
  if (auto st = enqueue(algo, iterations); !st) return st.take_error();
  KILN_CUDA(timer.stop(stream_.get()));
  const float ms = timer.elapsed_ms();
  if (ms <= 0) {
    KILN_CUDA(cudaStreamSynchronize(stream_.get()));
    return Error(Code::kUnavailable, "CUDA event timing failed");
  }
  ms_per_gemm = ms / iterations;
  return gemm_tflops(shape_, iterations, ms * 1e-3);
}

Result<std::vector<double>> LtMatmul::run_windows(const LtAlgo& algo, int per_window,
                                                  std::chrono::duration<double> seconds, std::atomic<bool>* running) {
  if (auto st = make_current(); !st) return st.take_error();
  struct Clear {
    std::atomic<bool>* flag;
    ~Clear() {
      if (flag) flag->store(false);
    }
  } clear{running};
  EventTimer timers[2];
  KILN_CUDA(timers[0].error());
  KILN_CUDA(timers[1].error());
  bool pending[2] = {false, false};
  auto enqueue_window = [&](int slot) -> Status {
    KILN_CUDA(timers[slot].start(stream_.get()));
    if (auto st = enqueue(algo, per_window); !st) return st;
    KILN_CUDA(timers[slot].stop(stream_.get()));
    pending[slot] = true;
    return ok_status();
  };
  std::vector<double> samples;
  const auto t0 = std::chrono::steady_clock::now();
  if (running) running->store(true);
  if (auto st = enqueue_window(0); !st) return st.take_error();
  if (auto st = enqueue_window(1); !st) return st.take_error();
  // Windows alternate between the two slots in stream order, so waiting on
  // them alternately waits in the order they finish.
  for (int slot = 0; pending[0] || pending[1]; slot ^= 1) {
    if (!pending[slot]) continue;
    const float ms = timers[slot].elapsed_ms();
    pending[slot] = false;
    if (ms <= 0) {
      KILN_CUDA(cudaStreamSynchronize(stream_.get()));
      return Error(Code::kUnavailable, "CUDA event timing failed");
    }
    samples.push_back(gemm_tflops(shape_, per_window, ms * 1e-3));
    if (std::chrono::steady_clock::now() - t0 < seconds)
      if (auto st = enqueue_window(slot); !st) return st.take_error();
  }
  return samples;
}

Status LtMatmul::verify(const LtAlgo& algo, bool clear, int samples) {
  if (auto st = make_current(); !st) return st;
  const GemmShape s = shape_;
  const std::size_t in = gemm_input_bytes(dtype_), out = gemm_output_bytes(dtype_);
  if (clear) {
    // All-ones bits are NaN in BF16 and FP32: an element the GEMM does not
    // write cannot match.
    KILN_CUDA(cudaMemsetAsync(d_.get(), 0xff, static_cast<std::size_t>(s.m * s.n) * out, stream_.get()));
    if (auto st = enqueue(algo, 1); !st) return st;
  }
  KILN_CUDA(cudaStreamSynchronize(stream_.get()));
  std::vector<std::pair<long long, long long>> where = {{0, 0}, {s.m - 1, s.n - 1}, {0, s.n - 1}, {s.m - 1, 0}};
  std::uint64_t x = 0x2545f4914f6cdd1dull;
  while (static_cast<int>(where.size()) < samples) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    const long long i = static_cast<long long>(x % static_cast<std::uint64_t>(s.m));
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    where.emplace_back(i, static_cast<long long>(x % static_cast<std::uint64_t>(s.n)));
  }
  std::vector<unsigned char> row(static_cast<std::size_t>(s.k) * in), col(row.size()), d(out);
  for (const auto& [i, j] : where) {
    // Row i of op(A) is column i of the k x m A; column j of B likewise.
    const auto* a = static_cast<const unsigned char*>(a_.get()) + static_cast<std::size_t>(i * s.k) * in;
    const auto* b = static_cast<const unsigned char*>(b_.get()) + static_cast<std::size_t>(j * s.k) * in;
    const auto* e = static_cast<const unsigned char*>(d_.get()) + static_cast<std::size_t>(i + j * s.m) * out;
    KILN_CUDA(cudaMemcpy(row.data(), a, row.size(), cudaMemcpyDeviceToHost));
    KILN_CUDA(cudaMemcpy(col.data(), b, col.size(), cudaMemcpyDeviceToHost));
    KILN_CUDA(cudaMemcpy(d.data(), e, d.size(), cudaMemcpyDeviceToHost));
    double ref = 0, sum_abs = 0;
    for (long long p = 0; p < s.k; ++p) {
      const double prod = element(dtype_, false, row, static_cast<std::size_t>(p)) *
                          element(dtype_, false, col, static_cast<std::size_t>(p));
      ref += prod;
      sum_abs += std::fabs(prod);
    }
    const double got = element(dtype_, true, d, 0);
    if (!gemm_element_matches(got, ref, sum_abs)) {
      char b2[200];
      std::snprintf(b2, sizeof b2, "wrong GEMM result at D[%lld,%lld] (%lldx%lldx%lld): got %g, expected %g", i, j, s.m,
                    s.n, s.k, got, ref);
      return Error(Code::kDriverError, b2);
    }
  }
  return ok_status();
}

nlohmann::json LtMatmul::describe(const LtAlgo& algo) {
  auto get = [&](cublasLtMatmulAlgoConfigAttributes_t attr, auto zero) -> long long {
    decltype(zero) v = zero;
    std::size_t written = 0;
    if (cublasLtMatmulAlgoConfigGetAttribute(&algo.algo, attr, &v, sizeof v, &written) != CUBLAS_STATUS_SUCCESS)
      return -1;
    return static_cast<long long>(v);
  };
  return {{"id", get(CUBLASLT_ALGO_CONFIG_ID, std::int32_t{0})},
          {"tile", get(CUBLASLT_ALGO_CONFIG_TILE_ID, std::uint32_t{0})},
          {"stages", get(CUBLASLT_ALGO_CONFIG_STAGES_ID, std::uint32_t{0})},
          {"splitk", get(CUBLASLT_ALGO_CONFIG_SPLITK_NUM, std::int32_t{0})},
          {"swizzle", get(CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING, std::uint32_t{0})},
          {"cluster", get(CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID, std::uint16_t{0})},
          {"rank", algo.rank},
          {"workspace_bytes", algo.workspace_bytes}};
}

}  // namespace kiln::gpucheck
