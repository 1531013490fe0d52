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

}  // namespace kiln::gpucheck
