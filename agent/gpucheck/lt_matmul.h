#pragma once
// LtMatmul: one device's dense GEMM through cuBLASLt, shared by the gemm
// check (gemm.cc) and the GEMM probe (bench/gpu/gemm_probe.cc), so the
// probe's "best cuBLASLt can do" is measured by the very code the check uses.
//
// D = A^T x B ("TN": A is stored k x m and B k x n, both column-major, so
// each row of op(A) and each column of B is contiguous). TN is the layout
// cuBLASLt requires for FP8 on Hopper and a native one for every type, so all
// types share it. alpha = 1, beta = 0, C is D. Inputs are random values in
// [-1, 1) (kernels.h), FP8 inputs get unit scale factors through
// CUBLASLT_MATMUL_DESC_A/B_SCALE_POINTER; FP8 fast accumulation stays off
// (cuBLASLt's default: partial sums are promoted to FP32 periodically, the
// accurate mode).
//
// Threads: an LtMatmul is used by one thread at a time; every call makes its
// device current on the calling thread first, so a worker thread may hand it
// to another between phases. Errors are values: the CUDA or cuBLAS call and
// the library's words ("cublasLtMatmul: the requested functionality is not
// supported (15)"). Destruction frees every buffer and descriptor on its
// device.

#include <atomic>
#include <chrono>
#include <cstddef>
#include <memory>
#include <vector>

#include <cublasLt.h>
#include <nlohmann/json.hpp>

#include "agent/gpucheck/cuda_device.h"
#include "agent/gpucheck/gemm_math.h"
#include "common/result.h"

namespace kiln::gpucheck {

// One candidate cuBLASLt proposed for a shape, with its rank in the
// heuristic's answer (0 = its first guess).
struct LtAlgo {
  cublasLtMatmulAlgo_t algo{};
  int rank = 0;
  std::size_t workspace_bytes = 0;
};

class LtMatmul {
 public:
  // Creates the handle, a stream, the workspace and buffers large enough for
  // every shape in `shapes` on `device`, and fills A and B. Errors
  // (kUnavailable): the buffers would take more than `max_fraction` of the
  // device's free memory; a CUDA or cuBLAS call failed.
  static Result<std::unique_ptr<LtMatmul>> create(int device, GemmDtype dtype, const std::vector<GemmShape>& shapes,
                                                  std::size_t workspace_bytes, double max_fraction = 0.8);
  ~LtMatmul();
  LtMatmul(const LtMatmul&) = delete;
  LtMatmul& operator=(const LtMatmul&) = delete;

  // Makes `s` the shape every later call multiplies; it must be one of the
  // shapes given to create() (kInvalidArgument otherwise).
  Status set_shape(const GemmShape& s);
  const GemmShape& shape() const { return shape_; }
  GemmDtype dtype() const { return dtype_; }
  int device() const { return device_; }

  // Up to `requested` algorithms cuBLASLt's heuristic proposes for the
  // shape, its best guess first; only those it says can run within the
  // workspace. An empty list is an error (kNotFound).
  Result<std::vector<LtAlgo>> heuristics(int requested);

  // Times GEMMs with `algo`: `warmup` untimed ones, then enough for about
  // `target_ms` (at least `min_iterations`), between two CUDA events.
  // Returns TFLOPS; ms_per_gemm is set too.
  Result<double> time(const LtAlgo& algo, int warmup, double target_ms, int min_iterations, double& ms_per_gemm);

  // Runs GEMMs with `algo` back to back for `seconds`, in windows of
  // `per_window` GEMMs each timed by its own pair of CUDA events; one TFLOPS
  // sample per window. Two windows are always queued so the GPU never waits
  // for the host between them. `running` is set while the GEMMs run (the
  // NVML sampler reads it), cleared before returning.
  Result<std::vector<double>> run_windows(const LtAlgo& algo, int per_window, std::chrono::duration<double> seconds,
                                          std::atomic<bool>* running = nullptr);

  // Proves the GEMM computes: when `clear` is set, D is first filled with
  // NaN so a GEMM that writes nothing is caught; then one GEMM runs (or,
  // without `clear`, the last result is read) and `samples` elements of D
  // (the four corners and pseudo-random others) are compared with a host
  // dot product of the same inputs (gemm_element_matches). kDriverError
  // naming the first element that differs; kUnavailable for a CUDA error.
  Status verify(const LtAlgo& algo, bool clear, int samples = 16);

  // cuBLASLt's description of `algo` for the report: {"id", "tile",
  // "stages", "splitk", "swizzle", "cluster", "rank"}.
  static nlohmann::json describe(const LtAlgo& algo);

 private:
  LtMatmul(int device, GemmDtype dtype) : device_(device), dtype_(dtype) {}
  Status make_current() const;
  Status enqueue(const LtAlgo& algo, int count);
  Status clear_layouts();

  int device_ = 0;
  GemmDtype dtype_ = GemmDtype::kBf16;
  int sm_count_ = 0;
  std::vector<GemmShape> shapes_;
  GemmShape shape_;
  std::size_t a_elems_ = 0, b_elems_ = 0, d_elems_ = 0, workspace_bytes_ = 0;
  cublasLtHandle_t handle_ = nullptr;
  cublasLtMatmulDesc_t op_ = nullptr;
  cublasLtMatmulPreference_t pref_ = nullptr;
  cublasLtMatrixLayout_t a_layout_ = nullptr, b_layout_ = nullptr, d_layout_ = nullptr;
  DeviceBuffer a_, b_, d_, workspace_, scales_;
  Stream stream_;
};

}  // namespace kiln::gpucheck
