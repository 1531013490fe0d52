#include <algorithm>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "controller/model/allocation_states.h"
#include "controller/model/event_types.h"
#include "controller/model/node_allocation.h"
#include "controller/store/sql/allocation_rows.h"
#include "controller/store/sql/host_rows.h"
#include "controller/store/sql/node_rows.h"
#include "controller/store/sql/sql_store.h"
#include "controller/store/store_rules.h"

namespace kiln {

using json = nlohmann::json;
using namespace store_rules;
using namespace allocation_rows;

// SqlStore: an allocation's claim on nodes, and its members' departures and
// replacements (AllocationStore: create_allocation, leave_member,
// leave_members; contract
// in allocation_store.h).
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

namespace {

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
// each locked in that order. Never one that was already the allocation's
// member: its member row is kept (who served, why it left), and a node
// replaced after it was cleaned back to the pool is the oldest there.
Result<std::vector<Node>> lock_claimable_nodes(db::Conn& c, const Allocation& a, int64_t want) {
  const bool limited = want != std::numeric_limits<int64_t>::max();
  const std::string q = claimable_nodes_sql(c.dialect().engine, limited);
  db::Binds b;
  b.add(a.profile).add(to_string(a.kind)).add(json_text(json(a.traits))).add(a.id);
  if (limited) b.add(want);
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

// Member `node` of `a`, whose row the transaction has locked (its members'
// writers all hold it) moves to `status` with `reason`; once it has left,
// its node is detached (node.released into `events`). A caller acting on an
// older read (a reconcile that judged a state another has moved on from) is
// refused before anything is written: kPreconditionFailed when the member
// may not move so (member_may_move; with `replace`, it must still be a
// member), kNotFound when `node` is not a member.
Status move_member(db::Conn& c, const Allocation& a, const std::string& node, MemberStatus status,
                   const std::string& reason, bool replace, int64_t now, std::vector<EventDraft>& events) {
  Result<std::vector<MemberStatus>> row = [&]() -> Result<std::vector<MemberStatus>> {
    Result<db::Rows> r = c.query("SELECT status FROM allocation_members WHERE allocation = $1 AND node_id = $2",
                                 db::Binds().add(a.id).add(node));
    if (!r) return r.take_error();
    return db::collect<MemberStatus>(*r, [&](const db::Rows& m) -> Result<MemberStatus> {
      MemberStatus st = MemberStatus::kMember;
      if (Status ok = read_stored_enum(m.text(0), parse_member_status, "member", node, "status", st); !ok)
        return ok.take_error();
      return st;
    });
  }();
  if (!row) return row.take_error();
  if (row->empty()) return not_a_member(node, a.id);
  const MemberStatus was = row->front();
  if (!member_may_move(was, status) || (replace && was != MemberStatus::kMember)) return member_moved(node, a.id, was);
  Result<int64_t> left = c.exec(
      "UPDATE allocation_members SET status = $3, reason = $4, left_at = $5 "
      "WHERE allocation = $1 AND node_id = $2 AND status = $6",
      db::Binds().add(a.id).add(node).add(to_string(status)).add(reason)
          .add(status == MemberStatus::kLeft ? now : int64_t{0}).add(to_string(was)));
  if (!left) return left.take_error();
  if (*left != 1)
    return Error(Code::kInternal, "store: member " + node + " of allocation " + a.id + " changed under its lock");
  if (status == MemberStatus::kLeft) return detach_member(c, a, node, reason, now, events);
  return ok_status();
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
      Result<db::Rows> q = c.query(kQuotaAndUseSql, db::Binds().add(a.tenant).add(a.profile).add(to_string(a.kind)));
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
    std::vector<EventDraft> all = events;
    if (Status s = move_member(c, a, std::string(node_id), status, reason, replace, now, all); !s)
      return s.take_error();

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

Result<MembersLeft> SqlStore::leave_members(std::string_view id, const std::vector<MemberLeave>& leaves) {
  return write_value<MembersLeft>([&](Tx& tx) -> Result<MembersLeft> {
    db::Conn& c = tx.conn;
    Result<Allocation> cur = lock_allocation(c, id);
    if (!cur) return cur.take_error();
    MembersLeft out{std::move(*cur), std::vector<bool>(leaves.size(), false)};
    const int64_t now = now_ms();
    std::vector<EventDraft> all;
    for (std::size_t i = 0; i < leaves.size(); ++i) {
      const MemberLeave& l = leaves[i];
      Status moved = move_member(c, out.allocation, l.node_id, l.status, l.reason, /*replace=*/false, now, all);
      // Refused before writing anything: this one stays as it is, the others go on.
      if (!moved && (moved.error().code == Code::kPreconditionFailed || moved.error().code == Code::kNotFound))
        continue;
      if (!moved) return moved.take_error();
      out.moved[i] = true;
    }
    if (Status m = load_members(c, out.allocation); !m) return m.take_error();
    if (Status s = append_tx_events(tx, all, nullptr, out.allocation.tenant); !s) return s.take_error();
    return out;
  });
}

}  // namespace kiln
