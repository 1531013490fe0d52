#include <algorithm>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <tuple>
#include <utility>

#include "controller/model/allocation_states.h"
#include "controller/model/event_types.h"
#include "controller/model/node_allocation.h"
#include "controller/store/sql/host_rows.h"
#include "controller/store/sql/node_rows.h"
#include "controller/store/sql/sql_store.h"
#include "controller/store/sql/usage_rows.h"
#include "controller/store/store_rules.h"

namespace kiln {

using json = nlohmann::json;
using namespace store_rules;

// SqlStore: allocations, their members and the claim on nodes
// (AllocationStore; the usage ledger is in sql/usage.cc). Contract in
// allocation_store.h.
//
// A claim is all or nothing. SQLite gets that from its one writer (BEGIN
// IMMEDIATE excludes every other writer). On PostgreSQL claims from several
// kilnd run at once, so each claim takes row locks, always in this order, and
// holds them until it commits. They are FOR NO KEY UPDATE (ClaimSql::lock; no
// key changes): it conflicts with itself, with FOR UPDATE (update_node_if's
// retry, delete_tenant) and with the implicit lock of an UPDATE, but not with
// the key-share locks foreign key checks take, so inserting an event or a
// reservation that refers to a locked row does not wait for the claim:
//   1. the tenant's row, before reading its quota and what its nodes count:
//      two claims of one tenant are serialized there, and the later one
//      counts the earlier one's nodes (READ COMMITTED reads what committed
//      before each statement), so together they never exceed the quota.
//      delete_tenant locks that row FOR UPDATE before counting the tenant's
//      nodes and live allocations (sql/tenants.cc), so a claim and a tenant's
//      deletion are serialized too: the claim waits and then finds no quota,
//      or the deletion waits and then finds the claim's allocation. A
//      replacement (leave_member with `replace`) takes the same lock.
//   2. the candidate nodes, SELECT ... ORDER BY created_at, id [LIMIT n]
//      FOR NO KEY UPDATE: locked one by one in the pool's order, so two
//      claims for the same pool queue on its first node rather than
//      deadlock; a claim that waited on a row another claim took re-checks it
//      once that claim commits (it is no longer claimable and is passed over)
//      and goes on to the next, so it takes whatever the winner left (of the
//      nodes that were claimable when its statement began). Not SKIP LOCKED:
//      a claim would then pass over nodes that a racing claim holds only to
//      give back when it fails, and refuse (kConflict) although enough nodes
//      stay free: all or nothing must not fail on a race it would win. The
//      trait test is in the WHERE clause (ClaimSql::has_traits), so the LIMIT
//      counts only nodes that qualify; a virtual claim reads (and locks) the
//      whole pool, as every candidate may be tried.
//   3. the candidate host rows, FOR UPDATE in name order, before reading what
//      is booked there (sql/host_rows.h): two virtual claims never plan
//      against the same free capacity.
// A VirtualNodeMaker's functions run on the calling thread, inside the
// claim's transaction, under these locks. update_allocation_if and
// leave_member lock the allocation row (leave_member after the tenant's row
// when it replaces), and leave_member then locks the leaving node before
// detaching it. A deadlock the server still detects (say with a writer that
// takes these rows in another order) is kUnavailable: retry.
//
// Members read back in the order they joined: joined_at, then `ord`, the
// member's place in its allocation, written by the claim in the order it took
// the nodes (schemas/sql/<dialect>/023_member_order.sql).

namespace {

// What the claim spells differently per engine.
struct ClaimSql {
  // Appended to a SELECT of rows a claim, a replacement or a departure will
  // update (the locks above); "" on SQLite, whose writer is alone.
  const char* lock;
  // "The node has every trait of the JSON array $3": jsonb containment on
  // PostgreSQL, json_each on SQLite. Both are guarded by $3 = '[]', so an
  // allocation without traits never parses a node's column.
  const char* has_traits;
};

const ClaimSql& claim_sql(const db::Conn& c) {
  static const ClaimSql sqlite{
      .lock = "",
      .has_traits = "($3 = '[]' OR NOT EXISTS (SELECT 1 FROM json_each($3) wanted WHERE wanted.value NOT IN "
                    "(SELECT held.value FROM json_each(nodes.traits) held)))"};
  static const ClaimSql pg{.lock = " FOR NO KEY UPDATE", .has_traits = "($3 = '[]' OR traits::jsonb @> $3::jsonb)"};
  return c.dialect().engine == db::Engine::kSqlite ? sqlite : pg;
}

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

Result<Allocation> read_allocation(const db::Rows& r) {
  Allocation a;
  for (int c = 0; c < kAllocationColumnCount; ++c) {
    if (Status s = kAllocationColumns[c].read(r, c, a); !s) return s.take_error();
  }
  return a;
}

// The unique index on a live allocation's (tenant, name).
constexpr db::Constraint kLiveName{"allocations.tenant", "allocations_live_name"};

// Inserts `a`'s row, or writes every column of it by id.
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

// Allocations whose members one query reads (its binds well under both
// engines' limits on parameters).
constexpr std::size_t kMembersPerQuery = 500;

// Fills the members of every allocation in `all`, each in the order they
// joined: one query per kMembersPerQuery allocations, not one per
// allocation (a list page of 100 made 101 round trips to the database).
Status load_members(db::Conn& c, std::span<Allocation> all) {
  for (std::size_t from = 0; from < all.size(); from += kMembersPerQuery) {
    const std::span<Allocation> batch = all.subspan(from, std::min(kMembersPerQuery, all.size() - from));
    std::map<std::string, Allocation*, std::less<>> by_id;
    db::Binds b;
    std::string in;
    for (Allocation& a : batch) {
      a.members.clear();
      by_id.emplace(a.id, &a);
      in += (in.empty() ? "$" : ", $") + std::to_string(b.next());
      b.add(a.id);
    }
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

// Allocations (members filled) for `tail` (WHERE ... ORDER BY ..., and a lock).
Result<std::vector<Allocation>> select_allocations(db::Conn& c, const std::string& tail, const db::Binds& binds) {
  static const std::string select = "SELECT " + column_list(column_names()) + " FROM allocations";
  Result<db::Rows> r = c.query(select + tail, binds);
  if (!r) return r.take_error();
  Result<std::vector<Allocation>> all = db::collect<Allocation>(*r, read_allocation);
  if (!all) return all;
  if (Status m = load_members(c, std::span<Allocation>(*all)); !m) return m.take_error();
  return all;
}

// The allocation `id`, its row locked (ClaimSql::lock) until the transaction
// ends.
Result<Allocation> lock_allocation(db::Conn& c, std::string_view id) {
  Result<std::vector<Allocation>> r =
      select_allocations(c, std::string(" WHERE id = $1") + claim_sql(c).lock, db::Binds().add(id));
  if (!r) return r.take_error();
  if (r->empty()) return allocation_not_found(id);
  return std::move(r->front());
}

// Locks the tenant's row (when it has one) until the transaction ends: the
// tenant's claims and its deletion run one after another (above). Nothing to
// do on SQLite.
Status lock_tenant(db::Conn& c, std::string_view tenant) {
  const std::string_view lock = claim_sql(c).lock;
  if (lock.empty()) return ok_status();
  Result<db::Rows> r = c.query("SELECT 1 FROM tenants WHERE name = $1" + std::string(lock), db::Binds().add(tenant));
  if (!r) return r.take_error();
  return ok_status();
}

// lock_tenant for the tenant of allocation `id` (none when it does not exist).
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

// Writes every column of `n` to its row, which the transaction holds (SQLite's
// writer, or the row lock): it still has `read_version`.
Status write_node(db::Conn& c, const Node& n, int64_t read_version) {
  Result<int64_t> w = node_rows::update_node_row(c, n, read_version);
  if (!w) return w.take_error();
  if (*w != 1)
    return Error(Code::kInternal, "store: node " + n.id + " changed under its row lock (version " +
                                      std::to_string(read_version) + ")");
  return ok_status();
}

// The claimable nodes of the allocation's profile and kind with all its
// traits, oldest first (so the pool drains in a stable order), up to `want`,
// each locked in that order.
Result<std::vector<Node>> lock_claimable_nodes(db::Conn& c, const Allocation& a, int64_t want) {
  const ClaimSql& sql = claim_sql(c);
  std::string q = node_rows::node_select() + " WHERE " + kClaimableNodeSql + " AND profile = $1 AND kind = $2 AND " +
                  sql.has_traits + " ORDER BY created_at, id";
  db::Binds b;
  b.add(a.profile).add(to_string(a.kind)).add(json_text(json(a.traits)));
  if (want != std::numeric_limits<int64_t>::max()) {
    q += " LIMIT $4";
    b.add(want);
  }
  q += sql.lock;
  Result<db::Rows> r = c.query(q, b);
  if (!r) return r.take_error();
  Result<std::vector<Node>> nodes = node_rows::read_nodes(*r);
  if (!nodes) return nodes;
  // The same test on the column as read (string_list), so a node whose
  // traits hold something other than strings is judged as it reads.
  std::vector<Node> out;
  for (Node& n : *nodes)
    if (has_traits(n, a.traits)) out.push_back(std::move(n));
  return out;
}

// A new virtual node for `a`, inserted unclaimed with its guest booked, and
// its node.created event; kConflict when no host has room.
Result<Node> make_guest_node(db::Conn& c, const Allocation& a, const VirtualNodeMaker& vms, int64_t now,
                             std::vector<EventDraft>& events) {
  Node n = made_guest(a, vms, now);
  if (Status s = node_rows::insert_node_row(c, n); !s) return s.take_error();
  if (Status s = host_rows::book_guest(c, n, vms, now); !s) return s.take_error();
  events.push_back(made_guest_event(n, a));
  return n;
}

// Claims `want` nodes for `a` (whose row exists and is the transaction's)
// inside the caller's transaction: writes the node rows and member rows and
// adds a node.claimed event per node to `events`. With `vms`, a pooled guest
// without a booking is booked first (skipped when no host has room) and the
// shortfall is made (make_guest_node). kConflict naming /count when fewer can
// be had, with what the hosts are short of.
Result<std::vector<Node>> claim_nodes(db::Conn& c, const Allocation& a, int64_t want, int64_t now,
                                      std::vector<EventDraft>& events, const VirtualNodeMaker* vms) {
  // With guests to book, some pooled nodes may not fit: read them all.
  Result<std::vector<Node>> pool = lock_claimable_nodes(c, a, vms ? std::numeric_limits<int64_t>::max() : want);
  if (!pool) return pool;
  std::vector<Node> got;
  std::string short_of;
  for (Node& n : *pool) {
    if (static_cast<int64_t>(got.size()) >= want) break;
    if (vms && needs_guest(n)) {
      if (Status b = host_rows::book_guest(c, n, *vms, now); !b) {
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

  // Members are numbered after the allocation's last one, in the order taken.
  Result<int64_t> last =
      db::query_int(c, "SELECT coalesce(max(ord), 0) FROM allocation_members WHERE allocation = $1",
                    db::Binds().add(a.id));
  if (!last) return last.take_error();
  int64_t ord = *last;
  for (Node& n : got) {
    const int64_t read_version = n.version;
    n = claimed(std::move(n), a, now);
    if (Status s = write_node(c, n, read_version); !s) return s.take_error();
    Result<int64_t> m = c.exec(
        "INSERT INTO allocation_members (allocation, node_id, status, joined_at, ord) VALUES ($1, $2, 'member', $3, $4)",
        db::Binds().add(a.id).add(n.id).add(now).add(++ord));
    if (!m) return m.take_error();
    events.push_back(claim_event(n, a, event_type::kNodeClaimed));
  }
  return got;
}

// Detaches node `node_id` from `a` when it still belongs to it (belongs_to),
// adding its node.released event to `events`. A guest booked at claim time
// and never deployed (no domain) is given back: nothing of the tenant's is on
// it.
Status detach_member(db::Conn& c, const Allocation& a, const std::string& node_id, const std::string& reason,
                     int64_t now, std::vector<EventDraft>& events) {
  Result<db::Rows> r =
      c.query(node_rows::node_select() + " WHERE id = $1" + claim_sql(c).lock, db::Binds().add(node_id));
  if (!r) return r.take_error();
  Result<std::vector<Node>> rows = node_rows::read_nodes(*r);
  if (!rows) return rows.take_error();
  if (rows->empty()) return ok_status();
  Node n = std::move(rows->front());
  if (!belongs_to(n, a)) return ok_status();
  if (needs_guest(n) && n.provision_state == ProvisionState::kAvailable && n.reservation.empty())
    if (Status g = host_rows::free_undefined_guest(c, n.id); !g) return g;
  const int64_t read_version = n.version;
  n = detached(std::move(n), now);
  if (Status s = write_node(c, n, read_version); !s) return s;
  EventDraft e = claim_event(n, a, event_type::kNodeReleased);
  e.detail["reason"] = reason;
  events.push_back(std::move(e));
  return ok_status();
}

// A trait with a NUL byte: no node can be matched against it on PostgreSQL,
// whose jsonb refuses \u0000, so both engines refuse it (kInvalidArgument
// naming it) rather than one claiming and the other failing.
std::optional<Error> untestable_trait(const Allocation& a) {
  for (std::size_t i = 0; i < a.traits.size(); ++i)
    if (a.traits[i].find('\0') != std::string::npos)
      return Error(Code::kInvalidArgument, "a trait must not contain a NUL byte",
                   {FieldError{"/traits/" + std::to_string(i), "must not contain a NUL byte"}});
  return std::nullopt;
}

// Allocations still being worked on: not released, and not failed unless a
// member has yet to leave (allocation_store.h).
constexpr const char kInFlightCondition[] =
    "(state NOT IN ('released', 'failed') OR (state = 'failed' AND EXISTS (SELECT 1 FROM "
    "allocation_members m WHERE m.allocation = allocations.id AND m.status != 'left')))";
constexpr const char kOldestFirst[] = " ORDER BY created_at, id";

// "$k, $k+1, ..." for `values`, bound in order onto `b`.
std::string in_list(db::Binds& b, std::span<const std::string> values) {
  std::string in;
  for (const std::string& v : values) {
    in += (in.empty() ? "$" : ", $") + std::to_string(b.next());
    b.add(v);
  }
  return in;
}

// Runs `per_batch` over `values` kMembersPerQuery at a time (binds well under
// both engines' limits on parameters).
Status in_batches(const std::vector<std::string>& values,
                  const std::function<Status(std::span<const std::string>)>& per_batch) {
  for (std::size_t from = 0; from < values.size(); from += kMembersPerQuery) {
    std::span<const std::string> batch(values.data() + from, std::min(kMembersPerQuery, values.size() - from));
    if (Status s = per_batch(batch); !s) return s;
  }
  return ok_status();
}

// The in-flight allocations of `scope` (all of them when nullopt), members
// filled, oldest first: those named, and those with a member (not left) among
// its nodes.
Result<std::vector<Allocation>> select_in_flight(db::Conn& c, const std::optional<AllocationScope>& scope) {
  if (!scope) return select_allocations(c, std::string(" WHERE ") + kInFlightCondition + kOldestFirst, {});
  std::set<std::string> ids(scope->ids.begin(), scope->ids.end());
  Status found = in_batches(scope->node_ids, [&](std::span<const std::string> nodes) -> Status {
    db::Binds b;
    std::string in = in_list(b, nodes);
    Result<db::Rows> r = c.query(
        "SELECT DISTINCT allocation FROM allocation_members WHERE status != 'left' AND node_id IN (" + in + ")", b);
    if (!r) return r.take_error();
    return db::each_row(*r, [&](const db::Rows& row) { ids.insert(row.text(0)); });
  });
  if (!found) return found.take_error();
  std::vector<Allocation> out;
  Status read = in_batches(std::vector<std::string>(ids.begin(), ids.end()),
                           [&](std::span<const std::string> batch) -> Status {
                             db::Binds b;
                             std::string in = in_list(b, batch);
                             Result<std::vector<Allocation>> some = select_allocations(
                                 c, " WHERE id IN (" + in + ") AND " + kInFlightCondition, b);
                             if (!some) return some.take_error();
                             for (Allocation& a : *some) out.push_back(std::move(a));
                             return ok_status();
                           });
  if (!read) return read.take_error();
  std::sort(out.begin(), out.end(), [](const Allocation& x, const Allocation& y) {
    return std::tie(x.created_at, x.id) < std::tie(y.created_at, y.id);
  });
  return out;
}

// The nodes of the members of `all` that have not left (a deleted node is
// simply absent).
Result<std::vector<Node>> select_member_nodes(db::Conn& c, const std::vector<Allocation>& all) {
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

// update_allocation_if and update_allocation_with_usage: the allocation's
// row locked, `mutate` run on it, the row written with version+1, the ledger
// writes and the events (`append_events`, given the tenant), in the caller's
// transaction on `c`.
Result<Allocation> update_locked(db::Conn& c, std::string_view id, std::optional<int64_t> expected_version,
                                 const std::function<Status(Allocation&, LedgerWrites&)>& mutate, int64_t now,
                                 const std::function<Status(const std::string& tenant)>& append_events) {
  Result<Allocation> cur = lock_allocation(c, id);
  if (!cur) return cur;
  if (expected_version && *expected_version != cur->version)
    return allocation_modified(cur->version, *expected_version);
  Allocation a = *cur;
  LedgerWrites ledger;
  if (mutate) {
    if (Status s = mutate(a, ledger); !s) return s.take_error();
  }
  a = allocation_after_mutate(*cur, std::move(a), now);
  if (Status s = write_allocation(c, a, /*insert=*/false); !s) return s.take_error();
  if (ledger.close_at) {
    if (Status s = usage_rows::close_rows(c, a.id, "", *ledger.close_at); !s) return s.take_error();
  }
  if (Status s = usage_rows::open_rows(c, ledger.open); !s) return s.take_error();
  if (Status s = append_events(a.tenant); !s) return s.take_error();
  return a;
}

}  // namespace

Result<Allocation> SqlStore::create_allocation(const Allocation& allocation, const std::vector<EventDraft>& events,
                                               const VirtualNodeMaker* vms) {
  if (std::optional<Error> e = untestable_trait(allocation)) return std::move(*e);
  return write_value<Allocation>([&](Tx& tx) -> Result<Allocation> {
    db::Conn& c = tx.conn;
    Allocation a = allocation;
    a.created_at = a.updated_at = now_ms();
    a.version = 1;
    a.members.clear();

    // The quota, against what the tenant's nodes count now (claims included),
    // read after the tenant's row is locked: the previous claim of this
    // tenant has committed (its nodes count) or rolled back.
    if (Status s = lock_tenant(c, a.tenant); !s) return s.take_error();
    int64_t max_nodes = 0;  // NULL (no quota) reads 0
    int64_t in_use = 0;
    {
      Result<db::Rows> q = c.query(
          "SELECT (SELECT max_nodes FROM tenant_quotas WHERE tenant = $1 AND profile = $2 AND kind = $3), "
          "(SELECT count(*) FROM nodes WHERE tenant = $1 AND profile = $2 AND kind = $3)",
          db::Binds().add(a.tenant).add(a.profile).add(to_string(a.kind)));
      if (!q) return q.take_error();
      if (Result<bool> row = q->next(); !row) return row.take_error();
      max_nodes = q->int64(0);
      in_use = q->int64(1);
    }
    if (over_quota(a, max_nodes, in_use)) return quota_exceeded(a, max_nodes, in_use);

    if (Status s = write_allocation(c, a, /*insert=*/true); !s) return s.take_error();
    std::vector<EventDraft> all = events;
    Result<std::vector<Node>> claimed = claim_nodes(c, a, a.count, a.created_at, all, vms);
    if (!claimed) return claimed.take_error();
    if (Status m = load_members(c, a); !m) return m.take_error();
    if (Status s = append_tx_events(tx, all, nullptr, a.tenant); !s) return s.take_error();
    return a;
  });
}

Result<Allocation> SqlStore::get_allocation(std::string_view id_or_name, std::string_view tenant) {
  Result<AllocationRef> key = allocation_ref(id_or_name, tenant);
  if (!key) return key.take_error();
  return snapshot_value<Allocation>([&](db::Conn& c) -> Result<Allocation> {
    // Every row the reference could mean (key columns only: a name a CI job
    // reuses may have many released rows), then the one choose_allocation
    // picks, with its members.
    Result<db::Rows> r = c.query(
        "SELECT id, tenant, state = 'released', created_at FROM allocations "
        "WHERE ($1 <> '' AND id = $1) OR (name = $2 AND ($3 = '' OR tenant = $3))",
        db::Binds().add(key->id).add(key->name).add(key->tenant));
    if (!r) return r.take_error();
    Result<std::vector<AllocationMatch>> matches = db::collect<AllocationMatch>(*r, [](const db::Rows& m) {
      return AllocationMatch{m.text(0), m.text(1), m.boolean(2), m.int64(3)};
    });
    if (!matches) return matches.take_error();
    Result<std::string> id = choose_allocation(*matches, *key, id_or_name);
    if (!id) return id.take_error();
    Result<std::vector<Allocation>> chosen = select_allocations(c, " WHERE id = $1", db::Binds().add(*id));
    if (!chosen) return chosen.take_error();
    if (chosen->empty()) return allocation_not_found(id_or_name);
    return std::move(chosen->front());
  });
}

Result<std::vector<Allocation>> SqlStore::list_allocations(const AllocationFilter& filter) {
  return snapshot_value<std::vector<Allocation>>([&](db::Conn& c) {
    std::string where = " WHERE 1 = 1";
    db::Binds b;
    if (filter.tenant) {
      where += " AND tenant = $" + std::to_string(b.next());
      b.add(*filter.tenant);
    }
    if (filter.state) {
      where += " AND state = $" + std::to_string(b.next());
      b.add(to_string(*filter.state));
    }
    return select_allocations(c, where + " ORDER BY created_at, id", b);
  });
}

Result<std::vector<Allocation>> SqlStore::allocations_in_flight() {
  return snapshot_value<std::vector<Allocation>>([&](db::Conn& c) { return select_in_flight(c, std::nullopt); });
}

Result<AllocationsWithNodes> SqlStore::in_flight_with_nodes(const std::optional<AllocationScope>& scope) {
  return snapshot_value<AllocationsWithNodes>([&](db::Conn& c) -> Result<AllocationsWithNodes> {
    AllocationsWithNodes out;
    Result<std::vector<Allocation>> all = select_in_flight(c, scope);
    if (!all) return all.take_error();
    out.allocations = std::move(*all);
    Result<std::vector<Node>> nodes = select_member_nodes(c, out.allocations);
    if (!nodes) return nodes.take_error();
    out.nodes = std::move(*nodes);
    return out;
  });
}

Result<Allocation> SqlStore::update_allocation_if(std::string_view id, std::optional<int64_t> expected_version,
                                                  const std::function<Status(Allocation&)>& mutate,
                                                  const std::vector<EventDraft>& events) {
  return write_value<Allocation>([&](Tx& tx) -> Result<Allocation> {
    return update_locked(
        tx.conn, id, expected_version,
        [&](Allocation& a, LedgerWrites&) { return mutate ? mutate(a) : ok_status(); }, now_ms(),
        [&](const std::string& tenant) { return append_tx_events(tx, events, nullptr, tenant); });
  });
}

Result<Allocation> SqlStore::update_allocation_with_usage(
    std::string_view id, const std::function<Status(Allocation&, LedgerWrites&)>& mutate,
    const std::vector<EventDraft>& events) {
  return write_value<Allocation>([&](Tx& tx) -> Result<Allocation> {
    return update_locked(tx.conn, id, std::nullopt, mutate, now_ms(),
                         [&](const std::string& tenant) { return append_tx_events(tx, events, nullptr, tenant); });
  });
}

Result<Allocation> SqlStore::leave_member(std::string_view id, std::string_view node_id, MemberStatus status,
                                          const std::string& reason, bool replace,
                                          const std::vector<EventDraft>& events, const VirtualNodeMaker* vms) {
  return write_value<Allocation>([&](Tx& tx) -> Result<Allocation> {
    db::Conn& c = tx.conn;
    // A replacement adds a node to the tenant: it queues behind (and ahead
    // of) the tenant's claims as they do, the tenant row first, as they take it.
    if (replace) {
      if (Status s = lock_tenant_of(c, id); !s) return s.take_error();
    }
    Result<Allocation> cur = lock_allocation(c, id);
    if (!cur) return cur;
    Allocation a = std::move(*cur);
    const int64_t now = now_ms();
    const std::string node(node_id);
    std::vector<EventDraft> all = events;

    Result<int64_t> left = c.exec(
        "UPDATE allocation_members SET status = $3, reason = $4, left_at = $5 WHERE allocation = $1 AND node_id = $2",
        db::Binds().add(a.id).add(node).add(to_string(status)).add(reason)
            .add(status == MemberStatus::kLeft ? now : int64_t{0}));
    if (!left) return left.take_error();
    if (*left == 0) return not_a_member(node, a.id);
    if (status == MemberStatus::kLeft) {
      if (Status s = detach_member(c, a, node, reason, now, all); !s) return s.take_error();
    }

    if (replace) {
      if (a.replacements >= a.count) return replacements_used(a);
      Result<std::vector<Node>> claimed = claim_nodes(c, a, 1, now, all, vms);
      if (!claimed) {
        if (claimed.error().code != Code::kConflict) return claimed.take_error();
        return no_replacement(a, claimed.error());
      }
      a.replacements += 1;
      a.version += 1;
      a.updated_at = std::max(now, a.updated_at);
      if (Status s = write_allocation(c, a, /*insert=*/false); !s) return s.take_error();
    }
    if (Status m = load_members(c, a); !m) return m.take_error();
    if (Status s = append_tx_events(tx, all, nullptr, a.tenant); !s) return s.take_error();
    return a;
  });
}

Result<std::map<std::string, int64_t>> SqlStore::count_allocations_by_state() {
  using Counts = std::map<std::string, int64_t>;
  return read_value<Counts>([&](db::Conn& c) -> Result<Counts> {
    Result<db::Rows> r = c.query("SELECT state, count(*) FROM allocations GROUP BY state");
    if (!r) return r.take_error();
    Counts out;
    Status walked = db::each_row(*r, [&](const db::Rows& row) { out[row.text(0)] = row.int64(1); });
    if (!walked) return walked.take_error();
    return out;
  });
}

}  // namespace kiln
