#include "agent/validate/checks/jitter.h"

#include <sched.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <vector>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

#include "agent/validate/checks/sysfs.h"

namespace kiln::agent {

namespace {

// Gap histogram: 1000 buckets of 100 ns up to 100 us, then 9990 of 10 us up
// to 100 ms, then one overflow bucket (the exact max is kept separately).
class GapHistogram {
 public:
  GapHistogram() : counts_(kFine + kCoarse + 1, 0) {}

  void add(std::uint64_t ns) {
    ++total_;
    max_ = std::max(max_, ns);
    if (ns < 100'000) ++counts_[ns / 100];
    else if (ns < 100'000'000) ++counts_[kFine + (ns - 100'000) / 10'000];
    else ++counts_.back();
  }

  // Upper edge of the bucket holding quantile q, in us (never above max).
  double quantile_us(double q) const {
    if (total_ == 0) return 0;
    const auto rank = static_cast<std::uint64_t>(q * static_cast<double>(total_ - 1)) + 1;
    std::uint64_t seen = 0;
    for (std::size_t i = 0; i < counts_.size(); ++i) {
      seen += counts_[i];
      if (seen >= rank) return std::min(upper_edge_ns(i), static_cast<double>(max_)) / 1000.0;
    }
    return max_us();
  }

  std::uint64_t count_above_ns(std::uint64_t ns) const {
    std::uint64_t n = 0;
    for (std::size_t i = 0; i < counts_.size(); ++i)
      if (lower_edge_ns(i) >= static_cast<double>(ns)) n += counts_[i];
    return n;
  }

  double max_us() const { return static_cast<double>(max_) / 1000.0; }
  std::uint64_t total() const { return total_; }

 private:
  static constexpr std::size_t kFine = 1000, kCoarse = 9990;
  static double lower_edge_ns(std::size_t i) {
    if (i < kFine) return static_cast<double>(i) * 100;
    if (i < kFine + kCoarse) return 100'000.0 + static_cast<double>(i - kFine) * 10'000;
    return 100'000'000.0;
  }
  double upper_edge_ns(std::size_t i) const {
    if (i < kFine) return static_cast<double>(i + 1) * 100;
    if (i < kFine + kCoarse) return 100'000.0 + static_cast<double>(i - kFine + 1) * 10'000;
    return static_cast<double>(max_);
  }

  std::vector<std::uint64_t> counts_;
  std::uint64_t total_ = 0;
  std::uint64_t max_ = 0;
};

bool known_hypervisor_name(const std::string& s) {
  static const char* const kNames[] = {"QEMU", "KVM", "VMware", "Microsoft Corporation", "Xen", "innotek",
                                       "VirtualBox", "Amazon EC2", "Google Compute Engine", "OpenStack",
                                       "Bochs", "Parallels", "BHYVE", "Cloud Hypervisor", "Firecracker"};
  for (const char* n : kNames)
    if (s.find(n) != std::string::npos) return true;
  return false;
}

}  // namespace

nlohmann::json HypervisorInfo::to_json() const {
  return {{"cpuid_bit", cpuid_bit}, {"cpuid_vendor", cpuid_vendor}, {"sys_vendor", sys_vendor},
          {"product_name", product_name}, {"detected", detected}};
}

HypervisorInfo detect_hypervisor(const std::string& sys_root) {
  HypervisorInfo h;
#if defined(__x86_64__) || defined(__i386__)
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (__get_cpuid(1, &a, &b, &c, &d)) h.cpuid_bit = (c >> 31) & 1u;
  if (h.cpuid_bit) {
    __cpuid(0x40000000, a, b, c, d);
    char sig[13] = {};
    std::memcpy(sig, &b, 4);
    std::memcpy(sig + 4, &c, 4);
    std::memcpy(sig + 8, &d, 4);
    h.cpuid_vendor = sig;
    while (!h.cpuid_vendor.empty() && (h.cpuid_vendor.back() == '\0' || h.cpuid_vendor.back() == ' '))
      h.cpuid_vendor.pop_back();
  }
#endif
  const std::filesystem::path dmi = std::filesystem::path(sys_root) / "class/dmi/id";
  h.sys_vendor = read_first_line(dmi / "sys_vendor").value_or("");
  h.product_name = read_first_line(dmi / "product_name").value_or("");
  h.detected = h.cpuid_bit || known_hypervisor_name(h.sys_vendor) || known_hypervisor_name(h.product_name);
  return h;
}

CheckResult check_jitter(const ValidationProfile& profile, const std::string& sys_root) {
  using Clock = std::chrono::steady_clock;
  CheckResult r;
  r.name = "jitter";
  r.unit = "us";
  r.status = CheckStatus::kPass;

  cpu_set_t previous;
  CPU_ZERO(&previous);
  const bool have_previous = sched_getaffinity(0, sizeof previous, &previous) == 0;
  const int cpu = profile.jitter_cpu >= 0 ? profile.jitter_cpu : sched_getcpu();
  bool pinned = false;
  if (cpu >= 0 && cpu < CPU_SETSIZE) {
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    pinned = sched_setaffinity(0, sizeof one, &one) == 0;
  }

  GapHistogram hist;
  const auto duration = std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double>(profile.jitter_duration_s));
  const auto start = Clock::now();
  const auto end = start + duration;
  auto prev = start;
  while (true) {
    const auto now = Clock::now();
    hist.add(static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(now - prev).count()));
    prev = now;
    if (now >= end) break;
  }
  const double elapsed = std::chrono::duration<double>(prev - start).count();
  if (have_previous) sched_setaffinity(0, sizeof previous, &previous);

  const double p999 = hist.quantile_us(0.999);
  r.value = p999;
  r.details = {{"cpu", cpu},
               {"pinned", pinned},
               {"duration_s", elapsed},
               {"samples", hist.total()},
               {"p50_us", hist.quantile_us(0.5)},
               {"p99_us", hist.quantile_us(0.99)},
               {"p99_9_us", p999},
               {"p99_99_us", hist.quantile_us(0.9999)},
               {"max_us", hist.max_us()},
               {"stalls", {{"over_10us", hist.count_above_ns(10'000)},
                           {"over_100us", hist.count_above_ns(100'000)},
                           {"over_1ms", hist.count_above_ns(1'000'000)}}},
               {"hypervisor", detect_hypervisor(sys_root).to_json()}};
  if (!pinned) add_warning(r, "could not pin the measuring thread to CPU " + std::to_string(cpu));
  r.threshold = nullptr;
  if (profile.jitter_p999_us_max) {
    r.threshold = {{"max", *profile.jitter_p999_us_max}};
    if (p999 > *profile.jitter_p999_us_max) {
      char buf[128];
      std::snprintf(buf, sizeof buf, "p99.9 scheduling gap %.1f us exceeds %.1f us", p999, *profile.jitter_p999_us_max);
      add_failure(r, buf);
    }
  }
  if (profile.jitter_max_us_max) {
    if (r.threshold.is_null()) r.threshold = nlohmann::json::object();
    r.threshold["max_gap"] = *profile.jitter_max_us_max;
    if (hist.max_us() > *profile.jitter_max_us_max) {
      char buf[128];
      std::snprintf(buf, sizeof buf, "longest scheduling gap %.1f us exceeds %.1f us", hist.max_us(),
                    *profile.jitter_max_us_max);
      add_failure(r, buf);
    }
  }
  return r;
}

}  // namespace kiln::agent
