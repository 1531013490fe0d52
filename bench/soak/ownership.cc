#include "bench/soak/ownership.h"

namespace kiln::soak {

Ownership::Ownership(Findings& findings, std::map<std::string, int64_t> quotas)
    : findings_(findings), quotas_(std::move(quotas)) {}

std::string Ownership::tenant_of_name(const std::string& name) {
  const auto dash = name.find('-');
  return dash == std::string::npos ? std::string() : name.substr(0, dash);
}

void Ownership::on_event(const Event& e) {
  processed_ = e.seq;
  const std::string allocation = e.text("allocation");
  if (allocation.empty()) return;
  std::string& tenant = allocation_tenant_[allocation];
  if (tenant.empty()) tenant = tenant_of_name(e.text("allocation_name"));
  if (e.type == "node.claimed") on_claimed(e, tenant);
  else if (e.type == "node.released") on_released(e, tenant);
}

void Ownership::on_claimed(const Event& e, const std::string& tenant) {
  std::vector<Interval>& held = intervals_[e.node];
  if (!held.empty() && held.back().to_seq == INT64_MAX) {
    findings_.broken(invariant::kTenantIsolation,
                     "node " + e.node + " claimed for " + tenant + " (allocation " + e.text("allocation") +
                         ", seq " + std::to_string(e.seq) + ") while allocation " + held.back().allocation + " of " +
                         held.back().tenant + " holds it");
    held.back().to_seq = e.seq - 1;
    --count_[held.back().tenant];
  }
  held.push_back({tenant, e.text("allocation"), e.seq, INT64_MAX});
  const int64_t n = ++count_[tenant];
  peaks_[tenant] = std::max(peaks_[tenant], n);
  auto q = quotas_.find(tenant);
  const int64_t quota = q == quotas_.end() ? 0 : q->second;
  if (n > quota)
    findings_.broken(invariant::kQuotaNeverExceeded,
                     tenant + " holds " + std::to_string(n) + " nodes after claiming " + e.node + " at seq " +
                         std::to_string(e.seq) + " (allocation " + e.text("allocation") + "); its quota is " +
                         std::to_string(quota));
  findings_.checked(invariant::kQuotaNeverExceeded);
}

void Ownership::on_released(const Event& e, const std::string& tenant) {
  auto it = intervals_.find(e.node);
  if (it == intervals_.end() || it->second.empty() || it->second.back().to_seq != INT64_MAX) {
    findings_.broken(invariant::kTenantIsolation, "node " + e.node + " released by allocation " +
                                                      e.text("allocation") + " at seq " + std::to_string(e.seq) +
                                                      " though no allocation held it");
    return;
  }
  Interval& last = it->second.back();
  if (last.allocation != e.text("allocation"))
    findings_.broken(invariant::kTenantIsolation, "node " + e.node + " released by allocation " +
                                                      e.text("allocation") + " (" + tenant + ") at seq " +
                                                      std::to_string(e.seq) + " while allocation " + last.allocation +
                                                      " (" + last.tenant + ") holds it");
  last.to_seq = e.seq;
  --count_[last.tenant];
  findings_.checked(invariant::kTenantIsolation);
}

std::string Ownership::owner_at(const std::string& node, int64_t seq) const {
  auto it = intervals_.find(node);
  if (it == intervals_.end()) return {};
  for (auto i = it->second.rbegin(); i != it->second.rend(); ++i) {
    if (i->from_seq <= seq && seq <= i->to_seq) return i->tenant;
    if (i->to_seq < seq) break;
  }
  return {};
}

std::string Ownership::holder(const std::string& node) const {
  auto it = intervals_.find(node);
  if (it == intervals_.end() || it->second.empty() || it->second.back().to_seq != INT64_MAX) return {};
  return it->second.back().tenant;
}

std::string Ownership::allocation_tenant(const std::string& id) const {
  auto it = allocation_tenant_.find(id);
  return it == allocation_tenant_.end() ? std::string() : it->second;
}

std::map<std::string, std::vector<std::string>> Ownership::held() const {
  std::map<std::string, std::vector<std::string>> out;
  for (const auto& [node, list] : intervals_)
    if (!list.empty() && list.back().to_seq == INT64_MAX) out[list.back().tenant].push_back(node);
  return out;
}

}  // namespace kiln::soak
