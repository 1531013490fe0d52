#include "bench/soak/usage_audit.h"

#include <algorithm>
#include <map>
#include <vector>

#include "bench/soak/api_values.h"
#include "common/clock.h"

namespace kiln::soak {

namespace {

// A time field: ms since the epoch, 0 for null or malformed.
int64_t ms(const nlohmann::json& v) { return parse_rfc3339(str(v)).value_or(0); }

std::string when(int64_t t) { return t == 0 ? std::string("never") : format_rfc3339(t); }

struct Row {
  int64_t start = 0, end = 0, seconds = 0;
};

// What one allocation's history says about billing.
struct Periods {
  std::vector<int64_t> ready;     // entries into ready
  std::vector<int64_t> giveback;  // entries into failed or releasing
  bool replacement_refused = false;
};

Periods periods_of(const nlohmann::json& a) {
  Periods p;
  for (const nlohmann::json& h : a.value("history", nlohmann::json::array())) {
    const std::string to = str(h.value("to", nlohmann::json()));
    if (to == "ready") p.ready.push_back(ms(h["at"]));
    if (to == "failed" || to == "releasing") p.giveback.push_back(ms(h["at"]));
    if (str(h.value("reason", nlohmann::json())).find("no replacement") != std::string::npos)
      p.replacement_refused = true;
  }
  return p;
}

void audit_member(Findings& f, const nlohmann::json& a, const Periods& p, const nlohmann::json& m,
                  const std::vector<Row>& rows) {
  const std::string aid = str(a["id"]);
  const std::string node = str(m["id"]);
  const int64_t joined = ms(m.value("joined_at", nlohmann::json()));
  const int64_t left = ms(m.value("left_at", nlohmann::json()));
  const std::string where = "allocation " + aid + " (" + str(a["name"]) + ") member " + node;
  int64_t first_ready = 0;
  for (int64_t r : p.ready)
    if (r >= joined && (left == 0 || r <= left)) {
      first_ready = r;
      break;
    }
  f.checked(invariant::kUsageEqualsMeteredLifetime);
  if (first_ready == 0) {
    if (!rows.empty())
      f.broken(invariant::kUsageEqualsMeteredLifetime,
               where + " is billed (" + std::to_string(rows.size()) + " rows, the first from " + when(rows[0].start) +
                   ") though the allocation never became ready while it was a member (joined " + when(joined) +
                   ", left " + when(left) + ")");
    return;
  }
  if (rows.size() != 1) {
    f.broken(invariant::kUsageEqualsMeteredLifetime,
             where + " has " + std::to_string(rows.size()) + " usage rows; it served from the ready entry at " +
                 when(first_ready) + " (joined " + when(joined) + ", left " + when(left) + ") and needs exactly one");
    return;
  }
  const Row& row = rows[0];
  if (row.start != first_ready)
    f.broken(invariant::kUsageEqualsMeteredLifetime,
             where + ": the row starts at " + when(row.start) + ", the allocation became ready at " +
                 when(first_ready));
  if (row.end == 0) {
    f.broken(invariant::kUsageEqualsMeteredLifetime, where + ": the row is still open after the release");
    return;
  }
  const bool at_giveback = std::find(p.giveback.begin(), p.giveback.end(), row.end) != p.giveback.end();
  const int64_t first_giveback = p.giveback.empty() ? INT64_MAX : *std::min_element(p.giveback.begin(), p.giveback.end());
  const bool replaced = str(m.value("reason", nlohmann::json())).rfind("replaced", 0) == 0 || p.replacement_refused;
  const bool at_replacement = replaced && left != 0 && row.end >= row.start && row.end <= left && row.end <= first_giveback;
  if (!at_giveback && !at_replacement) {
    std::string g;
    for (int64_t t : p.giveback) g += (g.empty() ? "" : ", ") + when(t);
    f.broken(invariant::kUsageEqualsMeteredLifetime,
             where + ": the row ends at " + when(row.end) + ", which is neither a give-back entry (" +
                 (g.empty() ? std::string("none") : g) + ") nor a replacement before it left at " + when(left) +
                 " (reason: " + str(m.value("reason", nlohmann::json())) + ")");
  }
  if (row.seconds != (row.end - row.start) / 1000)
    f.broken(invariant::kUsageEqualsMeteredLifetime,
             where + ": the row bills " + std::to_string(row.seconds) + " s for " + when(row.start) + " to " +
                 when(row.end) + ", which is " + std::to_string((row.end - row.start) / 1000) + " whole seconds");
}

}  // namespace

nlohmann::json audit_usage_documents(const nlohmann::json& allocations, const nlohmann::json& usage, Findings& f) {
  // allocation -> node -> its rows
  std::map<std::string, std::map<std::string, std::vector<Row>>> rows;
  int64_t row_count = 0, billed = 0;
  for (const nlohmann::json& r : usage.value("usage", nlohmann::json::array())) {
    Row row{ms(r["started_at"]), ms(r.value("ended_at", nlohmann::json())), r.value("seconds", int64_t{-1})};
    rows[str(r["allocation"])][str(r["node"])].push_back(row);
    ++row_count;
    billed += row.seconds;
  }
  const nlohmann::json totals = usage.value("totals", nlohmann::json::object()).value("allocations", nlohmann::json::object());
  int64_t members = 0, count = 0;
  for (const nlohmann::json& a : allocations.value("allocations", nlohmann::json::array())) {
    ++count;
    const std::string aid = str(a["id"]);
    const Periods p = periods_of(a);
    auto& mine = rows[aid];
    int64_t sum = 0;
    for (const auto& [node, list] : mine)
      for (const Row& r : list) sum += r.seconds;
    std::vector<nlohmann::json> all = a.value("nodes", nlohmann::json::array());
    for (const nlohmann::json& m : a.value("former_nodes", nlohmann::json::array())) all.push_back(m);
    for (const nlohmann::json& m : all) {
      ++members;
      const std::string node = str(m["id"]);
      auto it = mine.find(node);
      audit_member(f, a, p, m, it == mine.end() ? std::vector<Row>() : it->second);
      if (it != mine.end()) mine.erase(it);
    }
    for (const auto& [node, list] : mine)
      f.broken(invariant::kUsageEqualsMeteredLifetime, "allocation " + aid + " bills node " + node + " (" +
                                                            std::to_string(list.size()) +
                                                            " rows) which never was its member");
    const int64_t total = totals.contains(aid) ? totals[aid].value("seconds", int64_t{-1}) : 0;
    if (total != sum)
      f.broken(invariant::kUsageEqualsMeteredLifetime, "allocation " + aid + "'s total is " + std::to_string(total) +
                                                            " s, its rows add up to " + std::to_string(sum) + " s");
    rows.erase(aid);
  }
  for (const auto& [aid, nodes] : rows)
    f.broken(invariant::kUsageEqualsMeteredLifetime,
             "the ledger bills allocation " + aid + " (" + std::to_string(nodes.size()) + " nodes) which is not listed");
  return {{"allocations", count}, {"members", members}, {"rows", row_count}, {"billed_seconds", billed}};
}

nlohmann::json audit_usage(ApiClient& api, Findings& f, const std::string& admin_token) {
  Reply allocations = api.get("/v1/allocations", admin_token);
  Reply usage = api.get("/v1/usage", admin_token);
  if (!allocations.reached || allocations.status != 200 || !usage.reached || usage.status != 200 ||
      !allocations.body.is_object() || !usage.body.is_object()) {
    f.broken(invariant::kUsageEqualsMeteredLifetime,
             "the allocations (" + std::to_string(allocations.status) + ") or the ledger (" +
                 std::to_string(usage.status) + ") could not be read at the end: " + usage.text.substr(0, 300));
    return nullptr;
  }
  return audit_usage_documents(allocations.body, usage.body, f);
}

}  // namespace kiln::soak
