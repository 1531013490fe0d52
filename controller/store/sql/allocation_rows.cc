#include "controller/store/sql/allocation_rows.h"

#include <algorithm>
#include <functional>
#include <map>
#include <string>
#include <utility>

#include "controller/model/allocation_states.h"
#include "controller/store/sql/node_rows.h"
#include "controller/store/store_rules.h"

namespace kiln::allocation_rows {

using json = nlohmann::json;
using namespace store_rules;

const ClaimSql& claim_sql(db::Engine engine) {
  static const ClaimSql sqlite{
      .lock = "",
      .has_traits = "($3 = '[]' OR NOT EXISTS (SELECT 1 FROM json_each($3) wanted WHERE wanted.value NOT IN "
                    "(SELECT held.value FROM json_each(nodes.traits) held)))"};
  static const ClaimSql pg{.lock = " FOR NO KEY UPDATE", .has_traits = "($3 = '[]' OR traits::jsonb @> $3::jsonb)"};
  return engine == db::Engine::kSqlite ? sqlite : pg;
}

const char kQuotaAndUseSql[] =
    "SELECT (SELECT max_nodes FROM tenant_quotas WHERE tenant = $1 AND profile = $2 AND kind = $3), "
    "(SELECT count(*) FROM nodes WHERE tenant = $1 AND profile = $2 AND kind = $3)";

std::string claimable_nodes_sql(db::Engine engine, bool limited) {
  const ClaimSql& sql = claim_sql(engine);
  return node_rows::node_select() + " WHERE " + kClaimableNodeSql + " AND profile = $1 AND kind = $2 AND " +
         sql.has_traits + " AND id NOT IN (SELECT node_id FROM allocation_members WHERE allocation = $4)" +
         " ORDER BY created_at, id" + (limited ? " LIMIT $5" : "") + sql.lock;
}

const char kAllocationsNamedSql[] =
    "SELECT id, tenant, state = 'released', created_at FROM allocations WHERE name = $1 AND ($2 = '' OR tenant = $2)";

const std::string& in_flight_condition() {
  static const std::string condition = [] {
    std::string moving;
    for (AllocationState s : kAllAllocationStates)
      if (s != AllocationState::kReleased && s != AllocationState::kFailed)
        moving += (moving.empty() ? "'" : ", '") + std::string(to_string(s)) + "'";
    return "(state IN (" + moving + ") OR (state = 'failed' AND EXISTS (SELECT 1 FROM allocation_members m "
           "WHERE m.allocation = allocations.id AND m.status != 'left')))";
  }();
  return condition;
}

namespace {

// One allocations column: its name, how an Allocation's field is bound as the
// next parameter, and how it is read back from result column `c`. SELECTs
// read the columns in this order; INSERT and UPDATE bind them in this order
// ($1 is id, which the state's error names, so it is read first).
struct AllocationColumn {
  const char* name;
  void (*bind)(db::Binds& b, const Allocation& a);
  Status (*read)(const db::Rows& r, int c, Allocation& a);
};

using B = db::Binds;
using R = db::Rows;

const AllocationColumn kAllocationColumns[] = {
    {"id", [](B& b, const Allocation& a) { b.add(a.id); },
     [](const R& r, int c, Allocation& a) { a.id = r.text(c); return ok_status(); }},
    {"name", [](B& b, const Allocation& a) { b.add(a.name); },
     [](const R& r, int c, Allocation& a) { a.name = r.text(c); return ok_status(); }},
    {"tenant", [](B& b, const Allocation& a) { b.add(a.tenant); },
     [](const R& r, int c, Allocation& a) { a.tenant = r.text(c); return ok_status(); }},
    {"profile", [](B& b, const Allocation& a) { b.add(a.profile); },
     [](const R& r, int c, Allocation& a) { a.profile = r.text(c); return ok_status(); }},
    {"kind", [](B& b, const Allocation& a) { b.add(to_string(a.kind)); },
     [](const R& r, int c, Allocation& a) {
       return read_stored_enum(r.text(c), parse_node_kind, "allocation", a.id, "kind", a.kind);
     }},
    {"count", [](B& b, const Allocation& a) { b.add(a.count); },
     [](const R& r, int c, Allocation& a) { a.count = r.int64(c); return ok_status(); }},
    {"image", [](B& b, const Allocation& a) { b.add(a.image); },
     [](const R& r, int c, Allocation& a) { a.image = r.text(c); return ok_status(); }},
    {"ssh_keys", [](B& b, const Allocation& a) { b.add(json_text(json(a.ssh_keys))); },
     [](const R& r, int c, Allocation& a) {
       json keys;
       Status s = db::json_column_into(r, c, "allocations.ssh_keys", keys);
       if (s) a.ssh_keys = string_list(keys);
       return s;
     }},
    {"user_data", [](B& b, const Allocation& a) { b.add(a.user_data); },
     [](const R& r, int c, Allocation& a) { a.user_data = r.text(c); return ok_status(); }},
    {"traits", [](B& b, const Allocation& a) { b.add(json_text(json(a.traits))); },
     [](const R& r, int c, Allocation& a) {
       json traits;
       Status s = db::json_column_into(r, c, "allocations.traits", traits);
       if (s) a.traits = string_list(traits);
       return s;
     }},
    {"state", [](B& b, const Allocation& a) { b.add(to_string(a.state)); },
     [](const R& r, int c, Allocation& a) {
       return read_stored_enum(r.text(c), parse_allocation_state, "allocation", a.id, "state", a.state);
     }},
    {"last_error", [](B& b, const Allocation& a) { b.add(a.last_error); },
     [](const R& r, int c, Allocation& a) { a.last_error = r.text(c); return ok_status(); }},
    {"lease_seconds", [](B& b, const Allocation& a) { b.add(a.lease_seconds); },
     [](const R& r, int c, Allocation& a) { a.lease_seconds = r.int64(c); return ok_status(); }},
    {"expires_at", [](B& b, const Allocation& a) { b.add(a.expires_at); },
     [](const R& r, int c, Allocation& a) { a.expires_at = r.int64(c); return ok_status(); }},
    {"replacements", [](B& b, const Allocation& a) { b.add(a.replacements); },
     [](const R& r, int c, Allocation& a) { a.replacements = r.int64(c); return ok_status(); }},
    {"ready_at", [](B& b, const Allocation& a) { b.add(a.ready_at); },
     [](const R& r, int c, Allocation& a) { a.ready_at = r.int64(c); return ok_status(); }},
    {"history", [](B& b, const Allocation& a) { b.add(json_text(history_json(a.history))); },
     [](const R& r, int c, Allocation& a) {
       json history;
       Status s = db::json_column_into(r, c, "allocations.history", history);
       if (s) a.history = history_from_json(history);
       return s;
     }},
    {"created_at", [](B& b, const Allocation& a) { b.add(a.created_at); },
     [](const R& r, int c, Allocation& a) { a.created_at = r.int64(c); return ok_status(); }},
    {"updated_at", [](B& b, const Allocation& a) { b.add(a.updated_at); },
     [](const R& r, int c, Allocation& a) { a.updated_at = r.int64(c); return ok_status(); }},
    {"version", [](B& b, const Allocation& a) { b.add(a.version); },
     [](const R& r, int c, Allocation& a) { a.version = r.int64(c); return ok_status(); }},
};
constexpr int kAllocationColumnCount = sizeof(kAllocationColumns) / sizeof(kAllocationColumns[0]);

const std::vector<const char*>& column_names() {
  static const std::vector<const char*> names = [] {
    std::vector<const char*> v;
    for (const AllocationColumn& c : kAllocationColumns) v.push_back(c.name);
    return v;
  }();
  return names;
}

// The unique index on a live allocation's (tenant, name).
constexpr db::Constraint kLiveName{"allocations.tenant", "allocations_live_name"};

}  // namespace

Result<Allocation> read_allocation(const db::Rows& r) {
  Allocation a;
  for (int c = 0; c < kAllocationColumnCount; ++c) {
    if (Status s = kAllocationColumns[c].read(r, c, a); !s) return s.take_error();
  }
  return a;
}

Status write_allocation(db::Conn& c, const Allocation& a, bool insert) {
  static const std::string insert_row = insert_sql("allocations", column_names());
  static const std::string update_row = update_by_key_sql("allocations", column_names());
  db::Binds b;
  for (const AllocationColumn& col : kAllocationColumns) col.bind(b, a);
  Result<int64_t> w = c.exec(insert ? insert_row : update_row, b);
  if (w) return ok_status();
  Error e = w.take_error();
  if (c.dialect().violated(e, kLiveName)) return allocation_name_taken(a);
  return e;
}

std::string in_list(db::Binds& b, std::span<const std::string> values) {
  std::string in;
  for (const std::string& v : values) {
    in += (in.empty() ? "$" : ", $") + std::to_string(b.next());
    b.add(v);
  }
  return in;
}

Status in_batches(const std::vector<std::string>& values,
                  const std::function<Status(std::span<const std::string>)>& per_batch) {
  for (std::size_t from = 0; from < values.size(); from += kMembersPerQuery) {
    std::span<const std::string> batch(values.data() + from, std::min(kMembersPerQuery, values.size() - from));
    if (Status s = per_batch(batch); !s) return s;
  }
  return ok_status();
}

Result<std::vector<Node>> select_member_nodes(db::Conn& c, std::span<const Allocation> all) {
  std::vector<std::string> ids;
  for (const Allocation& a : all)
    for (const AllocationMember& m : a.members)
      if (m.status != MemberStatus::kLeft) ids.push_back(m.node_id);
  std::vector<Node> out;
  Status read = in_batches(ids, [&](std::span<const std::string> batch) -> Status {
    db::Binds b;
    std::string in = in_list(b, batch);
    Result<db::Rows> r = c.query(node_rows::node_select() + " WHERE id IN (" + in + ")", b);
    if (!r) return r.take_error();
    Result<std::vector<Node>> nodes = node_rows::read_nodes(*r);
    if (!nodes) return nodes.take_error();
    for (Node& n : *nodes) out.push_back(std::move(n));
    return ok_status();
  });
  if (!read) return read.take_error();
  return out;
}

Status load_members(db::Conn& c, std::span<Allocation> all) {
  for (std::size_t from = 0; from < all.size(); from += kMembersPerQuery) {
    const std::span<Allocation> batch = all.subspan(from, std::min(kMembersPerQuery, all.size() - from));
    std::map<std::string, Allocation*, std::less<>> by_id;
    std::vector<std::string> ids;
    for (Allocation& a : batch) {
      a.members.clear();
      by_id.emplace(a.id, &a);
      ids.push_back(a.id);
    }
    db::Binds b;
    const std::string in = in_list(b, ids);
    Result<db::Rows> r = c.query(
        "SELECT allocation, node_id, status, reason, joined_at, left_at FROM allocation_members WHERE allocation IN (" +
            in + ") ORDER BY allocation, joined_at, ord",
        b);
    if (!r) return r.take_error();
    Status walked = db::each_row(*r, [&](const db::Rows& row) -> Status {
      auto owner = by_id.find(row.text(0));
      if (owner == by_id.end()) return ok_status();
      AllocationMember m;
      m.node_id = row.text(1);
      if (Status st = read_stored_enum(row.text(2), parse_member_status, "member", m.node_id, "status", m.status); !st)
        return st;
      m.reason = row.text(3);
      m.joined_at = row.int64(4);
      m.left_at = row.int64(5);
      owner->second->members.push_back(std::move(m));
      return ok_status();
    });
    if (!walked) return walked;
  }
  return ok_status();
}

Status load_members(db::Conn& c, Allocation& a) { return load_members(c, std::span<Allocation>(&a, 1)); }

Result<std::vector<Allocation>> select_allocations(db::Conn& c, const std::string& tail, const db::Binds& binds) {
  static const std::string select = "SELECT " + column_list(column_names()) + " FROM allocations";
  Result<db::Rows> r = c.query(select + tail, binds);
  if (!r) return r.take_error();
  Result<std::vector<Allocation>> all = db::collect<Allocation>(*r, read_allocation);
  if (!all) return all;
  if (Status m = load_members(c, std::span<Allocation>(*all)); !m) return m.take_error();
  return all;
}

Result<Allocation> lock_allocation(db::Conn& c, std::string_view id) {
  Result<std::vector<Allocation>> r =
      select_allocations(c, std::string(" WHERE id = $1") + claim_sql(c).lock, db::Binds().add(id));
  if (!r) return r.take_error();
  if (r->empty()) return allocation_not_found(id);
  return std::move(r->front());
}

Status lock_tenant(db::Conn& c, std::string_view tenant) {
  const std::string_view lock = claim_sql(c).lock;
  if (lock.empty()) return ok_status();
  Result<db::Rows> r = c.query("SELECT 1 FROM tenants WHERE name = $1" + std::string(lock), db::Binds().add(tenant));
  if (!r) return r.take_error();
  return ok_status();
}

Status lock_tenant_of(db::Conn& c, std::string_view id) {
  if (std::string_view(claim_sql(c).lock).empty()) return ok_status();
  Result<std::vector<std::string>> owner = [&]() -> Result<std::vector<std::string>> {
    Result<db::Rows> r = c.query("SELECT tenant FROM allocations WHERE id = $1", db::Binds().add(id));
    if (!r) return r.take_error();
    return db::collect<std::string>(*r, [](const db::Rows& row) { return row.text(0); });
  }();
  if (!owner) return owner.take_error();
  if (owner->empty()) return ok_status();
  return lock_tenant(c, owner->front());
}

}  // namespace kiln::allocation_rows
