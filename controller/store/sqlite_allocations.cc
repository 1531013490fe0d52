#include "controller/store/sqlite_store.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "common/ids.h"
#include "controller/model/allocation_states.h"
#include "controller/model/event_types.h"
#include "controller/store/sql/host_rows.h"
#include "controller/store/sql/sqlite_conn.h"
#include "controller/store/sqlite_locks.h"
#include "controller/store/sqlite_node_rows.h"
#include "controller/store/sqlite_rows.h"

namespace kiln {

using json = nlohmann::json;
using namespace store_rows;
using namespace store_rules;

// SqliteStore: allocations, members and the usage ledger (AllocationStore).

namespace {

using St = sql::Statement;

constexpr const char kAllocationColumns[] =
    "id, name, tenant, profile, kind, count, image, ssh_keys, user_data, traits, state, last_error, "
    "lease_seconds, expires_at, replacements, ready_at, history, created_at, updated_at, version";

void bind_allocation(St& s, const Allocation& a) {
  s.bind(1, a.id).bind(2, a.name).bind(3, a.tenant).bind(4, a.profile).bind(5, a.kind).bind(6, a.count)
      .bind(7, a.image).bind(8, json_text(json(a.ssh_keys))).bind(9, a.user_data)
      .bind(10, json_text(json(a.traits))).bind(11, to_string(a.state)).bind(12, a.last_error)
      .bind(13, a.lease_seconds).bind(14, a.expires_at).bind(15, a.replacements).bind(16, a.ready_at)
      .bind(17, json_text(history_json(a.history))).bind(18, a.created_at).bind(19, a.updated_at)
      .bind(20, a.version);
}

Result<Allocation> read_allocation(const St& s) {
  Allocation a;
  a.id = s.column_text(0);
  a.name = s.column_text(1);
  a.tenant = s.column_text(2);
  a.profile = s.column_text(3);
  a.kind = s.column_text(4);
  a.count = s.column_int64(5);
  a.image = s.column_text(6);
  Result<json> keys = parse_json_column(s, 7, "allocations.ssh_keys");
  if (!keys) return keys.take_error();
  a.ssh_keys = string_list(*keys);
  a.user_data = s.column_text(8);
  Result<json> traits = parse_json_column(s, 9, "allocations.traits");
  if (!traits) return traits.take_error();
  a.traits = string_list(*traits);
  std::string state = s.column_text(10);
  std::optional<AllocationState> st = parse_allocation_state(state);
  if (!st) return unknown_allocation_state(a.id, state);
  a.state = *st;
  a.last_error = s.column_text(11);
  a.lease_seconds = s.column_int64(12);
  a.expires_at = s.column_int64(13);
  a.replacements = s.column_int64(14);
  a.ready_at = s.column_int64(15);
  Result<json> history = parse_json_column(s, 16, "allocations.history");
  if (!history) return history.take_error();
  a.history = history_from_json(*history);
  a.created_at = s.column_int64(17);
  a.updated_at = s.column_int64(18);
  a.version = s.column_int64(19);
  return a;
}

Status load_members(sql::Database& db, Allocation& a) {
  Result<sql::StatementRef> st = db.prepare(
      "SELECT node_id, status, reason, joined_at, left_at FROM allocation_members WHERE allocation = ?1 "
      "ORDER BY joined_at, rowid");
  if (!st) return st.take_error();
  (*st)->bind(1, a.id);
  Result<std::vector<AllocationMember>> m = collect<AllocationMember>(**st, [](const St& s) -> Result<AllocationMember> {
    AllocationMember out;
    out.node_id = s.column_text(0);
    std::string status = s.column_text(1);
    std::optional<MemberStatus> ms = parse_member_status(status);
    if (!ms) return unknown_member_status(out.node_id, status);
    out.status = *ms;
    out.reason = s.column_text(2);
    out.joined_at = s.column_int64(3);
    out.left_at = s.column_int64(4);
    return out;
  });
  if (!m) return m.take_error();
  a.members = std::move(*m);
  return ok_status();
}

Result<std::vector<Allocation>> select_allocations(sql::Database& db, const std::string& where,
                                                   const std::function<void(St&)>& bind) {
  Result<sql::StatementRef> st =
      db.prepare(std::string("SELECT ") + kAllocationColumns + " FROM allocations" + where);
  if (!st) return st.take_error();
  if (bind) bind(**st);
  Result<std::vector<Allocation>> all = collect<Allocation>(**st, read_allocation);
  if (!all) return all;
  for (Allocation& a : *all)
    if (Status m = load_members(db, a); !m) return m.take_error();
  return all;
}

Result<Allocation> select_allocation(sql::Database& db, std::string_view id) {
  std::string key(id);
  Result<std::vector<Allocation>> r =
      select_allocations(db, " WHERE id = ?1", [&](St& s) { s.bind(1, key); });
  if (!r) return r.take_error();
  if (r->empty()) return allocation_not_found(id);
  return std::move(r->front());
}

Status write_allocation(sql::Database& db, const Allocation& a, bool insert) {
  std::string sql;
  if (insert) {
    sql = std::string("INSERT INTO allocations (") + kAllocationColumns +
          ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20)";
  } else {
    sql = "UPDATE allocations SET name = ?2, tenant = ?3, profile = ?4, kind = ?5, count = ?6, image = ?7, "
          "ssh_keys = ?8, user_data = ?9, traits = ?10, state = ?11, last_error = ?12, lease_seconds = ?13, "
          "expires_at = ?14, replacements = ?15, ready_at = ?16, history = ?17, created_at = ?18, "
          "updated_at = ?19, version = ?20 WHERE id = ?1";
  }
  Result<sql::StatementRef> st = db.prepare(sql);
  if (!st) return st.take_error();
  bind_allocation(**st, a);
  if (Status s = (*st)->run(); !s) {
    Error e = s.take_error();
    if (e.code == Code::kConflict && mentions(e, "allocations.tenant"))
      return allocation_name_taken(a);
    return e;
  }
  return ok_status();
}

// The claimable nodes of the allocation's profile and kind with all its
// traits, oldest first (so the pool drains in a stable order); up to `want`.
Result<std::vector<Node>> claimable_nodes(sql::Database& db, const Allocation& a, int64_t want) {
  Result<std::vector<Node>> all = select_node_rows(
      db, std::string(kClaimableNodeSql) + " AND profile = ?1 AND kind = ?2 ORDER BY created_at, id",
      [&](St& s) { s.bind(1, a.profile).bind(2, a.kind); });
  if (!all) return all;
  std::vector<Node> out;
  for (Node& n : *all) {
    if (static_cast<int64_t>(out.size()) >= want) break;
    if (has_traits(n, a.traits)) out.push_back(std::move(n));
  }
  return out;
}

// Books `n`'s guest on a host unless it has one (sql/host_rows.h).
Status book_guest(sql::Database& db, const Node& n, const VirtualNodeMaker& vms, int64_t now) {
  db::SqliteConn conn(db);
  return host_rows::book_guest(conn, n, vms, now);
}

// A new virtual node for `a`, inserted unclaimed with its guest booked, and
// its node.created event; kConflict when no host has room.
Result<Node> make_guest_node(sql::Database& db, const Allocation& a, const VirtualNodeMaker& vms, int64_t now,
                             std::vector<EventDraft>& events) {
  Node n = made_guest(a, vms, now);
  if (Status s = insert_node_row(db, n); !s) return s.take_error();
  if (Status s = book_guest(db, n, vms, now); !s) return s.take_error();
  events.push_back(made_guest_event(n, a));
  return n;
}

Status insert_member(sql::Database& db, const std::string& allocation, const std::string& node_id, int64_t now) {
  Result<sql::StatementRef> st = db.prepare(
      "INSERT INTO allocation_members (allocation, node_id, status, joined_at) VALUES (?1, ?2, 'member', ?3)");
  if (!st) return st.take_error();
  (*st)->bind(1, allocation).bind(2, node_id).bind(3, now);
  return (*st)->run();
}

// Claims `want` nodes for `a` (whose row exists) on the writer inside the
// caller's transaction: writes the node rows and member rows and adds a
// node.claimed event per node to `events`. With `vms`, a pooled guest
// without a booking is booked first (skipped when no host has room) and the
// shortfall is made (make_guest_node). kConflict naming /count when fewer can
// be had, with what the hosts are short of.
Result<std::vector<Node>> claim_nodes(sql::Database& db, const Allocation& a, int64_t want, int64_t now,
                                      std::vector<EventDraft>& events, const VirtualNodeMaker* vms) {
  // With guests to book, some pooled nodes may not fit: read them all.
  Result<std::vector<Node>> pool = claimable_nodes(db, a, vms ? std::numeric_limits<int64_t>::max() : want);
  if (!pool) return pool;
  std::vector<Node> got;
  std::string short_of;
  for (Node& n : *pool) {
    if (static_cast<int64_t>(got.size()) >= want) break;
    if (vms && needs_guest(n)) {
      if (Status b = book_guest(db, n, *vms, now); !b) {
        if (b.error().code != Code::kConflict) return b.take_error();
        short_of = b.error().message;
        continue;
      }
    }
    got.push_back(std::move(n));
  }
  // Made nodes carry no traits (controller/hosts/virtual_maker.h).
  while (vms && a.traits.empty() && static_cast<int64_t>(got.size()) < want) {
    Result<Node> made = make_guest_node(db, a, *vms, now, events);
    if (!made) {
      if (made.error().code != Code::kConflict) return made.take_error();
      short_of = made.error().message;
      break;
    }
    got.push_back(std::move(*made));
  }
  if (static_cast<int64_t>(got.size()) < want)
    return too_few_nodes(want, static_cast<int64_t>(got.size()), short_of);
  for (Node& n : got) {
    n = claimed(std::move(n), a, now);
    if (Status s = write_node_row(db, n); !s) return s.take_error();
    if (Status s = insert_member(db, a.id, n.id, now); !s) return s.take_error();
    events.push_back(claim_event(n, a, event_type::kNodeClaimed));
  }
  return got;
}

// A guest booked at claim time and never deployed (no domain) is given back
// when its node leaves the allocation: nothing of the tenant's is on it.
Status free_unused_guest(sql::Database& db, const Node& n) {
  if (!needs_guest(n) || n.provision_state != ProvisionState::kAvailable || !n.reservation.empty())
    return ok_status();
  db::SqliteConn conn(db);
  return host_rows::free_undefined_guest(conn, n.id);
}

}  // namespace

Result<Allocation> SqliteStore::create_allocation(const Allocation& allocation, const std::vector<EventDraft>& events,
                                                  const VirtualNodeMaker* vms) {
  Result<WriterLock> w = lock_writer();
  if (!w) return w.take_error();
  sql::Database& db = w->db();
  Result<sql::Transaction> tx = sql::Transaction::begin_immediate(db);
  if (!tx) return tx.take_error();

  Allocation a = allocation;
  a.created_at = a.updated_at = now_ms();
  a.version = 1;
  a.members.clear();

  // The quota, against what the tenant's nodes count now (claims included).
  Result<sql::StatementRef> q = db.prepare(
      "SELECT (SELECT max_nodes FROM tenant_quotas WHERE tenant = ?1 AND profile = ?2 AND kind = ?3), "
      "(SELECT count(*) FROM nodes WHERE tenant = ?1 AND profile = ?2 AND kind = ?3)");
  if (!q) return q.take_error();
  (*q)->bind(1, a.tenant).bind(2, a.profile).bind(3, a.kind);
  Result<bool> row = (*q)->step();
  if (!row) return row.take_error();
  const int64_t max_nodes = (*q)->column_is_null(0) ? 0 : (*q)->column_int64(0);
  const int64_t in_use = (*q)->column_int64(1);
  (*q)->reset();
  if (over_quota(a, max_nodes, in_use)) return quota_exceeded(a, max_nodes, in_use);

  if (Status s = write_allocation(db, a, /*insert=*/true); !s) return s.take_error();
  std::vector<EventDraft> all = events;
  Result<std::vector<Node>> claimed = claim_nodes(db, a, a.count, a.created_at, all, vms);
  if (!claimed) return claimed.take_error();
  if (Status m = load_members(db, a); !m) return m.take_error();
  Result<int64_t> seq = insert_events(all, nullptr, a.tenant);
  if (!seq) return seq.take_error();
  if (Status s = tx->commit(); !s) return s.take_error();
  notify(*seq);
  return a;
}

Result<Allocation> SqliteStore::get_allocation(std::string_view id_or_name, std::string_view tenant) {
  Result<AllocationRef> key = allocation_ref(id_or_name, tenant);
  if (!key) return key.take_error();
  Result<Allocation> out = allocation_not_found(id_or_name);
  Status s = on_reader([&](sql::Database& db) -> Status {
    // Every row the reference could mean (key columns only: a name a CI job
    // reuses may have many released rows), then the one choose_allocation
    // picks, with its members.
    Result<sql::StatementRef> st = db.prepare(
        "SELECT id, tenant, state = 'released', created_at FROM allocations "
        "WHERE (?1 != '' AND id = ?1) OR (name = ?2 AND (?3 = '' OR tenant = ?3))");
    if (!st) return st.take_error();
    (*st)->bind(1, key->id).bind(2, key->name).bind(3, key->tenant);
    Result<std::vector<AllocationMatch>> matches = collect<AllocationMatch>(**st, [](const St& r) -> Result<AllocationMatch> {
      return AllocationMatch{r.column_text(0), r.column_text(1), r.column_int64(2) != 0, r.column_int64(3)};
    });
    if (!matches) return matches.take_error();
    Result<std::string> id = choose_allocation(*matches, *key, id_or_name);
    if (!id) return id.take_error();
    out = select_allocation(db, *id);
    return ok_status();
  });
  if (!s) return s.take_error();
  return out;
}

Result<std::vector<Allocation>> SqliteStore::list_allocations(const AllocationFilter& filter) {
  std::vector<Allocation> out;
  Status s = on_reader([&](sql::Database& db) -> Status {
    std::string where = " WHERE 1 = 1";
    if (filter.tenant) where += " AND tenant = ?1";
    if (filter.state) where += " AND state = ?2";
    where += " ORDER BY created_at, id";
    Result<std::vector<Allocation>> r = select_allocations(db, where, [&](St& st) {
      if (filter.tenant) st.bind(1, *filter.tenant);
      if (filter.state) st.bind(2, to_string(*filter.state));
    });
    if (!r) return r.take_error();
    out = std::move(*r);
    return ok_status();
  });
  if (!s) return s.take_error();
  return out;
}

Result<std::vector<Allocation>> SqliteStore::allocations_in_flight() {
  std::vector<Allocation> out;
  Status s = on_reader([&](sql::Database& db) -> Status {
    Result<std::vector<Allocation>> r = select_allocations(
        db,
        " WHERE state NOT IN ('released', 'failed') OR (state = 'failed' AND EXISTS (SELECT 1 FROM "
        "allocation_members m WHERE m.allocation = allocations.id AND m.status != 'left')) ORDER BY created_at, id",
        nullptr);
    if (!r) return r.take_error();
    out = std::move(*r);
    return ok_status();
  });
  if (!s) return s.take_error();
  return out;
}

Result<Allocation> SqliteStore::update_allocation_if(std::string_view id, std::optional<int64_t> expected_version,
                                                     const std::function<Status(Allocation&)>& mutate,
                                                     const std::vector<EventDraft>& events) {
  Result<WriterLock> w = lock_writer();
  if (!w) return w.take_error();
  sql::Database& db = w->db();
  Result<sql::Transaction> tx = sql::Transaction::begin_immediate(db);
  if (!tx) return tx.take_error();
  Result<Allocation> cur = select_allocation(db, id);
  if (!cur) return cur;
  if (expected_version && *expected_version != cur->version)
    return allocation_modified(cur->version, *expected_version);
  Allocation a = *cur;
  if (mutate) {
    if (Status s = mutate(a); !s) return s.take_error();
  }
  a = allocation_after_mutate(*cur, std::move(a), now_ms());
  if (Status s = write_allocation(db, a, /*insert=*/false); !s) return s.take_error();
  Result<int64_t> seq = insert_events(events, nullptr, a.tenant);
  if (!seq) return seq.take_error();
  if (Status s = tx->commit(); !s) return s.take_error();
  notify(*seq);
  return a;
}

Result<Allocation> SqliteStore::leave_member(std::string_view id, std::string_view node_id, MemberStatus status,
                                             const std::string& reason, bool replace,
                                             const std::vector<EventDraft>& events, const VirtualNodeMaker* vms) {
  Result<WriterLock> w = lock_writer();
  if (!w) return w.take_error();
  sql::Database& db = w->db();
  Result<sql::Transaction> tx = sql::Transaction::begin_immediate(db);
  if (!tx) return tx.take_error();
  Result<Allocation> cur = select_allocation(db, id);
  if (!cur) return cur;
  Allocation a = *cur;
  const int64_t now = now_ms();
  std::string node(node_id);
  std::vector<EventDraft> all = events;

  Result<sql::StatementRef> st = db.prepare(
      "UPDATE allocation_members SET status = ?3, reason = ?4, left_at = ?5 WHERE allocation = ?1 AND node_id = ?2");
  if (!st) return st.take_error();
  (*st)->bind(1, a.id).bind(2, node).bind(3, to_string(status)).bind(4, reason)
      .bind(5, status == MemberStatus::kLeft ? now : int64_t{0});
  if (Status s = (*st)->run(); !s) return s.take_error();
  if (db.changes() == 0) return not_a_member(node, a.id);

  if (status == MemberStatus::kLeft) {
    // Detach: the node is no longer the tenant's. Only while it still names
    // this allocation (or none: an undeploy clears it first) and this tenant.
    Result<std::vector<Node>> rows = select_node_rows(db, "id = ?1", [&](St& s) { s.bind(1, node); });
    if (!rows) return rows.take_error();
    if (!rows->empty()) {
      Node n = rows->front();
      if (detaches(n, a)) {
        if (Status g = free_unused_guest(db, n); !g) return g.take_error();
        n = detached(std::move(n), now);
        if (Status s = write_node_row(db, n); !s) return s.take_error();
        EventDraft e = claim_event(n, a, event_type::kNodeReleased);
        e.detail["reason"] = reason;
        all.push_back(e);
      }
    }
  }

  if (replace) {
    if (a.replacements >= a.count) return replacements_used(a);
    Result<std::vector<Node>> claimed = claim_nodes(db, a, 1, now, all, vms);
    if (!claimed) {
      if (claimed.error().code != Code::kConflict) return claimed.take_error();
      return no_replacement(a, claimed.error());
    }
    a.replacements += 1;
    a.version += 1;
    a.updated_at = std::max(now, a.updated_at);
    if (Status s = write_allocation(db, a, /*insert=*/false); !s) return s.take_error();
  }
  if (Status m = load_members(db, a); !m) return m.take_error();
  Result<int64_t> seq = insert_events(all, nullptr, a.tenant);
  if (!seq) return seq.take_error();
  if (Status s = tx->commit(); !s) return s.take_error();
  notify(*seq);
  return a;
}

Result<std::map<std::string, int64_t>> SqliteStore::count_allocations_by_state() {
  std::map<std::string, int64_t> out;
  Status s = on_reader([&](sql::Database& db) -> Status {
    Result<sql::StatementRef> st = db.prepare("SELECT state, count(*) FROM allocations GROUP BY state");
    if (!st) return st.take_error();
    for (;;) {
      Result<bool> row = (*st)->step();
      if (!row) return row.take_error();
      if (!*row) return ok_status();
      out[(*st)->column_text(0)] = (*st)->column_int64(1);
    }
  });
  if (!s) return s.take_error();
  return out;
}

// --- usage ledger ---

Status SqliteStore::open_usage(const std::vector<UsageRecord>& rows) {
  return on_writer([&](sql::Database& db) -> Status {
    Result<sql::Transaction> tx = sql::Transaction::begin_immediate(db);
    if (!tx) return tx.take_error();
    for (const UsageRecord& r : rows) {
      Result<sql::StatementRef> st = db.prepare(
          "INSERT OR IGNORE INTO usage_records (allocation, node_id, tenant, profile, kind, started_at, "
          "price_micros_per_second) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)");
      if (!st) return st.take_error();
      (*st)->bind(1, r.allocation).bind(2, r.node_id).bind(3, r.tenant).bind(4, r.profile).bind(5, r.kind)
          .bind(6, r.started_at).bind(7, r.price_micros_per_second);
      if (Status s = (*st)->run(); !s) return s;
    }
    return tx->commit();
  });
}

Status SqliteStore::close_usage(std::string_view allocation, std::string_view node_id, int64_t at_ms) {
  return on_writer([&](sql::Database& db) -> Status {
    Result<sql::StatementRef> st = db.prepare(
        "UPDATE usage_records SET ended_at = max(started_at, ?3) WHERE allocation = ?1 AND ended_at IS NULL "
        "AND (?2 = '' OR node_id = ?2)");
    if (!st) return st.take_error();
    (*st)->bind(1, allocation).bind(2, node_id).bind(3, at_ms);
    return (*st)->run();
  });
}

Result<std::vector<UsageRecord>> SqliteStore::list_usage(const UsageFilter& filter) {
  std::vector<UsageRecord> out;
  Status s = on_reader([&](sql::Database& db) -> Status {
    std::string sql =
        "SELECT id, allocation, node_id, tenant, profile, kind, started_at, ended_at, price_micros_per_second "
        "FROM usage_records WHERE (ended_at IS NULL OR ended_at > ?1)";
    if (filter.to_ms > 0) sql += " AND started_at < ?2";
    if (filter.tenant) sql += " AND tenant = ?3";
    if (filter.allocation) sql += " AND allocation = ?4";
    sql += " ORDER BY started_at, id";
    Result<sql::StatementRef> st = db.prepare(sql);
    if (!st) return st.take_error();
    (*st)->bind(1, filter.from_ms);
    if (filter.to_ms > 0) (*st)->bind(2, filter.to_ms);
    if (filter.tenant) (*st)->bind(3, *filter.tenant);
    if (filter.allocation) (*st)->bind(4, *filter.allocation);
    Result<std::vector<UsageRecord>> r = collect<UsageRecord>(**st, [](const St& s) {
      UsageRecord u;
      u.id = s.column_int64(0);
      u.allocation = s.column_text(1);
      u.node_id = s.column_text(2);
      u.tenant = s.column_text(3);
      u.profile = s.column_text(4);
      u.kind = s.column_text(5);
      u.started_at = s.column_int64(6);
      if (!s.column_is_null(7)) u.ended_at = s.column_int64(7);
      u.price_micros_per_second = s.column_int64(8);
      return u;
    });
    if (!r) return r.take_error();
    out = std::move(*r);
    return ok_status();
  });
  if (!s) return s.take_error();
  return out;
}

}  // namespace kiln
