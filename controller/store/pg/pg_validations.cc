#include <utility>

#include "controller/store/pg/pg_store.h"
#include "controller/store/store_rules.h"

namespace kiln {

using store_rules::json_text;

// PgStore: validation reports (ValidationStore), as sqlite_profiles.cc.
//
// record_validation writes the report, the node's last_validation and the
// events in one transaction, so a node never points at a report that is not
// there. Reports are ordered by `seq` ("newest first" without clock ties),
// max(seq) + 1 taken at insert. In SQLite the single writer makes that
// number unique; here concurrent recorders (threads, other kilnd) would read
// the same max, so the insert runs under a transaction-scoped advisory lock
// (kValidationSeqLockKey) held until commit: the next recorder's max then
// sees this one's row. Recorders wait for each other only for that moment.

namespace {

// "kval" in ASCII; distinct from the migrations' key (pg/migrations.h).
constexpr int64_t kValidationSeqLockKey = 0x6b76616c;

constexpr const char kValidationSelect[] =
    "SELECT id, node_id, profile, node_kind, plan, phase, result, attempt, started_at, finished_at, report"
    " FROM validations";

ValidationRecord read_validation(const pg::Rows& r, int row) {
  ValidationRecord v;
  v.id = r.text(row, 0);
  v.node_id = r.text(row, 1);
  v.profile = r.text(row, 2);
  v.node_kind = r.text(row, 3);
  v.plan = r.text(row, 4);
  v.phase = r.text(row, 5);
  v.result = r.text(row, 6);
  v.attempt = static_cast<int>(r.int64(row, 7));
  v.started_at = r.int64(row, 8);
  v.finished_at = r.int64(row, 9);
  v.report = store_rules::validation_report_from_text(r.text(row, 10));
  return v;
}

std::vector<ValidationRecord> read_validations(const pg::Rows& r) {
  std::vector<ValidationRecord> out;
  for (int i = 0; i < r.size(); ++i) out.push_back(read_validation(r, i));
  return out;
}

}  // namespace

Result<ValidationRecord> PgStore::record_validation(const ValidationRecord& record,
                                                    const std::vector<EventDraft>& events) {
  const int64_t now = now_ms();
  const ValidationRecord v = store_rules::validation_to_record(record, now);
  Result<Lease> l = lease();
  if (!l) return l.take_error();
  pg::Connection& c = l->conn();
  Result<pg::Transaction> tx = pg::Transaction::begin(c);
  if (!tx) return tx.take_error();
  // One statement, so it cannot lose an update to a concurrent node write;
  // the row stays locked until commit, so the node cannot go meanwhile.
  Result<pg::Rows> up = c.exec(
      "UPDATE nodes SET last_validation = $2, version = version + 1, updated_at = $3 WHERE id = $1",
      pg::Params().add(v.node_id).add(v.id).add(now));
  if (!up) return up.take_error();
  if (up->affected() == 0) return store_rules::node_not_found(v.node_id);
  Result<pg::Rows> lock = c.exec("SELECT pg_advisory_xact_lock($1)", pg::Params().add(kValidationSeqLockKey));
  if (!lock) return lock.take_error();
  Result<pg::Rows> ins = c.exec(
      "INSERT INTO validations (id, node_id, profile, node_kind, plan, phase, result, attempt, started_at,"
      " finished_at, report, seq) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11,"
      " (SELECT coalesce(max(seq), 0) + 1 FROM validations))",
      pg::Params()
          .add(v.id)
          .add(v.node_id)
          .add(v.profile)
          .add(v.node_kind)
          .add(v.plan)
          .add(v.phase)
          .add(v.result)
          .add(v.attempt)
          .add(v.started_at)
          .add(v.finished_at)
          .add(json_text(v.report)));
  if (!ins) return ins.take_error();
  Result<int64_t> seq = insert_events(c, store_rules::validation_events(events, v.node_id), nullptr, "");
  if (!seq) return seq.take_error();
  if (Status s = tx->commit(); !s) return s.take_error();
  if (*seq > 0) notify(*seq);
  return v;
}

Result<ValidationRecord> PgStore::get_validation(std::string_view id, std::string_view tenant) {
  Result<Lease> l = lease();
  if (!l) return l.take_error();
  std::string sql = std::string(kValidationSelect) + " WHERE id = $1";
  pg::Params p;
  p.add(store_rules::lower(id));
  if (!tenant.empty()) {
    sql += store_rules::tenant_report_sql('$', p.next_index());
    p.add(tenant);
  }
  Result<pg::Rows> r = l->conn().exec(sql, p);
  if (!r) return r.take_error();
  if (r->empty()) return store_rules::validation_not_found(id);
  return read_validation(*r, 0);
}

Result<std::vector<ValidationRecord>> PgStore::list_validations(std::string_view node_id, std::string_view tenant,
                                                                int limit, std::string_view marker) {
  Result<int> lim = store_rules::checked_limit(limit);
  if (!lim) return lim.take_error();
  pg::Params p;
  p.add(node_id).add(*lim);
  std::string sql = std::string(kValidationSelect) + " WHERE node_id = $1";
  if (!marker.empty()) {
    sql += " AND seq < (SELECT seq FROM validations WHERE id = $3)";
    p.add(marker);
  }
  if (!tenant.empty()) {
    sql += store_rules::tenant_report_sql('$', p.next_index());
    p.add(tenant);
  }
  sql += " ORDER BY seq DESC LIMIT $2";
  Result<Lease> l = lease();
  if (!l) return l.take_error();
  Result<pg::Rows> r = l->conn().exec(sql, p);
  if (!r) return r.take_error();
  return read_validations(*r);
}

Result<std::vector<ValidationRecord>> PgStore::recent_passing_validations(std::string_view profile,
                                                                          std::string_view kind, int limit) {
  Result<int> lim = store_rules::checked_limit(limit);
  if (!lim) return lim.take_error();
  Result<Lease> l = lease();
  if (!l) return l.take_error();
  Result<pg::Rows> r = l->conn().exec(
      std::string(kValidationSelect) +
          " WHERE profile = $1 AND node_kind = $2 AND result = 'pass' ORDER BY seq DESC LIMIT $3",
      pg::Params().add(profile).add(kind).add(*lim));
  if (!r) return r.take_error();
  return read_validations(*r);
}

}  // namespace kiln
