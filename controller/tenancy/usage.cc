#include "controller/tenancy/usage.h"

#include <algorithm>
#include <cmath>

#include "common/clock.h"

namespace kiln {

using json = nlohmann::json;

int64_t price_micros_per_second(const json& profile_doc, const std::string& kind) {
  if (!profile_doc.is_object()) return 0;
  auto price = profile_doc.find("price");
  if (price == profile_doc.end() || !price->is_object()) return 0;
  auto v = price->find(kind + "_per_second");
  if (v == price->end() || !v->is_number()) return 0;
  double micros = v->get<double>() * 1e6;
  if (!std::isfinite(micros) || micros <= 0) return 0;
  return static_cast<int64_t>(std::llround(std::min(micros, 1e15)));
}

int64_t billed_seconds(const UsageRecord& row, int64_t from_ms, int64_t to_ms, int64_t now_ms) {
  int64_t start = std::max(row.started_at, from_ms);
  int64_t end = row.ended_at.value_or(now_ms);
  if (to_ms > 0) end = std::min(end, to_ms);
  if (end <= start) return 0;
  return (end - start) / 1000;
}

json usage_document(const std::vector<UsageRecord>& rows, int64_t from_ms, int64_t to_ms, int64_t now_ms) {
  json list = json::array();
  json per_allocation = json::object();
  int64_t total_seconds = 0;
  int64_t total_cost = 0;
  for (const UsageRecord& r : rows) {
    int64_t seconds = billed_seconds(r, from_ms, to_ms, now_ms);
    int64_t cost = seconds * r.price_micros_per_second;
    list.push_back({{"allocation", r.allocation},
                    {"node", r.node_id},
                    {"tenant", r.tenant},
                    {"profile", r.profile},
                    {"kind", r.kind},
                    {"started_at", format_rfc3339(r.started_at)},
                    {"ended_at", r.ended_at ? json(format_rfc3339(*r.ended_at)) : json(nullptr)},
                    {"seconds", seconds},
                    {"price_micros_per_second", r.price_micros_per_second},
                    {"cost_micros", cost}});
    json& a = per_allocation[r.allocation];
    if (!a.is_object()) a = {{"seconds", 0}, {"cost_micros", 0}};
    a["seconds"] = a["seconds"].get<int64_t>() + seconds;
    a["cost_micros"] = a["cost_micros"].get<int64_t>() + cost;
    total_seconds += seconds;
    total_cost += cost;
  }
  return {{"usage", list},
          {"totals", {{"seconds", total_seconds}, {"cost_micros", total_cost}, {"allocations", per_allocation}}}};
}

}  // namespace kiln
