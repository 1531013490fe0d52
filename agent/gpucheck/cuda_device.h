#pragma once
// Small CUDA runtime helpers shared by the checks: device discovery and
// turning cudaError_t into the words an operator reads in a report.

#include <cstddef>
#include <string>

#include <cuda_runtime_api.h>

namespace kiln::gpucheck {

struct DeviceCount {
  int count = 0;
  std::string error;   // why count is 0 when CUDA itself failed ("CUDA driver version is insufficient...")
};

// cudaGetDeviceCount; a runtime error (no driver, no device) is count 0 plus its words.
DeviceCount cuda_device_count();

// "cudaMalloc: out of memory (2)".
std::string cuda_error(const char* call, cudaError_t e);

struct DeviceInfo {
  std::string name;
  std::string pci_bus_id;   // "0000:1B:00.0"
  int sm_count = 0;
  std::size_t memory_bytes = 0;
};

DeviceInfo device_info(int device);

// Owns one pair of CUDA events on the current device for timing a stream.
class EventTimer {
 public:
  EventTimer();
  ~EventTimer();
  EventTimer(const EventTimer&) = delete;
  EventTimer& operator=(const EventTimer&) = delete;

  cudaError_t error() const { return error_; }
  cudaError_t start(cudaStream_t s) { return cudaEventRecord(start_, s); }
  cudaError_t stop(cudaStream_t s) { return cudaEventRecord(stop_, s); }
  // Waits for the stop event; milliseconds between the two, or -1 on error.
  float elapsed_ms();

 private:
  cudaEvent_t start_ = nullptr, stop_ = nullptr;
  cudaError_t error_ = cudaSuccess;
};

// RAII owners; each is created and destroyed with its device current.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() { if (p_) cudaFree(p_); }
  cudaError_t allocate(std::size_t bytes) { return cudaMalloc(&p_, bytes); }
  void* get() const { return p_; }

 private:
  void* p_ = nullptr;
};

class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
  ~PinnedBuffer() { if (p_) cudaFreeHost(p_); }
  cudaError_t allocate(std::size_t bytes) { return cudaHostAlloc(&p_, bytes, cudaHostAllocPortable); }
  void* get() const { return p_; }

 private:
  void* p_ = nullptr;
};

class Stream {
 public:
  Stream() = default;
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  ~Stream() { if (s_) cudaStreamDestroy(s_); }
  cudaError_t create() { return cudaStreamCreateWithFlags(&s_, cudaStreamNonBlocking); }
  cudaStream_t get() const { return s_; }

 private:
  cudaStream_t s_ = nullptr;
};

}  // namespace kiln::gpucheck
