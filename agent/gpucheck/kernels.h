#pragma once
// The device code kiln-gpucheck needs, behind plain host functions so the
// rest of the program is ordinary C++ compiled by the host compiler.

#include <cstddef>

#include <cuda_runtime_api.h>

namespace kiln::gpucheck {

// Copies `bytes` (a multiple of 16) from `src` to `dst` on `stream`, one
// 16-byte element per thread (the fastest shape measured, kernels.cu).
cudaError_t launch_copy(const void* src, void* dst, std::size_t bytes, cudaStream_t stream);

// Sets `count` floats at `p` to `value` on `stream`.
cudaError_t launch_fill(float* p, std::size_t count, float value, int sm_count, cudaStream_t stream);

// The element types launch_fill_uniform writes.
enum class FillType { kBf16, kFp8E4m3, kFloat };

// Fills `count` elements at `p` with values uniform in [-1, 1) from a hash of
// (index, seed), rounded to `type`, on `stream`. GEMM inputs: random values
// (not zeros or a constant) make the tensor cores draw the power real data
// does, so the clocks and TFLOPS measured are the ones a workload gets.
cudaError_t launch_fill_uniform(void* p, std::size_t count, FillType type, unsigned seed, int sm_count,
                                cudaStream_t stream);

}  // namespace kiln::gpucheck
