#pragma once
// jitter: how long can the OS (or the hypervisor) take a CPU away from a
// busy thread? A thread pinned to one CPU reads steady_clock in a tight loop
// for the profile's duration; every gap between consecutive reads is put in a
// histogram (0.1 us buckets to 100 us, 10 us buckets to 100 ms). On bare metal
// with an idle core the p99.9 gap is well under a microsecond; timer ticks,
// SMIs, noisy neighbours and vCPU preemption show as long gaps.
//
//   value   p99.9 gap in us; threshold {"max": jitter_p999_us_max} (plus
//           "max_gap" when jitter_max_us_max is set)
//   status  pass/fail against those; pass when no threshold is set
//   details p50/p99/p99.9/p99.99/max us, samples, stall counts, the CPU used,
//           and "hypervisor": {"cpuid_bit", "cpuid_vendor", "sys_vendor",
//           "product_name", "detected"}

#include <string>

#include "agent/validate/checks/check_result.h"
#include "agent/validate/checks/profile.h"

namespace kiln::agent {

struct HypervisorInfo {
  bool cpuid_bit = false;      // CPUID leaf 1 ECX bit 31
  std::string cpuid_vendor;    // leaf 0x40000000 signature ("KVMKVMKVM", "Microsoft Hv")
  std::string sys_vendor;      // <sys>/class/dmi/id/sys_vendor
  std::string product_name;    // <sys>/class/dmi/id/product_name
  bool detected = false;       // the cpuid bit, or a DMI name of a known hypervisor
  nlohmann::json to_json() const;
};

HypervisorInfo detect_hypervisor(const std::string& sys_root);

// Blocks the calling thread for the profile's jitter duration (pinned to
// profile.jitter_cpu, or to the CPU it is on; the previous affinity is
// restored afterwards).
CheckResult check_jitter(const ValidationProfile& profile, const std::string& sys_root);

}  // namespace kiln::agent
