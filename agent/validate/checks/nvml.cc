#include "agent/validate/checks/nvml.h"

#include <dlfcn.h>

#include <cstdio>
#include <cstring>
#include <utility>

namespace kiln::agent {

namespace {

// The NVML C ABI subset we use (nvml.h, NVML API version 12).
using nvmlReturn_t = int;
using nvmlDevice_t = struct NvmlDeviceOpaque*;
constexpr nvmlReturn_t kNvmlSuccess = 0;
constexpr int kNvmlMemoryErrorCorrected = 0, kNvmlMemoryErrorUncorrected = 1;
constexpr int kNvmlVolatileEcc = 0, kNvmlAggregateEcc = 1;
constexpr int kNvmlRetireSingleBit = 0, kNvmlRetireDoubleBit = 1;
constexpr unsigned kNvmlMaxNvLinks = 18;

struct NvmlMemory {
  unsigned long long total, free, used;
};
struct NvmlPciInfo {
  char bus_id_legacy[16];
  unsigned domain, bus, device, pci_device_id, pci_subsystem_id;
  char bus_id[32];
};

using InitFn = nvmlReturn_t (*)();
using ShutdownFn = nvmlReturn_t (*)();
using ErrorStringFn = const char* (*)(nvmlReturn_t);
using GetCountFn = nvmlReturn_t (*)(unsigned*);
using GetHandleFn = nvmlReturn_t (*)(unsigned, nvmlDevice_t*);
using GetStringFn = nvmlReturn_t (*)(nvmlDevice_t, char*, unsigned);
using SysStringFn = nvmlReturn_t (*)(char*, unsigned);
using SysIntFn = nvmlReturn_t (*)(int*);
using MemoryFn = nvmlReturn_t (*)(nvmlDevice_t, NvmlMemory*);
using PciFn = nvmlReturn_t (*)(nvmlDevice_t, NvmlPciInfo*);
using EccFn = nvmlReturn_t (*)(nvmlDevice_t, int, int, unsigned long long*);
using RemapFn = nvmlReturn_t (*)(nvmlDevice_t, unsigned*, unsigned*, unsigned*, unsigned*);
using RetiredFn = nvmlReturn_t (*)(nvmlDevice_t, int, unsigned*, unsigned long long*);
using EnableStateFn = nvmlReturn_t (*)(nvmlDevice_t, int*);
using ReasonsFn = nvmlReturn_t (*)(nvmlDevice_t, unsigned long long*);
using LinkStateFn = nvmlReturn_t (*)(nvmlDevice_t, unsigned, int*);
using HandleByBusIdFn = nvmlReturn_t (*)(const char*, nvmlDevice_t*);
using ClockInfoFn = nvmlReturn_t (*)(nvmlDevice_t, int, unsigned*);
using PowerUsageFn = nvmlReturn_t (*)(nvmlDevice_t, unsigned*);
constexpr int kNvmlClockSm = 1;  // NVML_CLOCK_SM

// Owns the dlopen handle and the NVML session; closes both in reverse order.
class NvmlSession {
 public:
  ~NvmlSession() {
    if (initialised_ && shutdown_) shutdown_();
    if (handle_) dlclose(handle_);
  }

  Status open(const std::string& library) {
    handle_ = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle_) {
      const char* why = dlerror();
      return Error(Code::kUnavailable, "cannot load " + library + ": " + (why ? why : "unknown error"));
    }
    auto init = sym<InitFn>("nvmlInit_v2");
    shutdown_ = sym<ShutdownFn>("nvmlShutdown");
    error_string_ = sym<ErrorStringFn>("nvmlErrorString");
    if (!init || !shutdown_) return Error(Code::kUnavailable, library + " has no nvmlInit_v2/nvmlShutdown");
    if (nvmlReturn_t rc = init(); rc != kNvmlSuccess)
      return Error(Code::kUnavailable, "nvmlInit failed: " + describe(rc));
    initialised_ = true;
    return ok_status();
  }

  template <typename Fn>
  Fn sym(const char* name) const {
    return reinterpret_cast<Fn>(dlsym(handle_, name));
  }

  std::string describe(nvmlReturn_t rc) const {
    const char* s = error_string_ ? error_string_(rc) : nullptr;
    return std::string(s ? s : "NVML error") + " (" + std::to_string(rc) + ")";
  }

 private:
  void* handle_ = nullptr;
  bool initialised_ = false;
  ShutdownFn shutdown_ = nullptr;
  ErrorStringFn error_string_ = nullptr;
};

void read_device(const NvmlSession& s, nvmlDevice_t dev, GpuDeviceInfo& info) {
  auto refused = [&](const char* what, nvmlReturn_t rc) {
    info.unsupported.push_back(std::string(what) + ": " + s.describe(rc));
  };
  char buf[128] = {};
  if (auto f = s.sym<GetStringFn>("nvmlDeviceGetName")) {
    if (nvmlReturn_t rc = f(dev, buf, sizeof buf); rc == kNvmlSuccess) info.name = buf;
    else refused("name", rc);
  }
  if (auto f = s.sym<GetStringFn>("nvmlDeviceGetUUID")) {
    buf[0] = '\0';
    if (f(dev, buf, sizeof buf) == kNvmlSuccess) info.uuid = buf;
  }
  if (auto f = s.sym<PciFn>("nvmlDeviceGetPciInfo_v3")) {
    NvmlPciInfo pci{};
    if (f(dev, &pci) == kNvmlSuccess) info.pci_bus_id.assign(pci.bus_id, strnlen(pci.bus_id, sizeof pci.bus_id));
  }
  if (auto f = s.sym<MemoryFn>("nvmlDeviceGetMemoryInfo")) {
    NvmlMemory m{};
    if (nvmlReturn_t rc = f(dev, &m); rc == kNvmlSuccess) info.memory_total_bytes = m.total;
    else refused("memory", rc);
  }
  if (auto f = s.sym<EccFn>("nvmlDeviceGetTotalEccErrors")) {
    GpuEcc ecc;
    unsigned long long v = 0;
    nvmlReturn_t rc = f(dev, kNvmlMemoryErrorUncorrected, kNvmlVolatileEcc, &v);
    if (rc == kNvmlSuccess) {
      ecc.volatile_uncorrected = v;
      if (f(dev, kNvmlMemoryErrorCorrected, kNvmlVolatileEcc, &v) == kNvmlSuccess) ecc.volatile_corrected = v;
      if (f(dev, kNvmlMemoryErrorUncorrected, kNvmlAggregateEcc, &v) == kNvmlSuccess) ecc.aggregate_uncorrected = v;
      if (f(dev, kNvmlMemoryErrorCorrected, kNvmlAggregateEcc, &v) == kNvmlSuccess) ecc.aggregate_corrected = v;
      info.ecc = ecc;
    } else {
      refused("ecc", rc);
    }
  }
  if (auto f = s.sym<RemapFn>("nvmlDeviceGetRemappedRows")) {
    unsigned corr = 0, unc = 0, pending = 0, failure = 0;
    if (nvmlReturn_t rc = f(dev, &corr, &unc, &pending, &failure); rc == kNvmlSuccess)
      info.remapped_rows = GpuRemappedRows{corr, unc, pending != 0, failure != 0};
    else
      refused("remapped_rows", rc);
  }
  if (auto f = s.sym<RetiredFn>("nvmlDeviceGetRetiredPages")) {
    unsigned sbe = 0, dbe = 0;
    nvmlReturn_t rc = f(dev, kNvmlRetireSingleBit, &sbe, nullptr);
    if (rc == kNvmlSuccess && f(dev, kNvmlRetireDoubleBit, &dbe, nullptr) == kNvmlSuccess) {
      GpuRetiredPages pages{sbe, dbe, false};
      int pending = 0;
      if (auto p = s.sym<EnableStateFn>("nvmlDeviceGetRetiredPagesPendingStatus");
          p && p(dev, &pending) == kNvmlSuccess)
        pages.pending = pending != 0;
      info.retired_pages = pages;
    } else if (rc != kNvmlSuccess) {
      refused("retired_pages", rc);
    }
  }
  // Renamed in NVML 12 ("clocks event reasons"); the old name remains as an alias.
  auto reasons = s.sym<ReasonsFn>("nvmlDeviceGetCurrentClocksEventReasons");
  if (!reasons) reasons = s.sym<ReasonsFn>("nvmlDeviceGetCurrentClocksThrottleReasons");
  if (reasons) {
    unsigned long long mask = 0;
    if (nvmlReturn_t rc = reasons(dev, &mask); rc == kNvmlSuccess) info.throttle_reasons = mask;
    else refused("throttle_reasons", rc);
  }
  if (auto f = s.sym<LinkStateFn>("nvmlDeviceGetNvLinkState")) {
    int up = 0;
    bool any_answer = false;
    for (unsigned link = 0; link < kNvmlMaxNvLinks; ++link) {
      int active = 0;
      if (f(dev, link, &active) == kNvmlSuccess) {
        any_answer = true;
        if (active) ++up;
      }
    }
    info.nvlink_up = any_answer ? up : 0;
  }
}

}  // namespace

Result<NvmlSnapshot> read_nvml(const std::string& library) {
  NvmlSession s;
  if (auto st = s.open(library); !st) return st.take_error();
  NvmlSnapshot snap;
  char buf[96] = {};
  if (auto f = s.sym<SysStringFn>("nvmlSystemGetDriverVersion"); f && f(buf, sizeof buf) == kNvmlSuccess)
    snap.driver_version = buf;
  int cuda = 0;
  auto cuda_fn = s.sym<SysIntFn>("nvmlSystemGetCudaDriverVersion_v2");
  if (!cuda_fn) cuda_fn = s.sym<SysIntFn>("nvmlSystemGetCudaDriverVersion");
  if (cuda_fn && cuda_fn(&cuda) == kNvmlSuccess && cuda > 0)
    snap.cuda_version = std::to_string(cuda / 1000) + "." + std::to_string((cuda % 1000) / 10);
  auto count_fn = s.sym<GetCountFn>("nvmlDeviceGetCount_v2");
  auto handle_fn = s.sym<GetHandleFn>("nvmlDeviceGetHandleByIndex_v2");
  if (!count_fn || !handle_fn) return Error(Code::kUnavailable, "NVML library lacks nvmlDeviceGetCount_v2");
  unsigned count = 0;
  if (nvmlReturn_t rc = count_fn(&count); rc != kNvmlSuccess)
    return Error(Code::kUnavailable, "nvmlDeviceGetCount failed: " + s.describe(rc));
  for (unsigned i = 0; i < count; ++i) {
    GpuDeviceInfo info;
    info.index = i;
    nvmlDevice_t dev = nullptr;
    if (nvmlReturn_t rc = handle_fn(i, &dev); rc != kNvmlSuccess) {
      // A GPU NVML enumerates but cannot open (fallen off the bus) stays in
      // the list so the count matches and the reason is visible.
      info.unsupported.push_back("handle: " + s.describe(rc));
      snap.devices.push_back(std::move(info));
      continue;
    }
    read_device(s, dev, info);
    snap.devices.push_back(std::move(info));
  }
  return snap;
}

struct NvmlLiveReader::Impl {
  NvmlSession session;
  std::vector<nvmlDevice_t> devices;
  ClockInfoFn clock = nullptr;
  PowerUsageFn power = nullptr;
  ReasonsFn reasons = nullptr;
};

NvmlLiveReader::NvmlLiveReader(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
NvmlLiveReader::~NvmlLiveReader() = default;

Result<std::unique_ptr<NvmlLiveReader>> NvmlLiveReader::open(const std::string& library,
                                                             const std::vector<std::string>& pci_bus_ids) {
  auto impl = std::make_unique<Impl>();
  if (auto st = impl->session.open(library); !st) return st.take_error();
  auto by_bus = impl->session.sym<HandleByBusIdFn>("nvmlDeviceGetHandleByPciBusId_v2");
  if (!by_bus) return Error(Code::kUnavailable, library + " has no nvmlDeviceGetHandleByPciBusId_v2");
  for (const auto& bus : pci_bus_ids) {
    nvmlDevice_t dev = nullptr;
    if (nvmlReturn_t rc = by_bus(bus.c_str(), &dev); rc != kNvmlSuccess)
      return Error(Code::kNotFound, "NVML has no GPU at " + bus + ": " + impl->session.describe(rc));
    impl->devices.push_back(dev);
  }
  impl->clock = impl->session.sym<ClockInfoFn>("nvmlDeviceGetClockInfo");
  impl->power = impl->session.sym<PowerUsageFn>("nvmlDeviceGetPowerUsage");
  impl->reasons = impl->session.sym<ReasonsFn>("nvmlDeviceGetCurrentClocksEventReasons");
  if (!impl->reasons) impl->reasons = impl->session.sym<ReasonsFn>("nvmlDeviceGetCurrentClocksThrottleReasons");
  return std::unique_ptr<NvmlLiveReader>(new NvmlLiveReader(std::move(impl)));
}

std::vector<GpuLiveSample> NvmlLiveReader::sample() const {
  std::vector<GpuLiveSample> out(impl_->devices.size());
  for (std::size_t i = 0; i < impl_->devices.size(); ++i) {
    nvmlDevice_t dev = impl_->devices[i];
    unsigned v = 0;
    if (impl_->clock && impl_->clock(dev, kNvmlClockSm, &v) == kNvmlSuccess) out[i].sm_clock_mhz = v;
    if (impl_->power && impl_->power(dev, &v) == kNvmlSuccess) out[i].power_w = v / 1000.0;  // milliwatts
    unsigned long long mask = 0;
    if (impl_->reasons && impl_->reasons(dev, &mask) == kNvmlSuccess) out[i].throttle_reasons = mask;
  }
  return out;
}

namespace {

struct ReasonBit {
  std::uint64_t bit;
  const char* name;
  bool harmful;
};

// nvmlClocksEventReason* bits.
constexpr ReasonBit kReasons[] = {
    {0x1, "gpu_idle", false},
    {0x2, "applications_clocks_setting", false},
    {0x4, "sw_power_cap", false},
    {0x8, "hw_slowdown", true},
    {0x10, "sync_boost", false},
    {0x20, "sw_thermal_slowdown", true},
    {0x40, "hw_thermal_slowdown", true},
    {0x80, "hw_power_brake_slowdown", true},
    {0x100, "display_clock_setting", false},
};

}  // namespace

std::vector<std::string> throttle_reason_names(std::uint64_t mask) {
  std::vector<std::string> names;
  std::uint64_t known = 0;
  for (const auto& r : kReasons) {
    known |= r.bit;
    if (mask & r.bit) names.emplace_back(r.name);
  }
  if (mask & ~known) names.push_back("unknown_0x" + [&] {
    char b[32];
    std::snprintf(b, sizeof b, "%llx", static_cast<unsigned long long>(mask & ~known));
    return std::string(b);
  }());
  return names;
}

bool throttle_is_harmful(std::uint64_t mask) {
  for (const auto& r : kReasons)
    if (r.harmful && (mask & r.bit)) return true;
  return false;
}

}  // namespace kiln::agent
