#include "agent/gpucheck/cuda_device.h"

namespace kiln::gpucheck {

DeviceCount cuda_device_count() {
  DeviceCount d;
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    d.error = cuda_error("cudaGetDeviceCount", e);
    return d;
  }
  d.count = n;
  return d;
}

std::string cuda_error(const char* call, cudaError_t e) {
  return std::string(call) + ": " + cudaGetErrorString(e) + " (" + std::to_string(static_cast<int>(e)) + ")";
}

DeviceInfo device_info(int device) {
  DeviceInfo info;
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, device) == cudaSuccess) {
    info.name = prop.name;
    info.sm_count = prop.multiProcessorCount;
    info.memory_bytes = prop.totalGlobalMem;
  }
  char bus[32] = {};
  if (cudaDeviceGetPCIBusId(bus, sizeof bus, device) == cudaSuccess) info.pci_bus_id = bus;
  return info;
}

EventTimer::EventTimer() {
  error_ = cudaEventCreate(&start_);
  if (error_ == cudaSuccess) error_ = cudaEventCreate(&stop_);
}

EventTimer::~EventTimer() {
  if (start_) cudaEventDestroy(start_);
  if (stop_) cudaEventDestroy(stop_);
}

float EventTimer::elapsed_ms() {
  if (cudaEventSynchronize(stop_) != cudaSuccess) return -1;
  float ms = 0;
  if (cudaEventElapsedTime(&ms, start_, stop_) != cudaSuccess) return -1;
  return ms;
}

}  // namespace kiln::gpucheck
