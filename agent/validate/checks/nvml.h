#pragma once
// A snapshot of what NVML knows about the node's GPUs, read through
// libnvidia-ml loaded at run time with dlopen(): the agent has no link-time
// dependency on the driver, so it starts (and reports "found 0") on a machine
// without one. kiln-gpucheck reads the same snapshot for its NVLink check.
//
// NVML has no header in the CUDA toolkit we build with, so nvml.cc declares the
// few entry points it calls with their documented C signatures; every symbol
// is looked up by name and a missing one (an old driver) is recorded as
// "not supported", never fatal.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/result.h"

namespace kiln::agent {

struct GpuEcc {
  std::uint64_t volatile_corrected = 0;
  std::uint64_t volatile_uncorrected = 0;
  std::uint64_t aggregate_corrected = 0;
  std::uint64_t aggregate_uncorrected = 0;
};

struct GpuRemappedRows {
  unsigned correctable = 0;
  unsigned uncorrectable = 0;
  bool pending = false;
  bool failure = false;
};

struct GpuRetiredPages {
  unsigned single_bit = 0;
  unsigned double_bit = 0;
  bool pending = false;
};

struct GpuDeviceInfo {
  unsigned index = 0;
  std::string name;             // "NVIDIA H100 80GB HBM3"
  std::string uuid;
  std::string pci_bus_id;       // "00000000:1B:00.0"
  std::uint64_t memory_total_bytes = 0;
  std::optional<GpuEcc> ecc;                     // nullopt: ECC off or not supported
  std::optional<GpuRemappedRows> remapped_rows;  // Ampere and later
  std::optional<GpuRetiredPages> retired_pages;  // pre-Ampere
  std::optional<std::uint64_t> throttle_reasons; // nvmlClocksEventReason bit mask
  std::optional<int> nvlink_up;                  // links reported active (of 18 possible)
  std::vector<std::string> unsupported;          // queries the driver refused, with its words
};

struct NvmlSnapshot {
  std::string driver_version;  // "550.54.15"
  std::string cuda_version;    // "12.4": the highest CUDA the driver supports
  std::vector<GpuDeviceInfo> devices;
};

// Loads `library` (normally "libnvidia-ml.so.1"), initialises NVML, reads
// every device and shuts NVML down again. Blocking (NVML may take seconds on
// a node with persistence mode off). Errors: kUnavailable when the library
// cannot be loaded or nvmlInit fails (no driver, driver/library mismatch),
// with dlerror()'s or NVML's words in the message.
Result<NvmlSnapshot> read_nvml(const std::string& library);

// Live readings of one GPU under load (a sampler thread during a measurement).
// A field the driver refuses stays empty.
struct GpuLiveSample {
  std::optional<unsigned> sm_clock_mhz;
  std::optional<double> power_w;
  std::optional<std::uint64_t> throttle_reasons;  // nvmlClocksEventReason bit mask
};

// An NVML session held open for repeated cheap reads of a few GPUs, where
// read_nvml() would initialise NVML and read every device each time.
// kiln-gpucheck's gemm check samples clocks, power and clock-event reasons
// through it every ~100 ms while the GPUs compute.
class NvmlLiveReader {
 public:
  // Loads `library`, initialises NVML and opens each GPU by its PCI bus id as
  // CUDA prints it ("0000:1B:00.0"; NVML accepts that form), so the readings
  // follow CUDA's device numbering whatever the enumeration order. Blocking.
  // Errors: kUnavailable as read_nvml(); kNotFound naming a bus id NVML does
  // not know.
  static Result<std::unique_ptr<NvmlLiveReader>> open(const std::string& library,
                                                      const std::vector<std::string>& pci_bus_ids);
  ~NvmlLiveReader();
  NvmlLiveReader(const NvmlLiveReader&) = delete;
  NvmlLiveReader& operator=(const NvmlLiveReader&) = delete;

  // One reading per bus id given to open(), in that order. Safe to call from
  // any one thread at a time while other threads use the GPUs (NVML is
  // thread-safe; the reader holds no state between calls).
  std::vector<GpuLiveSample> sample() const;

 private:
  struct Impl;
  explicit NvmlLiveReader(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Names of the bits set in an NVML clocks-event (throttle) reason mask, and
// whether any of them means the GPU is being slowed by a fault or a limit
// (hardware slowdown, thermal, power brake) rather than idling.
std::vector<std::string> throttle_reason_names(std::uint64_t mask);
bool throttle_is_harmful(std::uint64_t mask);

}  // namespace kiln::agent
