#include "agent/gpucheck/kernels.h"

#include <algorithm>
#include <cstdint>

#include <cuda_bf16.h>
#include <cuda_fp8.h>

namespace kiln::gpucheck {

namespace {

// One 16-byte element per thread, the grid sized to the data. Measured on an
// H100 80GB HBM3 (docs/benchmarks.md): this reaches what cudaMemcpy's own
// device-to-device copy does (3008 against 2983 GB/s on 1 GiB, about 90% of
// the 3.35 TB/s peak), where a persistent grid-stride kernel (SMs x 8 blocks,
// four 16-byte loads in flight per thread, streaming cache hints) stayed at
// 2800-2850 GB/s whatever its unroll or block count, under the 2848 GB/s floor
// of a healthy card. The loop only runs more than once for a buffer past
// 2^31 blocks (32 TiB).
__global__ void copy_kernel(const int4* __restrict__ src, int4* __restrict__ dst, std::size_t n) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    dst[i] = src[i];
}

__global__ void fill_kernel(float* p, std::size_t n, float value) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    p[i] = value;
}

// splitmix64's finaliser: a well-mixed 64-bit value per index.
__device__ std::uint64_t mix(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

template <FillType T>
__global__ void fill_uniform_kernel(void* p, std::size_t n, unsigned seed) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  const std::uint64_t salt = static_cast<std::uint64_t>(seed) << 40;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    // 24 random bits -> [-1, 1) in steps of 2^-23.
    const float v = static_cast<float>(mix(i ^ salt) >> 40) * (1.0f / 8388608.0f) - 1.0f;
    if constexpr (T == FillType::kBf16) static_cast<__nv_bfloat16*>(p)[i] = __float2bfloat16(v);
    else if constexpr (T == FillType::kFp8E4m3)
      static_cast<__nv_fp8_storage_t*>(p)[i] = __nv_cvt_float_to_fp8(v, __NV_SATFINITE, __NV_E4M3);
    else static_cast<float*>(p)[i] = v;
  }
}

constexpr int kThreads = 256;

}  // namespace

cudaError_t launch_copy(const void* src, void* dst, std::size_t bytes, cudaStream_t stream) {
  const std::size_t n = bytes / sizeof(int4);
  const std::size_t wanted = (n + kThreads - 1) / kThreads;
  const unsigned blocks = static_cast<unsigned>(std::min<std::size_t>(std::max<std::size_t>(wanted, 1), 0x7fffffff));
  copy_kernel<<<blocks, kThreads, 0, stream>>>(static_cast<const int4*>(src), static_cast<int4*>(dst), n);
  return cudaGetLastError();
}

cudaError_t launch_fill(float* p, std::size_t count, float value, int sm_count, cudaStream_t stream) {
  const int blocks = (sm_count > 0 ? sm_count : 108) * (2048 / kThreads);
  fill_kernel<<<blocks, kThreads, 0, stream>>>(p, count, value);
  return cudaGetLastError();
}

cudaError_t launch_fill_uniform(void* p, std::size_t count, FillType type, unsigned seed, int sm_count,
                                cudaStream_t stream) {
  const int blocks = (sm_count > 0 ? sm_count : 108) * (2048 / kThreads);
  switch (type) {
    case FillType::kBf16: fill_uniform_kernel<FillType::kBf16><<<blocks, kThreads, 0, stream>>>(p, count, seed); break;
    case FillType::kFp8E4m3:
      fill_uniform_kernel<FillType::kFp8E4m3><<<blocks, kThreads, 0, stream>>>(p, count, seed);
      break;
    case FillType::kFloat: fill_uniform_kernel<FillType::kFloat><<<blocks, kThreads, 0, stream>>>(p, count, seed); break;
  }
  return cudaGetLastError();
}

}  // namespace kiln::gpucheck
