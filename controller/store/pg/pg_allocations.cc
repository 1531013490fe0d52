#include <limits>
#include <utility>

#include "controller/model/allocation_states.h"
#include "controller/model/event_types.h"
#include "controller/store/pg/pg_conn.h"
#include "controller/store/pg/pg_node_rows.h"
#include "controller/store/pg/pg_store.h"
#include "controller/store/sql/host_rows.h"
#include "controller/store/store_rules.h"

namespace kiln {

using json = nlohmann::json;
using namespace store_rules;

// PgStore: allocations, members and the usage ledger (AllocationStore), as
// sqlite_allocations.cc: the same statements, checks, errors, events and
// order. The row locks that stand in for SQLite's single writer are
// described in pg_store.h ("Allocations").

namespace {

constexpr const char kAllocationColumns[] =
    "id, name, tenant, profile, kind, count, image, ssh_keys, user_data, traits, state, last_error, "
    "lease_seconds, expires_at, replacements, ready_at, history, created_at, updated_at, version";

pg::Params allocation_params(const Allocation& a) {
  pg::Params p;
  p.add(a.id).add(a.name).add(a.tenant).add(a.profile).add(a.kind).add(a.count).add(a.image)
      .add(json_text(json(a.ssh_keys))).add(a.user_data).add(json_text(json(a.traits)))
      .add(to_string(a.state)).add(a.last_error).add(a.lease_seconds).add(a.expires_at).add(a.replacements)
      .add(a.ready_at).add(json_text(history_json(a.history))).add(a.created_at).add(a.updated_at)
      .add(a.version);
  return p;
}

Result<json> json_column(const pg::Rows& r, int row, int col, std::string_view column) {
  json j = json::parse(r.text(row, col), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Error(Code::kInternal, "store: corrupt JSON in " + std::string(column));
  return j;
}

Result<Allocation> read_allocation(const pg::Rows& r, int row) {
  Allocation a;
  a.id = r.text(row, 0);
  a.name = r.text(row, 1);
  a.tenant = r.text(row, 2);
  a.profile = r.text(row, 3);
  a.kind = r.text(row, 4);
  a.count = r.int64(row, 5);
  a.image = r.text(row, 6);
  Result<json> keys = json_column(r, row, 7, "allocations.ssh_keys");
  if (!keys) return keys.take_error();
  a.ssh_keys = string_list(*keys);
  a.user_data = r.text(row, 8);
  Result<json> traits = json_column(r, row, 9, "allocations.traits");
  if (!traits) return traits.take_error();
  a.traits = string_list(*traits);
  std::string state = r.text(row, 10);
  std::optional<AllocationState> st = parse_allocation_state(state);
  if (!st) return unknown_allocation_state(a.id, state);
  a.state = *st;
  a.last_error = r.text(row, 11);
  a.lease_seconds = r.int64(row, 12);
  a.expires_at = r.int64(row, 13);
  a.replacements = r.int64(row, 14);
  a.ready_at = r.int64(row, 15);
  Result<json> history = json_column(r, row, 16, "allocations.history");
  if (!history) return history.take_error();
  a.history = history_from_json(*history);
  a.created_at = r.int64(row, 17);
  a.updated_at = r.int64(row, 18);
  a.version = r.int64(row, 19);
  return a;
}

// Members in the order they joined. SQLite breaks ties (one claim's members
// share joined_at) by rowid, the insertion order; this table has no such
// column, so ties go by the node's created_at and id, the order a claim takes
// pooled nodes in (pg_store.h notes the one case where that differs).
Status load_members(pg::Connection& c, Allocation& a) {
  Result<pg::Rows> r = c.exec(
      "SELECT m.node_id, m.status, m.reason, m.joined_at, m.left_at FROM allocation_members m"
      " LEFT JOIN nodes n ON n.id = m.node_id WHERE m.allocation = $1"
      " ORDER BY m.joined_at, n.created_at, m.node_id COLLATE \"C\"",
      pg::Params().add(a.id));
  if (!r) return r.take_error();
  a.members.clear();
  for (int i = 0; i < r->size(); ++i) {
    AllocationMember m;
    m.node_id = r->text(i, 0);
    std::string status = r->text(i, 1);
    std::optional<MemberStatus> ms = parse_member_status(status);
    if (!ms) return unknown_member_status(m.node_id, status);
    m.status = *ms;
    m.reason = r->text(i, 2);
    m.joined_at = r->int64(i, 3);
    m.left_at = r->int64(i, 4);
    a.members.push_back(std::move(m));
  }
  return ok_status();
}

// Allocations (members filled) for `tail` (WHERE ... ORDER BY ...).
Result<std::vector<Allocation>> select_allocations(pg::Connection& c, const std::string& tail,
                                                   const pg::Params& params) {
  Result<pg::Rows> r = c.exec(std::string("SELECT ") + kAllocationColumns + " FROM allocations" + tail, params);
  if (!r) return r.take_error();
  std::vector<Allocation> out;
  for (int i = 0; i < r->size(); ++i) {
    Result<Allocation> a = read_allocation(*r, i);
    if (!a) return a.take_error();
    if (Status m = load_members(c, *a); !m) return m.take_error();
    out.push_back(std::move(*a));
  }
  return out;
}

// The allocation `id`, its row locked (FOR NO KEY UPDATE) until the
// transaction ends.
Result<Allocation> lock_allocation(pg::Connection& c, std::string_view id) {
  Result<std::vector<Allocation>> r =
      select_allocations(c, " WHERE id = $1 FOR NO KEY UPDATE", pg::Params().add(id));
  if (!r) return r.take_error();
  if (r->empty()) return allocation_not_found(id);
  return std::move(r->front());
}

Status write_allocation(pg::Connection& c, const Allocation& a, bool insert) {
  std::string sql;
  if (insert) {
    sql = std::string("INSERT INTO allocations (") + kAllocationColumns +
          ") VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20)";
  } else {
    sql = "UPDATE allocations SET name = $2, tenant = $3, profile = $4, kind = $5, count = $6, image = $7, "
          "ssh_keys = $8, user_data = $9, traits = $10, state = $11, last_error = $12, lease_seconds = $13, "
          "expires_at = $14, replacements = $15, ready_at = $16, history = $17, created_at = $18, "
          "updated_at = $19, version = $20 WHERE id = $1";
  }
  Result<pg::Rows> r = c.exec(sql, allocation_params(a));
  if (!r) {
    Error e = r.take_error();
    if (pg::is_unique_violation(e) && e.message.find("\"allocations_live_name\"") != std::string::npos)
      return allocation_name_taken(a);
    return e;
  }
  return ok_status();
}

// Locks the tenant's row (when it has one) until the transaction ends:
// `exclusive` (FOR NO KEY UPDATE) serializes the quota checks of one tenant,
// a share lock keeps delete_tenant (FOR UPDATE) out only.
Status lock_tenant(pg::Connection& c, const std::string& tenant, bool exclusive) {
  Result<pg::Rows> r = c.exec(std::string("SELECT 1 FROM tenants WHERE name = $1 ") +
                                  (exclusive ? "FOR NO KEY UPDATE" : "FOR SHARE"),
                              pg::Params().add(tenant));
  if (!r) return r.take_error();
  return ok_status();
}

// The claimable nodes of the allocation's profile and kind with all its
// traits, oldest first, up to `want`, each locked (FOR NO KEY UPDATE) in
// that order (pg_store.h says why not SKIP LOCKED).
Result<std::vector<Node>> lock_claimable_nodes(pg::Connection& c, const Allocation& a, int64_t want) {
  std::string sql = pg_rows::node_select() + " WHERE " + kClaimableNodeSql +
                    " AND profile = $1 AND kind = $2 AND ($3 = '[]' OR traits::jsonb @> $3::jsonb)"
                    " ORDER BY created_at, id";
  pg::Params p;
  p.add(a.profile).add(a.kind).add(json_text(json(a.traits)));
  if (want != std::numeric_limits<int64_t>::max()) {
    sql += " LIMIT $4";
    p.add(want);
  }
  sql += " FOR NO KEY UPDATE";
  Result<pg::Rows> r = c.exec(sql, p);
  if (!r) return r.take_error();
  Result<std::vector<Node>> nodes = pg_rows::read_nodes(*r);
  if (!nodes) return nodes;
  // The JSON containment above is the trait test; this is the same rule
  // SQLite applies, kept so both read the column alike.
  std::vector<Node> out;
  for (Node& n : *nodes)
    if (has_traits(n, a.traits)) out.push_back(std::move(n));
  return out;
}

// Books `n`'s guest on a host unless it has one: ok, or kConflict naming
// what is short.
Status book_guest(pg::Connection& c, const Node& n, const VirtualNodeMaker& vms, int64_t now) {
  db::PgConn conn(c);
  return host_rows::book_guest(conn, n, vms, now);
}

// A new virtual node for `a`, inserted unclaimed with its guest booked, and
// its node.created event; kConflict when no host has room.
Result<Node> make_guest_node(pg::Connection& c, const Allocation& a, const VirtualNodeMaker& vms, int64_t now,
                             std::vector<EventDraft>& events) {
  Node n = made_guest(a, vms, now);
  if (Status s = pg_rows::insert_node_row(c, n); !s) return s.take_error();
  if (Status s = book_guest(c, n, vms, now); !s) return s.take_error();
  events.push_back(made_guest_event(n, a));
  return n;
}

Status insert_member(pg::Connection& c, const std::string& allocation, const std::string& node_id, int64_t now) {
  Result<pg::Rows> r = c.exec(
      "INSERT INTO allocation_members (allocation, node_id, status, joined_at) VALUES ($1, $2, 'member', $3)",
      pg::Params().add(allocation).add(node_id).add(now));
  if (!r) return r.take_error();
  return ok_status();
}

// Claims `want` nodes for `a` (whose row exists) inside the caller's
// transaction, as sqlite_allocations.cc's claim_nodes: node rows, member rows
// and a node.claimed event per node; with `vms`, pooled guests booked first
// (skipped when no host has room) and the shortfall made. kConflict naming
// /count when fewer can be had.
Result<std::vector<Node>> claim_nodes(pg::Connection& c, const Allocation& a, int64_t want, int64_t now,
                                      std::vector<EventDraft>& events, const VirtualNodeMaker* vms) {
  Result<std::vector<Node>> pool = lock_claimable_nodes(c, a, vms ? std::numeric_limits<int64_t>::max() : want);
  if (!pool) return pool;
  std::vector<Node> got;
  std::string short_of;
  for (Node& n : *pool) {
    if (static_cast<int64_t>(got.size()) >= want) break;
    if (vms && needs_guest(n)) {
      if (Status b = book_guest(c, n, *vms, now); !b) {
        if (b.error().code != Code::kConflict) return b.take_error();
        short_of = b.error().message;
        continue;
      }
    }
    got.push_back(std::move(n));
  }
  // Made nodes carry no traits (controller/hosts/virtual_maker.h).
  while (vms && a.traits.empty() && static_cast<int64_t>(got.size()) < want) {
    Result<Node> made = make_guest_node(c, a, *vms, now, events);
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
    const int64_t read_version = n.version;
    n = claimed(std::move(n), a, now);
    if (Status s = pg_rows::write_node_row(c, n, read_version); !s) return s.take_error();
    if (Status s = insert_member(c, a.id, n.id, now); !s) return s.take_error();
    events.push_back(claim_event(n, a, event_type::kNodeClaimed));
  }
  return got;
}

}  // namespace

Result<Allocation> PgStore::create_allocation(const Allocation& allocation, const std::vector<EventDraft>& events,
                                              const VirtualNodeMaker* vms) {
  Result<Lease> l = lease();
  if (!l) return l.take_error();
  pg::Connection& c = l->conn();
  Result<pg::Transaction> tx = pg::Transaction::begin(c);
  if (!tx) return tx.take_error();

  Allocation a = allocation;
  a.created_at = a.updated_at = now_ms();
  a.version = 1;
  a.members.clear();

  // The quota, against what the tenant's nodes count now (claims included),
  // read after the tenant's row is locked: the previous claim of this tenant
  // has committed (its nodes count) or rolled back.
  if (Status s = lock_tenant(c, a.tenant, /*exclusive=*/true); !s) return s.take_error();
  Result<pg::Rows> q = c.exec(
      "SELECT (SELECT max_nodes FROM tenant_quotas WHERE tenant = $1 AND profile = $2 AND kind = $3), "
      "(SELECT count(*) FROM nodes WHERE tenant = $1 AND profile = $2 AND kind = $3)",
      pg::Params().add(a.tenant).add(a.profile).add(a.kind));
  if (!q) return q.take_error();
  const int64_t max_nodes = q->int64(0, 0);  // NULL (no quota) reads 0
  const int64_t in_use = q->int64(0, 1);
  if (over_quota(a, max_nodes, in_use)) return quota_exceeded(a, max_nodes, in_use);

  if (Status s = write_allocation(c, a, /*insert=*/true); !s) return s.take_error();
  std::vector<EventDraft> all = events;
  Result<std::vector<Node>> got = claim_nodes(c, a, a.count, a.created_at, all, vms);
  if (!got) return got.take_error();
  if (Status m = load_members(c, a); !m) return m.take_error();
  Result<int64_t> seq = insert_events(c, all, nullptr, a.tenant);
  if (!seq) return seq.take_error();
  if (Status s = tx->commit(); !s) return s.take_error();
  notify(*seq);
  return a;
}

Result<Allocation> PgStore::get_allocation(std::string_view id_or_name, std::string_view tenant) {
  Result<AllocationRef> key = allocation_ref(id_or_name, tenant);
  if (!key) return key.take_error();
  Result<Lease> l = lease();
  if (!l) return l.take_error();
  pg::Connection& c = l->conn();
  Result<pg::Transaction> tx = pg::Transaction::begin_read(c);
  if (!tx) return tx.take_error();
  // Every row the reference could mean (key columns only), then the one
  // choose_allocation picks, with its members.
  Result<pg::Rows> r = c.exec(
      "SELECT id, tenant, state = 'released', created_at FROM allocations "
      "WHERE ($1 <> '' AND id = $1) OR (name = $2 AND ($3 = '' OR tenant = $3))",
      pg::Params().add(key->id).add(key->name).add(key->tenant));
  if (!r) return r.take_error();
  std::vector<AllocationMatch> matches;
  for (int i = 0; i < r->size(); ++i)
    matches.push_back(AllocationMatch{r->text(i, 0), r->text(i, 1), r->boolean(i, 2), r->int64(i, 3)});
  Result<std::string> id = choose_allocation(matches, *key, id_or_name);
  if (!id) return id.take_error();
  Result<std::vector<Allocation>> chosen = select_allocations(c, " WHERE id = $1", pg::Params().add(*id));
  if (!chosen) return chosen.take_error();
  if (chosen->empty()) return allocation_not_found(id_or_name);
  return std::move(chosen->front());
}

Result<std::vector<Allocation>> PgStore::list_allocations(const AllocationFilter& filter) {
  Result<Lease> l = lease();
  if (!l) return l.take_error();
  pg::Connection& c = l->conn();
  Result<pg::Transaction> tx = pg::Transaction::begin_read(c);
  if (!tx) return tx.take_error();
  std::string where = " WHERE 1 = 1";
  pg::Params p;
  if (filter.tenant) {
    where += " AND tenant = $" + std::to_string(p.next_index());
    p.add(*filter.tenant);
  }
  if (filter.state) {
    where += " AND state = $" + std::to_string(p.next_index());
    p.add(to_string(*filter.state));
  }
  where += " ORDER BY created_at, id";
  return select_allocations(c, where, p);
}

Result<std::vector<Allocation>> PgStore::allocations_in_flight() {
  Result<Lease> l = lease();
  if (!l) return l.take_error();
  pg::Connection& c = l->conn();
  Result<pg::Transaction> tx = pg::Transaction::begin_read(c);
  if (!tx) return tx.take_error();
  return select_allocations(
      c,
      " WHERE state NOT IN ('released', 'failed') OR (state = 'failed' AND EXISTS (SELECT 1 FROM "
      "allocation_members m WHERE m.allocation = allocations.id AND m.status != 'left')) ORDER BY created_at, id",
      pg::Params());
}

Result<Allocation> PgStore::update_allocation_if(std::string_view id, std::optional<int64_t> expected_version,
                                                 const std::function<Status(Allocation&)>& mutate,
                                                 const std::vector<EventDraft>& events) {
  Result<Lease> l = lease();
  if (!l) return l.take_error();
  pg::Connection& c = l->conn();
  Result<pg::Transaction> tx = pg::Transaction::begin(c);
  if (!tx) return tx.take_error();
  Result<Allocation> cur = lock_allocation(c, id);
  if (!cur) return cur;
  if (expected_version && *expected_version != cur->version)
    return allocation_modified(cur->version, *expected_version);
  Allocation a = *cur;
  if (mutate) {
    if (Status s = mutate(a); !s) return s.take_error();
  }
  a = allocation_after_mutate(*cur, std::move(a), now_ms());
  if (Status s = write_allocation(c, a, /*insert=*/false); !s) return s.take_error();
  Result<int64_t> seq = insert_events(c, events, nullptr, a.tenant);
  if (!seq) return seq.take_error();
  if (Status s = tx->commit(); !s) return s.take_error();
  notify(*seq);
  return a;
}

Result<Allocation> PgStore::leave_member(std::string_view id, std::string_view node_id, MemberStatus status,
                                         const std::string& reason, bool replace,
                                         const std::vector<EventDraft>& events, const VirtualNodeMaker* vms) {
  Result<Lease> l = lease();
  if (!l) return l.take_error();
  pg::Connection& c = l->conn();
  Result<pg::Transaction> tx = pg::Transaction::begin(c);
  if (!tx) return tx.take_error();
  // A replacement adds a node to the tenant: it queues behind (and ahead of)
  // the tenant's claims as they do, the tenant row first, as they take it.
  if (replace) {
    Result<pg::Rows> owner = c.exec("SELECT tenant FROM allocations WHERE id = $1", pg::Params().add(id));
    if (!owner) return owner.take_error();
    if (!owner->empty())
      if (Status s = lock_tenant(c, owner->text(0, 0), /*exclusive=*/true); !s) return s.take_error();
  }
  Result<Allocation> cur = lock_allocation(c, id);
  if (!cur) return cur;
  Allocation a = *cur;
  const int64_t now = now_ms();
  std::string node(node_id);
  std::vector<EventDraft> all = events;

  Result<pg::Rows> up = c.exec(
      "UPDATE allocation_members SET status = $3, reason = $4, left_at = $5 WHERE allocation = $1 AND node_id = $2",
      pg::Params().add(a.id).add(node).add(to_string(status)).add(reason)
          .add(status == MemberStatus::kLeft ? now : int64_t{0}));
  if (!up) return up.take_error();
  if (up->affected() == 0) return not_a_member(node, a.id);

  if (status == MemberStatus::kLeft) {
    // Detach: the node is no longer the tenant's (store_rules::detaches).
    Result<pg::Rows> r = c.exec(pg_rows::node_select() + " WHERE id = $1 FOR NO KEY UPDATE", pg::Params().add(node));
    if (!r) return r.take_error();
    Result<std::vector<Node>> rows = pg_rows::read_nodes(*r);
    if (!rows) return rows.take_error();
    if (!rows->empty()) {
      Node n = rows->front();
      if (detaches(n, a)) {
        if (needs_guest(n) && n.provision_state == ProvisionState::kAvailable && n.reservation.empty()) {
          db::PgConn pc(c);
          if (Status g = host_rows::free_undefined_guest(pc, n.id); !g) return g.take_error();
        }
        const int64_t read_version = n.version;
        n = detached(std::move(n), now);
        if (Status s = pg_rows::write_node_row(c, n, read_version); !s) return s.take_error();
        EventDraft e = claim_event(n, a, event_type::kNodeReleased);
        e.detail["reason"] = reason;
        all.push_back(e);
      }
    }
  }

  if (replace) {
    if (a.replacements >= a.count) return replacements_used(a);
    Result<std::vector<Node>> got = claim_nodes(c, a, 1, now, all, vms);
    if (!got) {
      if (got.error().code != Code::kConflict) return got.take_error();
      return no_replacement(a, got.error());
    }
    a.replacements += 1;
    a.version += 1;
    a.updated_at = std::max(now, a.updated_at);
    if (Status s = write_allocation(c, a, /*insert=*/false); !s) return s.take_error();
  }
  if (Status m = load_members(c, a); !m) return m.take_error();
  Result<int64_t> seq = insert_events(c, all, nullptr, a.tenant);
  if (!seq) return seq.take_error();
  if (Status s = tx->commit(); !s) return s.take_error();
  notify(*seq);
  return a;
}

Result<std::map<std::string, int64_t>> PgStore::count_allocations_by_state() {
  Result<Lease> l = lease();
  if (!l) return l.take_error();
  Result<pg::Rows> r = l->conn().exec("SELECT state, count(*) FROM allocations GROUP BY state");
  if (!r) return r.take_error();
  std::map<std::string, int64_t> out;
  for (int i = 0; i < r->size(); ++i) out[r->text(i, 0)] = r->int64(i, 1);
  return out;
}

// --- usage ledger ---

Status PgStore::open_usage(const std::vector<UsageRecord>& rows) {
  Result<Lease> l = lease();
  if (!l) return l.take_error();
  pg::Connection& c = l->conn();
  Result<pg::Transaction> tx = pg::Transaction::begin(c);
  if (!tx) return tx.take_error();
  for (const UsageRecord& u : rows) {
    // An open row of the same (allocation, node) is kept (usage_open).
    Result<pg::Rows> r = c.exec(
        "INSERT INTO usage_records (allocation, node_id, tenant, profile, kind, started_at, "
        "price_micros_per_second) VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT DO NOTHING",
        pg::Params().add(u.allocation).add(u.node_id).add(u.tenant).add(u.profile).add(u.kind).add(u.started_at)
            .add(u.price_micros_per_second));
    if (!r) return r.take_error();
  }
  return tx->commit();
}

Status PgStore::close_usage(std::string_view allocation, std::string_view node_id, int64_t at_ms) {
  Result<Lease> l = lease();
  if (!l) return l.take_error();
  Result<pg::Rows> r = l->conn().exec(
      "UPDATE usage_records SET ended_at = greatest(started_at, $3) WHERE allocation = $1 AND ended_at IS NULL "
      "AND ($2 = '' OR node_id = $2)",
      pg::Params().add(allocation).add(node_id).add(at_ms));
  if (!r) return r.take_error();
  return ok_status();
}

Result<std::vector<UsageRecord>> PgStore::list_usage(const UsageFilter& filter) {
  Result<Lease> l = lease();
  if (!l) return l.take_error();
  std::string sql =
      "SELECT id, allocation, node_id, tenant, profile, kind, started_at, ended_at, price_micros_per_second "
      "FROM usage_records WHERE (ended_at IS NULL OR ended_at > $1)";
  pg::Params p;
  p.add(filter.from_ms);
  if (filter.to_ms > 0) {
    sql += " AND started_at < $" + std::to_string(p.next_index());
    p.add(filter.to_ms);
  }
  if (filter.tenant) {
    sql += " AND tenant = $" + std::to_string(p.next_index());
    p.add(*filter.tenant);
  }
  if (filter.allocation) {
    sql += " AND allocation = $" + std::to_string(p.next_index());
    p.add(*filter.allocation);
  }
  sql += " ORDER BY started_at, id";
  Result<pg::Rows> r = l->conn().exec(sql, p);
  if (!r) return r.take_error();
  std::vector<UsageRecord> out;
  for (int i = 0; i < r->size(); ++i) {
    UsageRecord u;
    u.id = r->int64(i, 0);
    u.allocation = r->text(i, 1);
    u.node_id = r->text(i, 2);
    u.tenant = r->text(i, 3);
    u.profile = r->text(i, 4);
    u.kind = r->text(i, 5);
    u.started_at = r->int64(i, 6);
    if (!r->is_null(i, 7)) u.ended_at = r->int64(i, 7);
    u.price_micros_per_second = r->int64(i, 8);
    out.push_back(std::move(u));
  }
  return out;
}

}  // namespace kiln
