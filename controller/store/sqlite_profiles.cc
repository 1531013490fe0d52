// SqliteStore: hardware profiles and validation reports
// (schemas/sql/sqlite/004_profiles_validations.sql, issue 6).
//
// Same connection rules as the rest of the store (on_writer / on_reader:
// one writer under writer_mu_, readers from the pool). record_validation is
// the one multi-table write: the report row, the node's last_validation and
// the events commit together, so a node never points at a report that is not
// there.

#include "controller/store/sqlite_node_rows.h"
#include "controller/store/sqlite_rows.h"
#include "controller/store/sqlite_store.h"

namespace kiln {

using store_rows::query_int;
using store_rows::run_with;
using store_rules::kClaimableNodeSql;
using store_rules::profile_not_found;

namespace {

using nlohmann::json;

constexpr const char kProfileColumns[] = "name, doc, created_at, updated_at, version";
constexpr const char kValidationColumns[] =
    "id, node_id, profile, node_kind, plan, phase, result, attempt, started_at, finished_at, report";

Profile read_profile(const sql::Statement& s) {
  Profile p;
  p.name = s.column_text(0);
  p.doc = store_rules::profile_doc_from_text(s.column_text(1), p.name);
  p.created_at = s.column_int64(2);
  p.updated_at = s.column_int64(3);
  p.version = s.column_int64(4);
  return p;
}

ValidationRecord read_validation(const sql::Statement& s) {
  ValidationRecord v;
  v.id = s.column_text(0);
  v.node_id = s.column_text(1);
  v.profile = s.column_text(2);
  v.node_kind = s.column_text(3);
  v.plan = s.column_text(4);
  v.phase = s.column_text(5);
  v.result = s.column_text(6);
  v.attempt = static_cast<int>(s.column_int64(7));
  v.started_at = s.column_int64(8);
  v.finished_at = s.column_int64(9);
  v.report = store_rules::validation_report_from_text(s.column_text(10));
  return v;
}

std::string doc_text(const Profile& p) { return store_rules::json_text(store_rules::profile_doc(p)); }

bool is_name_conflict(const Error& e) {
  return e.code == Code::kConflict && e.message.find("profiles.name") != std::string::npos;
}

Status insert_profile(sql::Database& db, const Profile& p) {
  Result<sql::StatementRef> st = db.prepare(std::string("INSERT INTO profiles (") + kProfileColumns +
                                            ") VALUES (?1, ?2, ?3, ?4, ?5)");
  if (!st) return st.take_error();
  (*st)->bind(1, p.name).bind(2, doc_text(p)).bind(3, p.created_at).bind(4, p.updated_at).bind(5, p.version);
  Status run = (*st)->run();
  if (!run) {
    Error e = run.take_error();
    if (is_name_conflict(e)) return store_rules::profile_name_taken(p.name);
    return e;
  }
  return ok_status();
}

Result<Profile> select_profile(sql::Database& db, std::string_view name) {
  Result<sql::StatementRef> st =
      db.prepare(std::string("SELECT ") + kProfileColumns + " FROM profiles WHERE name = ?1");
  if (!st) return st.take_error();
  (*st)->bind(1, name);
  Result<bool> row = (*st)->step();
  if (!row) return row.take_error();
  if (!*row) return profile_not_found(name);
  return read_profile(**st);
}

Status read_validations(sql::StatementRef& st, std::vector<ValidationRecord>& out) {
  while (true) {
    Result<bool> row = st->step();
    if (!row) return row.take_error();
    if (!*row) return ok_status();
    out.push_back(read_validation(*st));
  }
}

}  // namespace

Result<Profile> SqliteStore::create_profile(const Profile& profile) {
  Result<Profile> p = store_rules::profile_to_create(profile, now_ms());
  if (!p) return p;
  Status s = on_writer([&](sql::Database& db) { return insert_profile(db, *p); });
  if (!s) return s.take_error();
  return p;
}

Result<Profile> SqliteStore::get_profile(std::string_view name) {
  Profile out;
  Status s = on_reader([&](sql::Database& db) -> Status {
    Result<Profile> p = select_profile(db, name);
    if (!p) return p.take_error();
    out = std::move(*p);
    return ok_status();
  });
  if (!s) return s.take_error();
  return out;
}

Result<std::vector<Profile>> SqliteStore::list_profiles() {
  std::vector<Profile> out;
  Status s = on_reader([&](sql::Database& db) -> Status {
    Result<sql::StatementRef> st =
        db.prepare(std::string("SELECT ") + kProfileColumns + " FROM profiles ORDER BY name");
    if (!st) return st.take_error();
    while (true) {
      Result<bool> row = (*st)->step();
      if (!row) return row.take_error();
      if (!*row) return ok_status();
      out.push_back(read_profile(**st));
    }
  });
  if (!s) return s.take_error();
  return out;
}

Result<Profile> SqliteStore::replace_profile(const Profile& profile, std::optional<int64_t> expected_version) {
  Profile out;
  const int64_t now = now_ms();
  Status s = on_writer([&](sql::Database& db) -> Status {
    Result<sql::Transaction> tx = sql::Transaction::begin_immediate(db);
    if (!tx) return tx.take_error();
    Result<Profile> cur = select_profile(db, profile.name);
    if (!cur) return cur.take_error();
    if (expected_version && *expected_version != cur->version)
      return store_rules::profile_version_mismatch(profile.name, cur->version, *expected_version);
    out = *cur;
    out.doc = store_rules::profile_doc(Profile{.name = out.name, .doc = profile.doc});
    out.updated_at = now;
    out.version = cur->version + 1;
    Result<sql::StatementRef> st =
        db.prepare("UPDATE profiles SET doc = ?2, updated_at = ?3, version = ?4 WHERE name = ?1");
    if (!st) return st.take_error();
    (*st)->bind(1, out.name).bind(2, doc_text(out)).bind(3, out.updated_at).bind(4, out.version);
    if (Status run = (*st)->run(); !run) return run;
    return tx->commit();
  });
  if (!s) return s.take_error();
  return out;
}

Status SqliteStore::delete_profile(std::string_view name) {
  return on_writer([&](sql::Database& db) -> Status {
    Result<sql::Transaction> tx = sql::Transaction::begin_immediate(db);
    if (!tx) return tx.take_error();
    Result<int64_t> n = query_int(db, "SELECT count(*) FROM nodes WHERE profile = ?1", name);
    if (!n) return n.take_error();
    if (*n > 0) return store_rules::profile_in_use(name, *n);
    if (Status s = run_with(db, "DELETE FROM profiles WHERE name = ?1", name); !s) return s;
    if (db.changes() == 0) return profile_not_found(name);
    return tx->commit();
  });
}

Result<std::vector<std::string>> SqliteStore::seed_profiles(const std::vector<Profile>& defaults) {
  std::vector<std::string> created;
  const int64_t now = now_ms();
  Status s = on_writer([&](sql::Database& db) -> Status {
    Result<sql::Transaction> tx = sql::Transaction::begin_immediate(db);
    if (!tx) return tx.take_error();
    for (const Profile& d : defaults) {
      Result<sql::StatementRef> seen = db.prepare(
          "SELECT (SELECT count(*) FROM profile_defaults_seeded WHERE name = ?1) + "
          "(SELECT count(*) FROM profiles WHERE name = ?1)");
      if (!seen) return seen.take_error();
      (*seen)->bind(1, d.name);
      Result<bool> row = (*seen)->step();
      if (!row) return row.take_error();
      const int64_t known = *row ? (*seen)->column_int64(0) : 0;
      (*seen)->reset();
      if (known == 0) {
        Result<Profile> p = store_rules::profile_to_create(d, now);
        if (!p) return p.take_error();
        if (Status ins = insert_profile(db, *p); !ins) return ins;
        created.push_back(p->name);
      }
      Result<sql::StatementRef> mark =
          db.prepare("INSERT OR IGNORE INTO profile_defaults_seeded (name, seeded_at) VALUES (?1, ?2)");
      if (!mark) return mark.take_error();
      (*mark)->bind(1, d.name).bind(2, now);
      if (Status run = (*mark)->run(); !run) return run;
    }
    return tx->commit();
  });
  if (!s) return s.take_error();
  return created;
}

Result<ValidationRecord> SqliteStore::record_validation(const ValidationRecord& record,
                                                        const std::vector<EventDraft>& events) {
  const int64_t now = now_ms();
  const ValidationRecord v = store_rules::validation_to_record(record, now);
  Status s = on_writer([&](sql::Database& db) -> Status {
    Result<sql::Transaction> tx = sql::Transaction::begin_immediate(db);
    if (!tx) return tx.take_error();
    Result<sql::StatementRef> up = db.prepare(
        "UPDATE nodes SET last_validation = ?2, version = version + 1, updated_at = ?3 WHERE id = ?1");
    if (!up) return up.take_error();
    (*up)->bind(1, v.node_id).bind(2, v.id).bind(3, now);
    if (Status run = (*up)->run(); !run) return run;
    if (db.changes() == 0) return store_rules::node_not_found(v.node_id);
    Result<sql::StatementRef> st = db.prepare(
        std::string("INSERT INTO validations (") + kValidationColumns +
        ", seq) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, "
        "(SELECT ifnull(max(seq), 0) + 1 FROM validations))");
    if (!st) return st.take_error();
    (*st)->bind(1, v.id)
        .bind(2, v.node_id)
        .bind(3, v.profile)
        .bind(4, v.node_kind)
        .bind(5, v.plan)
        .bind(6, v.phase)
        .bind(7, v.result)
        .bind(8, static_cast<int64_t>(v.attempt))
        .bind(9, v.started_at)
        .bind(10, v.finished_at)
        .bind(11, store_rules::json_text(v.report));
    if (Status run = (*st)->run(); !run) return run;
    Result<int64_t> seq = insert_events(store_rules::validation_events(events, v.node_id), nullptr, "");
    if (!seq) return seq.take_error();
    if (Status c = tx->commit(); !c) return c;
    if (*seq > 0) notify(*seq);
    return ok_status();
  });
  if (!s) return s.take_error();
  return v;
}

Result<ValidationRecord> SqliteStore::get_validation(std::string_view id, std::string_view tenant) {
  ValidationRecord out;
  Status s = on_reader([&](sql::Database& db) -> Status {
    std::string sql = std::string("SELECT ") + kValidationColumns + " FROM validations WHERE id = lower(?1)";
    if (!tenant.empty()) sql += store_rules::tenant_report_sql('?', 2);
    Result<sql::StatementRef> st = db.prepare(sql);
    if (!st) return st.take_error();
    (*st)->bind(1, id);
    if (!tenant.empty()) (*st)->bind(2, tenant);
    Result<bool> row = (*st)->step();
    if (!row) return row.take_error();
    if (!*row) return store_rules::validation_not_found(id);
    out = read_validation(**st);
    return ok_status();
  });
  if (!s) return s.take_error();
  return out;
}

Result<std::vector<ValidationRecord>> SqliteStore::list_validations(std::string_view node_id, std::string_view tenant,
                                                                    int limit, std::string_view marker) {
  if (Result<int> lim = store_rules::checked_limit(limit); !lim) return lim.take_error();
  std::vector<ValidationRecord> out;
  Status s = on_reader([&](sql::Database& db) -> Status {
    std::string sql = std::string("SELECT ") + kValidationColumns + " FROM validations WHERE node_id = ?1";
    if (!marker.empty()) sql += " AND seq < (SELECT seq FROM validations WHERE id = ?3)";
    if (!tenant.empty()) sql += store_rules::tenant_report_sql('?', 4);
    sql += " ORDER BY seq DESC LIMIT ?2";
    Result<sql::StatementRef> st = db.prepare(sql);
    if (!st) return st.take_error();
    (*st)->bind(1, node_id).bind(2, static_cast<int64_t>(limit));
    if (!marker.empty()) (*st)->bind(3, marker);
    if (!tenant.empty()) (*st)->bind(4, tenant);
    return read_validations(*st, out);
  });
  if (!s) return s.take_error();
  return out;
}

Result<std::vector<ValidationRecord>> SqliteStore::recent_passing_validations(std::string_view profile,
                                                                              std::string_view kind, int limit) {
  if (Result<int> lim = store_rules::checked_limit(limit); !lim) return lim.take_error();
  std::vector<ValidationRecord> out;
  Status s = on_reader([&](sql::Database& db) -> Status {
    Result<sql::StatementRef> st = db.prepare(
        std::string("SELECT ") + kValidationColumns +
        " FROM validations WHERE profile = ?1 AND node_kind = ?2 AND result = 'pass' ORDER BY seq DESC LIMIT ?3");
    if (!st) return st.take_error();
    (*st)->bind(1, profile).bind(2, kind).bind(3, static_cast<int64_t>(limit));
    return read_validations(*st, out);
  });
  if (!s) return s.take_error();
  return out;
}

Result<std::map<std::pair<std::string, std::string>, int64_t>> SqliteStore::count_free_nodes() {
  std::map<std::pair<std::string, std::string>, int64_t> out;
  Status s = on_reader([&](sql::Database& db) -> Status {
    Result<sql::StatementRef> st = db.prepare(
        std::string("SELECT profile, kind, count(*) FROM nodes WHERE ") + kClaimableNodeSql + " AND NOT " +
        store_rules::kLibvirtGuestSql + " GROUP BY profile, kind");
    if (!st) return st.take_error();
    while (true) {
      Result<bool> row = (*st)->step();
      if (!row) return row.take_error();
      if (!*row) return ok_status();
      out[{(*st)->column_text(0), (*st)->column_text(1)}] = (*st)->column_int64(2);
    }
  });
  if (!s) return s.take_error();
  return out;
}

}  // namespace kiln
