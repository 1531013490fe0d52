// Which copy kernel shape reaches the most HBM bandwidth (docs/benchmarks.md,
// "GPU validation"): the driver's cudaMemcpyAsync as the baseline, the old
// persistent grid-stride kernel of kiln-gpucheck in several shapes, and the
// one-element-per-thread kernel it uses now. Best of 20 each, GB/s counting
// bytes read and written, on 1 GiB and 4 GiB.
//
//   nvcc -O3 -arch=sm_90 -o hbm_copy_probe bench/gpu/hbm_copy_probe.cu && ./hbm_copy_probe
#include <cstdio>
#include <cuda_runtime.h>
template <int U>
__global__ void grid_stride(const int4* __restrict__ s, int4* __restrict__ d, size_t n) {
  const size_t stride = (size_t)gridDim.x * blockDim.x;
  size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  for (; i + (U - 1) * stride < n; i += U * stride) {
    int4 v[U];
#pragma unroll
    for (int u = 0; u < U; ++u) v[u] = __ldcs(s + i + u * stride);
#pragma unroll
    for (int u = 0; u < U; ++u) __stcs(d + i + u * stride, v[u]);
  }
  for (; i < n; i += stride) d[i] = s[i];
}
template <int U>
__global__ void block_chunk(const int4* __restrict__ s, int4* __restrict__ d, size_t n) {
  // each block copies U*blockDim contiguous int4 per step
  size_t base = (size_t)blockIdx.x * blockDim.x * U;
  const size_t step = (size_t)gridDim.x * blockDim.x * U;
  for (; base < n; base += step) {
    int4 v[U];
#pragma unroll
    for (int u = 0; u < U; ++u) { size_t i = base + u * blockDim.x + threadIdx.x; if (i < n) v[u] = __ldcs(s + i); }
#pragma unroll
    for (int u = 0; u < U; ++u) { size_t i = base + u * blockDim.x + threadIdx.x; if (i < n) __stcs(d + i, v[u]); }
  }
}
__global__ void one_each(const int4* __restrict__ s, int4* __restrict__ d, size_t n) {
  size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) d[i] = s[i];
}
int main() {
  int sms; cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  for (size_t mib : {1024, 4096}) {
  size_t bytes = mib << 20, n = bytes / 16;
  void *s, *d; cudaMalloc(&s, bytes); cudaMalloc(&d, bytes); cudaMemset(s, 1, bytes); cudaMemset(d, 0, bytes);
  cudaEvent_t a, b; cudaEventCreate(&a); cudaEventCreate(&b);
  auto run = [&](const char* name, auto launch) {
    launch(); launch(); cudaDeviceSynchronize();
    float best = 1e9;
    for (int k = 0; k < 20; ++k) { cudaEventRecord(a); launch(); cudaEventRecord(b); cudaEventSynchronize(b); float ms; cudaEventElapsedTime(&ms, a, b); if (ms < best) best = ms; }
    printf("%5zu MiB %-34s %7.0f GB/s  (%s)\n", mib, name, 2.0 * bytes / (best * 1e-3) / 1e9, cudaGetErrorString(cudaGetLastError()));
  };
  auto S = (const int4*)s; auto D = (int4*)d;
  run("memcpyAsync D2D", [&] { cudaMemcpyAsync(d, s, bytes, cudaMemcpyDeviceToDevice); });
  run("grid_stride U4 sm*8x256 (current)", [&] { grid_stride<4><<<sms * 8, 256>>>(S, D, n); });
  run("grid_stride U4 sm*4x256", [&] { grid_stride<4><<<sms * 4, 256>>>(S, D, n); });
  run("grid_stride U8 sm*8x256", [&] { grid_stride<8><<<sms * 8, 256>>>(S, D, n); });
  run("grid_stride U2 sm*16x128", [&] { grid_stride<2><<<sms * 16, 128>>>(S, D, n); });
  run("grid_stride U1 sm*8x256", [&] { grid_stride<1><<<sms * 8, 256>>>(S, D, n); });
  run("block_chunk U4 sm*8x256", [&] { block_chunk<4><<<sms * 8, 256>>>(S, D, n); });
  run("block_chunk U8 sm*4x256", [&] { block_chunk<8><<<sms * 4, 256>>>(S, D, n); });
  run("block_chunk U4 n/1024 blocks", [&] { block_chunk<4><<<(n + 1023) / 1024, 256>>>(S, D, n); });
  run("one_each n/256 blocks", [&] { one_each<<<(n + 255) / 256, 256>>>(S, D, n); });
  cudaFree(s); cudaFree(d);
  }
}
