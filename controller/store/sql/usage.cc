#include <string>
#include <utility>

#include "controller/store/sql/sql_store.h"
#include "controller/store/sql/usage_rows.h"
#include "controller/store/store_rules.h"

namespace kiln {

// SqlStore: the usage ledger (AllocationStore; allocation_store.h) and its
// rows (usage_rows.h). A row is opened when a member is handed over and
// closed once, when it leaves; the partial unique index usage_open keeps one
// open row per (allocation, node).

namespace {

Result<UsageRecord> read_usage(const db::Rows& r) {
  UsageRecord u;
  u.id = r.int64(0);
  u.allocation = r.text(1);
  u.node_id = r.text(2);
  u.tenant = r.text(3);
  u.profile = r.text(4);
  if (Status s = store_rules::read_stored_enum(r.text(5), parse_node_kind, "usage row", std::to_string(u.id), "kind",
                                               u.kind);
      !s)
    return s.take_error();
  u.started_at = r.int64(6);
  if (!r.is_null(7)) u.ended_at = r.int64(7);
  u.price_micros_per_second = r.int64(8);
  return u;
}

}  // namespace

Status usage_rows::open_rows(db::Conn& c, const std::vector<UsageRecord>& rows) {
  for (const UsageRecord& u : rows) {
    // An open row of the same (allocation, node) is kept (usage_open).
    Result<int64_t> r = c.exec(
        "INSERT INTO usage_records (allocation, node_id, tenant, profile, kind, started_at, "
        "price_micros_per_second) VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT DO NOTHING",
        db::Binds().add(u.allocation).add(u.node_id).add(u.tenant).add(u.profile).add(to_string(u.kind)).add(u.started_at)
            .add(u.price_micros_per_second));
    if (!r) return r.take_error();
  }
  return ok_status();
}

Status usage_rows::close_rows(db::Conn& c, std::string_view allocation, std::string_view node_id, int64_t at_ms) {
  Result<int64_t> r = c.exec(
      "UPDATE usage_records SET ended_at = CASE WHEN started_at > $3 THEN started_at ELSE $3 END "
      "WHERE allocation = $1 AND ended_at IS NULL AND ($2 = '' OR node_id = $2)",
      db::Binds().add(allocation).add(node_id).add(at_ms));
  if (!r) return r.take_error();
  return ok_status();
}

Status SqlStore::open_usage(const std::vector<UsageRecord>& rows) {
  return write([&](Tx& tx) { return usage_rows::open_rows(tx.conn, rows); });
}

Status SqlStore::close_usage(std::string_view allocation, std::string_view node_id, int64_t at_ms) {
  return autocommit([&](db::Conn& c) { return usage_rows::close_rows(c, allocation, node_id, at_ms); });
}

Result<std::vector<UsageRecord>> SqlStore::list_usage(const UsageFilter& filter) {
  return read_value<std::vector<UsageRecord>>([&](db::Conn& c) -> Result<std::vector<UsageRecord>> {
    std::string sql =
        "SELECT id, allocation, node_id, tenant, profile, kind, started_at, ended_at, price_micros_per_second "
        "FROM usage_records WHERE (ended_at IS NULL OR ended_at > $1)";
    db::Binds b;
    b.add(filter.from_ms);
    if (filter.to_ms > 0) {
      sql += " AND started_at < $" + std::to_string(b.next());
      b.add(filter.to_ms);
    }
    if (filter.tenant) {
      sql += " AND tenant = $" + std::to_string(b.next());
      b.add(*filter.tenant);
    }
    if (filter.allocation) {
      sql += " AND allocation = $" + std::to_string(b.next());
      b.add(*filter.allocation);
    }
    Result<db::Rows> r = c.query(sql + " ORDER BY started_at, id", b);
    if (!r) return r.take_error();
    return db::collect<UsageRecord>(*r, read_usage);
  });
}

}  // namespace kiln
