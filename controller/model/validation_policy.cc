#include <algorithm>

#include "controller/model/validation.h"

namespace kiln {

namespace {

using nlohmann::json;

bool contains(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

std::string check_reason(const json& c) {
  const json& d = c.contains("details") ? c["details"] : json();
  if (d.is_string()) return d.get<std::string>();
  if (d.is_object() && d.contains("reason") && d["reason"].is_string()) return d["reason"].get<std::string>();
  if (c.contains("value") && c["value"].is_number() && c.contains("threshold") && c["threshold"].is_object()) {
    const json& t = c["threshold"];
    std::string unit = c.value("unit", "");
    std::string v = c["value"].dump();
    if (t.contains("min")) return v + " " + unit + " below the floor " + t["min"].dump() + " " + unit;
    if (t.contains("max")) return v + " " + unit + " above the limit " + t["max"].dump() + " " + unit;
  }
  return "failed";
}

}  // namespace

std::vector<std::string> plan_checks(const json& profile_doc, ValidationPlan plan) {
  std::vector<std::string> out;
  if (!profile_doc.is_object() || !profile_doc.contains("plans") || !profile_doc["plans"].is_object()) return out;
  const json& plans = profile_doc["plans"];
  const std::string key(to_string(plan));
  if (!plans.contains(key) || !plans[key].is_array()) return out;
  for (const json& n : plans[key])
    if (n.is_string()) out.push_back(n.get<std::string>());
  return out;
}

const std::vector<std::string>& known_check_names() {
  static const std::vector<std::string> names = {
      "gpu_inventory", "gpu_health", "pcie_links",     "gpudirect_rdma", "jitter",          "nvme_read",  "nvlink",
      "hbm_bandwidth", "pcie_bandwidth", "nccl_allreduce", "gemm", "nvidia_smi_topo", "dcgm_diag", "nccl_tests",
      "ib_write_bw", "gpudirect_rdma_latency", "nccl_latency", "gds_read", "nccl_multinode"};
  return names;
}

const std::vector<std::string>& numeric_check_names() {
  static const std::vector<std::string> names = {"hbm_bandwidth", "pcie_bandwidth", "nccl_allreduce", "nccl_tests",
                                                 "nvme_read",     "jitter",         "ib_write_bw",    "nccl_multinode",
                                                 "gemm", "gpudirect_rdma_latency", "nccl_latency", "gds_read"};
  return names;
}

const std::vector<HeadlineCheck>& headline_checks() {
  static const std::vector<HeadlineCheck> checks = {
      {"nccl_allreduce", "GB/s", true}, {"hbm_bandwidth", "GB/s", true}, {"pcie_bandwidth", "GB/s", true},
      {"jitter", "us", false},          {"nvme_read", "GB/s", true},      {"nccl_multinode", "GB/s", true}};
  return checks;
}

bool is_numeric_miss(const json& c) {
  if (!c.is_object() || c.value("status", "") != "fail") return false;
  if (!contains(numeric_check_names(), c.value("name", ""))) return false;
  if (!c.contains("value") || !c["value"].is_number()) return false;  // measured nothing: hard
  if (!c.contains("threshold") || !c["threshold"].is_object()) return false;
  const double v = c["value"].get<double>();
  const json& t = c["threshold"];
  // Only a miss of the headline threshold counts; a check that failed for
  // another reason (fewer devices, a stall over jitter's max_gap) is hard
  // unless its headline number also missed.
  if (t.contains("min") && t["min"].is_number()) return v < t["min"].get<double>();
  if (t.contains("max") && t["max"].is_number()) return v > t["max"].get<double>();
  return false;
}

GateDecision judge_report(const json& report, const json& profile_doc, ValidationPlan which, int attempt) {
  const std::string plan(to_string(which));
  GateDecision d;
  const std::string head = "validation (" + plan + ", attempt " + std::to_string(attempt) + ") failed: ";
  if (!report.is_object() || !report.contains("checks") || !report["checks"].is_array()) {
    d.failing.push_back("report: not a validation report (no checks array)");
    d.reason = head + d.failing.front();
    return d;
  }
  // The profile's list, or every check when it has none (empty).
  const std::vector<std::string> gating = plan_checks(profile_doc, which);
  bool all_numeric = true;
  for (const json& c : report["checks"]) {
    if (!c.is_object() || c.value("status", "") != "fail") continue;
    const std::string name = c.value("name", "?");
    if (!gating.empty() && !contains(gating, name)) continue;
    d.failing.push_back(name + ": " + check_reason(c));
    if (!is_numeric_miss(c)) all_numeric = false;
  }
  // A report that says "fail" without a failing check is not trusted.
  if (d.failing.empty() && report.value("result", "") != "pass" && gating.empty()) {
    d.failing.push_back("report: result is \"" + report.value("result", "") + "\" but no check failed");
    all_numeric = false;
  }
  if (d.failing.empty()) {
    d.verdict = GateVerdict::kPass;
    return d;
  }
  d.numeric_only = all_numeric;
  d.verdict = all_numeric && attempt < 2 ? GateVerdict::kRetry : GateVerdict::kQuarantine;
  std::string list;
  for (const std::string& f : d.failing) list += (list.empty() ? "" : "; ") + f;
  d.reason = head + list;
  if (d.verdict == GateVerdict::kQuarantine)
    d.reason += all_numeric ? " (numeric miss on the retry)" : " (not a numeric miss: not retried)";
  return d;
}

void add_check_to_report(json& report, const json& check) {
  if (!report.is_object()) return;
  if (!report.contains("checks") || !report["checks"].is_array()) report["checks"] = json::array();
  report["checks"].push_back(check);
  const std::string status = check.value("status", "");
  if (status != "pass" && status != "fail" && status != "skip") return;
  if (!report.contains("summary") || !report["summary"].is_object()) report["summary"] = json::object();
  json& count = report["summary"][status];
  count = (count.is_number_integer() ? count.get<int>() : 0) + 1;
  if (status == "fail") report["result"] = "fail";
}

json headline_value(const json& report, const std::string& name) {
  if (!report.is_object() || !report.contains("checks") || !report["checks"].is_array()) return nullptr;
  for (const json& c : report["checks"]) {
    if (!c.is_object() || c.value("name", "") != name) continue;
    if (c.value("status", "") != "pass") return nullptr;
    if (c.contains("value") && c["value"].is_number()) return c["value"];
    return nullptr;
  }
  return nullptr;
}

}  // namespace kiln
