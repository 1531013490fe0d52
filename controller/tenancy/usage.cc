#include "controller/tenancy/usage.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <utility>

#include "common/clock.h"

namespace kiln {

using json = nlohmann::json;

namespace {

std::string row_name(const UsageRecord& r) { return "usage of allocation " + r.allocation + " on node " + r.node_id; }

// The 422 of a window whose figures do not fit: a shorter window bills less.
Error too_large(const std::string& what) {
  const std::string hint = "ask for a shorter window";
  return Error(Code::kUnprocessable, what + " does not fit in 64-bit micro-units; " + hint,
               {FieldError{"from", hint}, FieldError{"to", hint}});
}

// a += b, or false when the sum does not fit.
bool add_to(int64_t& a, int64_t b) { return !__builtin_add_overflow(a, b, &a); }

}  // namespace

const json* listed_price_per_second(const json& profile_doc, NodeKind kind) {
  if (!profile_doc.is_object()) return nullptr;
  auto price = profile_doc.find("price");
  if (price == profile_doc.end() || !price->is_object()) return nullptr;
  auto v = price->find(std::string(to_string(kind)) + "_per_second");
  if (v == price->end() || !v->is_number()) return nullptr;
  return &*v;
}

int64_t price_micros_per_second(const json& profile_doc, NodeKind kind) {
  const json* v = listed_price_per_second(profile_doc, kind);
  if (!v) return 0;
  double micros = v->get<double>() * 1e6;
  if (!std::isfinite(micros) || micros <= 0) return 0;
  return static_cast<int64_t>(std::llround(std::min(micros, static_cast<double>(kMaxPriceMicrosPerSecond))));
}

Result<int64_t> billed_seconds(const UsageRecord& row, int64_t from_ms, int64_t to_ms, int64_t now_ms) {
  int64_t start = std::max(row.started_at, from_ms);
  int64_t end = row.ended_at.value_or(now_ms);
  if (to_ms > 0) end = std::min(end, to_ms);
  if (end <= start) return int64_t{0};
  int64_t ms = 0;
  if (__builtin_sub_overflow(end, start, &ms) || ms / 1000 > kMaxMeteredSeconds)
    return Error(Code::kUnprocessable, row_name(row) + " spans more than " + std::to_string(kMaxMeteredSeconds) +
                                           " seconds: its times are corrupt");
  return ms / 1000;
}

Result<int64_t> row_cost_micros(const UsageRecord& row, int64_t seconds) {
  int64_t cost = 0;
  if (__builtin_mul_overflow(seconds, row.price_micros_per_second, &cost))
    return too_large("the cost of " + row_name(row) + " (" + std::to_string(seconds) + " s at " +
                     std::to_string(row.price_micros_per_second) + " micros/s)");
  return cost;
}

Result<json> usage_document(const std::vector<UsageRecord>& rows, int64_t from_ms, int64_t to_ms, int64_t now_ms) {
  json list = json::array();
  // Per allocation as plain integers, written to JSON once they are final.
  std::map<std::string, std::pair<int64_t, int64_t>> per_allocation;
  int64_t total_seconds = 0;
  int64_t total_cost = 0;
  for (const UsageRecord& r : rows) {
    Result<int64_t> seconds = billed_seconds(r, from_ms, to_ms, now_ms);
    if (!seconds) return seconds.take_error();
    Result<int64_t> cost = row_cost_micros(r, *seconds);
    if (!cost) return cost.take_error();
    list.push_back({{"allocation", r.allocation},
                    {"node", r.node_id},
                    {"tenant", r.tenant},
                    {"profile", r.profile},
                    {"kind", to_string(r.kind)},
                    {"started_at", format_rfc3339(r.started_at)},
                    {"ended_at", r.ended_at ? json(format_rfc3339(*r.ended_at)) : json(nullptr)},
                    {"seconds", *seconds},
                    {"price_micros_per_second", r.price_micros_per_second},
                    {"cost_micros", *cost}});
    auto& [a_seconds, a_cost] = per_allocation[r.allocation];
    if (!add_to(a_seconds, *seconds) || !add_to(total_seconds, *seconds))
      return too_large("the seconds billed in this window");
    if (!add_to(a_cost, *cost)) return too_large("the cost of allocation " + r.allocation + " in this window");
    if (!add_to(total_cost, *cost)) return too_large("the total cost of this window");
  }
  json by_allocation = json::object();
  for (const auto& [id, sums] : per_allocation)
    by_allocation[id] = {{"seconds", sums.first}, {"cost_micros", sums.second}};
  return json{{"usage", list},
              {"totals", {{"seconds", total_seconds}, {"cost_micros", total_cost}, {"allocations", by_allocation}}}};
}

}  // namespace kiln
