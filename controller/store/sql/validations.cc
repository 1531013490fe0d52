#include <string>

#include "controller/store/sql/sql_store.h"
#include "controller/store/store_rules.h"

namespace kiln {

// SqlStore: validation reports (ValidationStore; schemas/sql/<dialect>/
// 004_profiles_validations.sql).
//
// record_validation writes the report, the node's last_validation and the
// events in one transaction, so a node never points at a report that is not
// there. Reports are ordered by `seq` ("newest first" without clock ties),
// max(seq) + 1 taken at insert. Two recorders must not read the same max:
// SQLite's one writer already prevents it; on PostgreSQL concurrent
// recorders (threads, other kilnd) would, so the insert runs under a
// transaction lock (db::lock_tx, kValidationSeqLock) held until commit: the
// next recorder's max then sees this one's row. Recorders wait for each
// other only for that moment.

namespace {

using Binds = db::Binds;
using Rows = db::Rows;

// "kval" in ASCII; distinct from the migrations' key (pg/migrations.h).
constexpr int64_t kValidationSeqLock = 0x6b76616c;

// Row layout. kValidationColumns is the one list of report columns: each
// names a column, binds a record's field as a statement parameter and reads
// it back from a result column. SELECT reads the columns in this order;
// INSERT binds them in this order ($1 is the first). `seq` is the store's,
// not the record's: the INSERT writes it after these.
struct ValidationColumn {
  const char* name;
  void (*bind)(Binds& b, const ValidationRecord& v);
  void (*read)(const Rows& r, int c, ValidationRecord& v);
};

const ValidationColumn kValidationColumns[] = {
    {"id", [](Binds& b, const ValidationRecord& v) { b.add(v.id); },
     [](const Rows& r, int c, ValidationRecord& v) { v.id = r.text(c); }},
    {"node_id", [](Binds& b, const ValidationRecord& v) { b.add(v.node_id); },
     [](const Rows& r, int c, ValidationRecord& v) { v.node_id = r.text(c); }},
    {"profile", [](Binds& b, const ValidationRecord& v) { b.add(v.profile); },
     [](const Rows& r, int c, ValidationRecord& v) { v.profile = r.text(c); }},
    {"node_kind", [](Binds& b, const ValidationRecord& v) { b.add(v.node_kind); },
     [](const Rows& r, int c, ValidationRecord& v) { v.node_kind = r.text(c); }},
    {"plan", [](Binds& b, const ValidationRecord& v) { b.add(v.plan); },
     [](const Rows& r, int c, ValidationRecord& v) { v.plan = r.text(c); }},
    {"phase", [](Binds& b, const ValidationRecord& v) { b.add(v.phase); },
     [](const Rows& r, int c, ValidationRecord& v) { v.phase = r.text(c); }},
    {"result", [](Binds& b, const ValidationRecord& v) { b.add(v.result); },
     [](const Rows& r, int c, ValidationRecord& v) { v.result = r.text(c); }},
    {"attempt", [](Binds& b, const ValidationRecord& v) { b.add(v.attempt); },
     [](const Rows& r, int c, ValidationRecord& v) { v.attempt = static_cast<int>(r.int64(c)); }},
    {"started_at", [](Binds& b, const ValidationRecord& v) { b.add(v.started_at); },
     [](const Rows& r, int c, ValidationRecord& v) { v.started_at = r.int64(c); }},
    {"finished_at", [](Binds& b, const ValidationRecord& v) { b.add(v.finished_at); },
     [](const Rows& r, int c, ValidationRecord& v) { v.finished_at = r.int64(c); }},
    {"report", [](Binds& b, const ValidationRecord& v) { b.add(store_rules::json_text(v.report)); },
     [](const Rows& r, int c, ValidationRecord& v) { v.report = store_rules::validation_report_from_text(r.text(c)); }},
};
constexpr int kValidationColumnCount = sizeof(kValidationColumns) / sizeof(kValidationColumns[0]);

const std::vector<const char*>& validation_column_names() {
  static const std::vector<const char*> names = [] {
    std::vector<const char*> v;
    for (const ValidationColumn& c : kValidationColumns) v.push_back(c.name);
    return v;
  }();
  return names;
}

const std::string& validation_select() {
  static const std::string s = "SELECT " + store_rules::column_list(validation_column_names()) + " FROM validations";
  return s;
}

ValidationRecord read_validation(const Rows& r) {
  ValidationRecord v;
  int c = 0;
  for (const ValidationColumn& col : kValidationColumns) col.read(r, c++, v);
  return v;
}

Result<std::vector<ValidationRecord>> query_validations(db::Conn& c, const std::string& sql, const Binds& b) {
  Result<Rows> r = c.query(sql, b);
  if (!r) return r.take_error();
  return db::collect<ValidationRecord>(*r, read_validation);
}

}  // namespace

Result<ValidationRecord> SqlStore::record_validation(const ValidationRecord& record,
                                                     const std::vector<EventDraft>& events) {
  const int64_t now = now_ms();
  const ValidationRecord v = store_rules::validation_to_record(record, now);
  // "INSERT INTO validations (id, ..., report, seq) VALUES ($1, ..., $11,
  // kNextValidationSeqSql)".
  static const std::string insert = [] {
    std::string s = "INSERT INTO validations (" + store_rules::column_list(validation_column_names());
    s += ", seq) VALUES (";
    for (int i = 1; i <= kValidationColumnCount; ++i) s += "$" + std::to_string(i) + ", ";
    return s + store_rules::kNextValidationSeqSql + ")";
  }();
  Binds row;
  for (const ValidationColumn& col : kValidationColumns) col.bind(row, v);
  Status s = write([&](Tx& tx) -> Status {
    // One statement, so it cannot lose an update to a concurrent node write;
    // the row stays locked until commit, so the node cannot go meanwhile.
    Result<int64_t> up =
        tx.conn.exec("UPDATE nodes SET last_validation = $2, version = version + 1, updated_at = $3 WHERE id = $1",
                     Binds().add(v.node_id).add(v.id).add(now));
    if (!up) return up.take_error();
    if (*up == 0) return store_rules::node_not_found(v.node_id);
    if (Status l = db::lock_tx(tx.conn, kValidationSeqLock); !l) return l;
    if (Result<int64_t> ins = tx.conn.exec(insert, row); !ins) return ins.take_error();
    return append_tx_events(tx, store_rules::validation_events(events, v.node_id), nullptr, "");
  });
  if (!s) return s.take_error();
  return v;
}

Result<ValidationRecord> SqlStore::get_validation(std::string_view id, std::string_view tenant) {
  Binds b;
  b.add(store_rules::lower(id));  // ids are stored lowercase and matched in any case
  std::string sql = validation_select() + " WHERE id = $1";
  if (!tenant.empty()) {
    sql += store_rules::tenant_report_sql(b.next());
    b.add(tenant);
  }
  return read_value<ValidationRecord>([&](db::Conn& c) {
    return db::query_one<ValidationRecord>(c, sql, b, read_validation,
                                           store_rules::validation_not_found(id).message);
  });
}

Result<std::vector<ValidationRecord>> SqlStore::list_validations(std::string_view node_id, std::string_view tenant,
                                                                 int limit, std::string_view marker) {
  Result<int> lim = store_rules::checked_limit(limit);
  if (!lim) return lim.take_error();
  Binds b;
  b.add(node_id).add(*lim);
  std::string sql = validation_select() + " WHERE node_id = $1";
  if (!marker.empty()) {
    sql += " AND seq < (SELECT seq FROM validations WHERE id = $" + std::to_string(b.next()) + ")";
    b.add(marker);
  }
  if (!tenant.empty()) {
    sql += store_rules::tenant_report_sql(b.next());
    b.add(tenant);
  }
  sql += " ORDER BY seq DESC LIMIT $2";
  return read_value<std::vector<ValidationRecord>>([&](db::Conn& c) { return query_validations(c, sql, b); });
}

Result<std::vector<ValidationRecord>> SqlStore::recent_passing_validations(std::string_view profile,
                                                                           NodeKind kind, int limit) {
  Result<int> lim = store_rules::checked_limit(limit);
  if (!lim) return lim.take_error();
  const std::string sql =
      validation_select() + " WHERE profile = $1 AND node_kind = $2 AND result = 'pass' ORDER BY seq DESC LIMIT $3";
  const Binds b = Binds().add(profile).add(to_string(kind)).add(*lim);
  return read_value<std::vector<ValidationRecord>>([&](db::Conn& c) { return query_validations(c, sql, b); });
}

}  // namespace kiln
