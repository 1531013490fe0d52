#include <functional>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "controller/model/allocation_states.h"
#include "controller/store/sql/allocation_rows.h"
#include "controller/store/sql/sql_store.h"
#include "controller/store/sql/usage_rows.h"
#include "controller/store/store_rules.h"

namespace kiln {

using namespace store_rules;
using namespace allocation_rows;

// SqlStore: reading and updating allocations (AllocationStore: get, get
// with its members' nodes, list, update_allocation_if,
// update_allocation_with_usage, the counts by state; contract in
// allocation_store.h). The claim on nodes and members leaving
// are in sql/allocation_claims.cc, the engine's reads of the allocations in
// flight in sql/allocations_in_flight.cc, the row layout in
// sql/allocation_rows.h, the usage ledger in sql/usage.cc.

namespace {

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

// The allocation `key` means (choose_allocation), members filled, read on
// `c`: the row with the id, if any; only without one is the reference a name.
// Both through an index.
Result<Allocation> find_allocation(db::Conn& c, const AllocationRef& key, std::string_view ref) {
  if (!key.id.empty()) {
    Result<std::vector<Allocation>> by_id = select_allocations(c, " WHERE id = $1", db::Binds().add(key.id));
    if (!by_id) return by_id.take_error();
    if (!by_id->empty()) return std::move(by_id->front());
  }
  Result<db::Rows> r = c.query(kAllocationsNamedSql, db::Binds().add(key.name).add(key.tenant));
  if (!r) return r.take_error();
  Result<std::vector<AllocationMatch>> matches = db::collect<AllocationMatch>(*r, [](const db::Rows& m) {
    return AllocationMatch{m.text(0), m.text(1), m.boolean(2), m.int64(3)};
  });
  if (!matches) return matches.take_error();
  Result<std::string> id = choose_allocation(*matches, key, ref);
  if (!id) return id.take_error();
  Result<std::vector<Allocation>> chosen = select_allocations(c, " WHERE id = $1", db::Binds().add(*id));
  if (!chosen) return chosen.take_error();
  if (chosen->empty()) return allocation_not_found(ref);
  return std::move(chosen->front());
}

}  // namespace

Result<Allocation> SqlStore::get_allocation(std::string_view id_or_name, std::string_view tenant) {
  Result<AllocationRef> key = allocation_ref(id_or_name, tenant);
  if (!key) return key.take_error();
  return snapshot_value<Allocation>([&](db::Conn& c) { return find_allocation(c, *key, id_or_name); });
}

Result<AllocationWithNodes> SqlStore::get_allocation_with_nodes(std::string_view id_or_name,
                                                                std::string_view tenant) {
  Result<AllocationRef> key = allocation_ref(id_or_name, tenant);
  if (!key) return key.take_error();
  return snapshot_value<AllocationWithNodes>([&](db::Conn& c) -> Result<AllocationWithNodes> {
    Result<Allocation> a = find_allocation(c, *key, id_or_name);
    if (!a) return a.take_error();
    Result<std::vector<Node>> nodes = select_member_nodes(c, std::span<const Allocation>(&*a, 1));
    if (!nodes) return nodes.take_error();
    return AllocationWithNodes{std::move(*a), std::move(*nodes)};
  });
}

Result<std::vector<Node>> SqlStore::member_nodes(std::span<const Allocation> allocations) {
  return snapshot_value<std::vector<Node>>([&](db::Conn& c) { return select_member_nodes(c, allocations); });
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
