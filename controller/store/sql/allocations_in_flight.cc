#include <algorithm>
#include <functional>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "controller/store/sql/allocation_rows.h"
#include "controller/store/sql/sql_store.h"

namespace kiln {

using namespace allocation_rows;

// SqlStore: the allocations in flight, the allocation engine's reads
// (AllocationStore: allocations_in_flight, in_flight_with_nodes; contract in
// allocation_store.h): every in-flight allocation, or those a batch's events
// name or concern, with their members' nodes, in a few queries however many
// there are.

namespace {

constexpr const char kOldestFirst[] = " ORDER BY created_at, id";

// The in-flight allocations of `scope` (all of them when nullopt), members
// filled, oldest first: those named, and those with a member (not left) among
// its nodes.
Result<std::vector<Allocation>> select_in_flight(db::Conn& c, const std::optional<AllocationScope>& scope) {
  if (!scope) return select_allocations(c, " WHERE " + in_flight_condition() + kOldestFirst, {});
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
                                 c, " WHERE id IN (" + in + ") AND " + in_flight_condition(), b);
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

}  // namespace

Result<std::vector<Allocation>> SqlStore::allocations_in_flight() {
  return snapshot_value<std::vector<Allocation>>([&](db::Conn& c) { return select_in_flight(c, std::nullopt); });
}

Result<AllocationsWithNodes> SqlStore::in_flight_with_nodes(const std::optional<AllocationScope>& scope) {
  return snapshot_value<AllocationsWithNodes>([&](db::Conn& c) -> Result<AllocationsWithNodes> {
    AllocationsWithNodes out;
    Result<std::vector<Allocation>> all = select_in_flight(c, scope);
    if (!all) return all.take_error();
    out.allocations = std::move(*all);
    Result<std::vector<Node>> nodes = select_member_nodes(c, std::span<const Allocation>(out.allocations));
    if (!nodes) return nodes.take_error();
    out.nodes = std::move(*nodes);
    return out;
  });
}

}  // namespace kiln
