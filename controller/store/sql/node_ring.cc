// SqlStore: the nodes an instance owns on the conductor ring, read by their
// stored ring position (migration 025_ring_position): power sync's pages and
// GET /v1/conductors' counts go through the (ring_pos, id) index and read
// only what they need, where they used to read every node and drop the
// others' in C++.
//
// A node not placed yet (ring_pos NULL: written by a kilnd from before the
// column, or moved by one since) is anyone's: every reader gets it, and the
// caller decides its owner from its ownership key, as before. The store
// places such nodes when it opens (place_nodes_on_ring).

#include <algorithm>
#include <iterator>
#include <string>
#include <utility>
#include <vector>

#include "controller/model/ring_position.h"
#include "controller/store/sql/node_rows.h"
#include "controller/store/sql/sql_store.h"
#include "controller/store/store_rules.h"

namespace kiln {

namespace {

// The arcs of the JSON parameter $1 ([[first, last, member], ...]) as rows
// (lo, hi, m), per engine. Both plan the count below as a loop over these
// rows with an index-only range scan of nodes_by_ring for each.
const char* ranges_table(const db::Conn& c) {
  return c.dialect().engine == db::Engine::kSqlite
             ? "(SELECT json_extract(value, '$[0]') AS lo, json_extract(value, '$[1]') AS hi,"
               " json_extract(value, '$[2]') AS m FROM json_each($1))"
             : "(SELECT (e->>0)::bigint AS lo, (e->>1)::bigint AS hi, (e->>2)::bigint AS m"
               " FROM jsonb_array_elements($1::jsonb) e)";
}

}  // namespace

Result<std::vector<PowerSyncNode>> SqlStore::power_sync_nodes(const std::vector<RingRange>& ranges,
                                                              const RingCursor& after, int limit) {
  Result<int> lim = store_rules::checked_limit(limit);
  if (!lim) return lim.take_error();
  // One index range scan per range, in order, until the page is full: each
  // row is read once, whatever the engine's planner would make of the
  // ranges in one statement (PostgreSQL walked the whole index in order and
  // tested every row against every range: 0.2 s a page at 10,000 nodes).
  static const std::string unplaced =
      node_rows::power_sync_select() + " WHERE ring_pos IS NULL AND id > $1 ORDER BY id LIMIT $2";
  static const std::string in_range =
      node_rows::power_sync_select() + " WHERE ring_pos BETWEEN $1 AND $2 ORDER BY ring_pos, id LIMIT $3";
  // The range holding the cursor, from the cursor on ($1 is its position).
  static const std::string from_cursor = node_rows::power_sync_select() +
                                         " WHERE ring_pos BETWEEN $1 AND $2 AND (ring_pos > $1 OR id > $3)"
                                         " ORDER BY ring_pos, id LIMIT $4";
  return read_value<std::vector<PowerSyncNode>>([&](db::Conn& c) -> Result<std::vector<PowerSyncNode>> {
    std::vector<PowerSyncNode> page;
    auto take = [&](Result<db::Rows> r) -> Status {
      if (!r) return r.take_error();
      Result<std::vector<PowerSyncNode>> rows = node_rows::read_power_sync_nodes(*r);
      if (!rows) return rows.take_error();
      std::move(rows->begin(), rows->end(), std::back_inserter(page));
      return ok_status();
    };
    if (!after.position) {
      if (Status s = take(c.query(unplaced, db::Binds().add(after.id).add(int64_t{*lim}))); !s) return s.take_error();
    }
    for (const RingRange& range : ranges) {
      const int64_t room = *lim - static_cast<int64_t>(page.size());
      if (room == 0) break;
      if (after.position && range.last < *after.position) continue;  // behind the cursor
      Status s = after.position && *after.position >= range.first
                     ? take(c.query(from_cursor, db::Binds().add(*after.position).add(range.last).add(after.id).add(room)))
                     : take(c.query(in_range, db::Binds().add(range.first).add(range.last).add(room)));
      if (!s) return s.take_error();
    }
    return page;
  });
}

Result<RingCounts> SqlStore::count_nodes_on_ring(const std::vector<RingArc>& arcs) {
  nlohmann::json list = nlohmann::json::array();
  std::size_t members = 0;
  for (const RingArc& a : arcs) {
    list.push_back({a.range.first, a.range.last, a.member});
    members = std::max(members, a.member + 1);
  }
  return snapshot_value<RingCounts>([&](db::Conn& c) -> Result<RingCounts> {
    RingCounts out;
    out.per_member.assign(members, 0);
    if (!arcs.empty()) {
      Result<db::Rows> r = c.query("SELECT r.m, count(*) FROM nodes JOIN " + std::string(ranges_table(c)) +
                                       " AS r ON ring_pos BETWEEN r.lo AND r.hi GROUP BY r.m",
                                   db::Binds().add(list.dump()));
      if (!r) return r.take_error();
      Status s = db::each_row(*r, [&](const db::Rows& row) -> Status {
        const int64_t m = row.int64(0);
        if (m < 0 || static_cast<std::size_t>(m) >= members)
          return Error(Code::kInternal, "store: a ring count for member " + std::to_string(m));
        out.per_member[static_cast<std::size_t>(m)] = row.int64(1);
        return ok_status();
      });
      if (!s) return s.take_error();
    }
    Result<db::Rows> u = c.query("SELECT id, allocation FROM nodes WHERE ring_pos IS NULL");
    if (!u) return u.take_error();
    Result<std::vector<std::string>> keys = db::collect<std::string>(
        *u, [](const db::Rows& row) { return std::string(ownership_key(row.text(0), row.text(1))); });
    if (!keys) return keys.take_error();
    out.unplaced = std::move(*keys);
    return out;
  });
}

Status SqlStore::place_nodes_on_ring() {
  constexpr int64_t kBatch = 500;
  std::string after;  // each node is looked at once per call, whatever happens to it meanwhile
  for (;;) {
    Result<int64_t> seen = write_value<int64_t>([&](Tx& tx) -> Result<int64_t> {
      Result<db::Rows> r = tx.conn.query(
          "SELECT id, allocation FROM nodes WHERE ring_pos IS NULL AND id > $1 ORDER BY id LIMIT $2",
          db::Binds().add(after).add(kBatch));
      if (!r) return r.take_error();
      using IdAndAllocation = std::pair<std::string, std::string>;
      Result<std::vector<IdAndAllocation>> nodes =
          db::collect<IdAndAllocation>(*r, [](const db::Rows& row) { return IdAndAllocation(row.text(0), row.text(1)); });
      if (!nodes) return nodes.take_error();
      for (const auto& [id, allocation] : *nodes) {
        // Only while the allocation is the one the position is computed
        // from: a concurrent writer's own position (or a move) wins.
        Result<int64_t> w = tx.conn.exec(
            "UPDATE nodes SET ring_pos = $2 WHERE id = $1 AND ring_pos IS NULL AND allocation = $3",
            db::Binds().add(id).add(ring_position(id, allocation)).add(allocation));
        if (!w) return w.take_error();
      }
      if (!nodes->empty()) after = nodes->back().first;
      return static_cast<int64_t>(nodes->size());
    });
    if (!seen) return seen.take_error();
    if (*seen < kBatch) return ok_status();
  }
}

}  // namespace kiln
