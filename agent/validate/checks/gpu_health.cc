#include "agent/validate/checks/gpu_health.h"

#include <algorithm>

#include "agent/validate/checks/kernel_log.h"

namespace kiln::agent {

CheckResult check_gpu_health(const ValidationProfile& profile, const Result<NvmlSnapshot>& nvml,
                             const Result<std::string>& kernel_log) {
  CheckResult r;
  r.name = "gpu_health";
  r.unit = "problems";
  r.threshold = {{"max", 0}};
  r.status = CheckStatus::kPass;
  if (profile.gpu_count == 0) {
    r = check_skip("gpu_health", "profile expects no GPU");
    r.unit = "problems";
    return r;
  }
  int problems = 0;
  auto problem = [&](const std::string& why) {
    ++problems;
    add_failure(r, why);
  };

  // XIDs first: they are readable even when the driver is not.
  nlohmann::json xids = nlohmann::json::array();
  if (kernel_log) {
    for (const auto& x : parse_xid_events(*kernel_log)) {
      const bool ignored = std::find(profile.xid_ignore.begin(), profile.xid_ignore.end(), x.code) !=
                           profile.xid_ignore.end();
      xids.push_back({{"pci", x.pci}, {"xid", x.code}, {"meaning", xid_meaning(x.code)},
                      {"message", x.message}, {"ignored", ignored}});
      if (!ignored) {
        std::string m = xid_meaning(x.code);
        problem("XID " + std::to_string(x.code) + " on PCI " + x.pci + (m.empty() ? "" : " (" + m + ")"));
      }
    }
  } else {
    add_warning(r, kernel_log.error().message);
  }
  r.details["xid_events"] = xids;

  if (!nvml) {
    problem("NVML unavailable, GPU health unknown: " + nvml.error().message);
    r.value = problems;
    return r;
  }
  if (nvml->devices.empty()) {
    problem("expected " + std::to_string(profile.gpu_count) + " GPUs, found 0");
    r.value = problems;
    return r;
  }
  nlohmann::json gpus = nlohmann::json::array();
  for (const auto& g : nvml->devices) {
    const std::string id = "GPU" + std::to_string(g.index);
    nlohmann::json j = {{"index", g.index}, {"pci_bus_id", g.pci_bus_id}};
    if (g.ecc) {
      j["ecc"] = {{"volatile_corrected", g.ecc->volatile_corrected},
                  {"volatile_uncorrected", g.ecc->volatile_uncorrected},
                  {"aggregate_corrected", g.ecc->aggregate_corrected},
                  {"aggregate_uncorrected", g.ecc->aggregate_uncorrected}};
      if (g.ecc->volatile_uncorrected > 0)
        problem(id + ": " + std::to_string(g.ecc->volatile_uncorrected) + " uncorrected ECC errors since boot");
      else if (g.ecc->aggregate_uncorrected > 0)
        add_warning(r, id + ": " + std::to_string(g.ecc->aggregate_uncorrected) +
                           " uncorrected ECC errors over its lifetime");
    }
    if (g.remapped_rows) {
      j["remapped_rows"] = {{"correctable", g.remapped_rows->correctable},
                            {"uncorrectable", g.remapped_rows->uncorrectable},
                            {"pending", g.remapped_rows->pending},
                            {"failure", g.remapped_rows->failure}};
      if (g.remapped_rows->failure) problem(id + ": row remapping failed (the GPU needs replacing)");
      if (g.remapped_rows->pending) problem(id + ": row remapping pending (needs a GPU reset)");
    }
    if (g.retired_pages) {
      j["retired_pages"] = {{"single_bit", g.retired_pages->single_bit},
                            {"double_bit", g.retired_pages->double_bit},
                            {"pending", g.retired_pages->pending}};
      if (g.retired_pages->pending) problem(id + ": page retirement pending (needs a GPU reset)");
    }
    if (g.throttle_reasons) {
      j["throttle_reasons"] = throttle_reason_names(*g.throttle_reasons);
      if (throttle_is_harmful(*g.throttle_reasons)) {
        std::string names;
        for (const auto& n : throttle_reason_names(*g.throttle_reasons)) names += (names.empty() ? "" : ", ") + n;
        problem(id + ": clocks slowed (" + names + ")");
      }
    }
    if (!g.unsupported.empty()) j["not_supported"] = g.unsupported;
    gpus.push_back(std::move(j));
  }
  r.details["gpus"] = gpus;
  r.value = problems;
  return r;
}

}  // namespace kiln::agent
