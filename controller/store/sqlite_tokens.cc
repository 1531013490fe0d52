#include "controller/store/sqlite_store.h"

#include <utility>

#include "common/ids.h"
#include "controller/store/sqlite_locks.h"
#include "controller/store/sqlite_rows.h"

namespace kiln {

using json = nlohmann::json;
using namespace store_rows;

// SqliteStore: API tokens (AccessStore).

// ---------------------------------------------------------------------------
// Tokens

namespace {
constexpr const char kTokenColumns[] = "id, name, role, tenant, secret_hash, created_at, expires_at";

TokenRecord read_token(const sql::Statement& s) {
  TokenRecord t;
  t.id = s.column_text(0);
  t.name = s.column_text(1);
  t.role = s.column_text(2);
  t.tenant = s.column_text(3);
  t.secret_hash = s.column_text(4);
  t.created_at = s.column_int64(5);
  t.expires_at = s.column_int64(6);
  return t;
}
}  // namespace

Result<TokenRecord> SqliteStore::create_token(const TokenRecord& token) {
  TokenRecord t = token;
  if (t.id.empty()) t.id = new_uuid();
  if (t.created_at == 0) t.created_at = now_ms();
  Result<WriterLock> w = lock_writer();
  if (!w) return w.take_error();
  Result<sql::StatementRef> st = w->db().prepare(std::string("INSERT INTO tokens (") + kTokenColumns +
                                                 ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)");
  if (!st) return st.take_error();
  (*st)->bind(1, t.id)
      .bind(2, t.name)
      .bind(3, t.role)
      .bind(4, t.tenant)
      .bind(5, t.secret_hash)
      .bind(6, t.created_at)
      .bind(7, t.expires_at);
  if (Status s = (*st)->run(); !s) {
    Error e = s.take_error();
    if (e.code == Code::kConflict && mentions(e, "tokens.secret_hash"))
      return Error(Code::kConflict, "a token with this secret already exists");
    if (e.code == Code::kConflict && mentions(e, "tokens.id"))
      return Error(Code::kConflict, "token " + t.id + " already exists", {FieldError{"/id", "already in use"}});
    return e;
  }
  return t;
}

Result<TokenRecord> SqliteStore::find_token_by_hash(std::string_view secret_hash) {
  ReaderLease r = lease_reader();
  Result<sql::StatementRef> st =
      r.db().prepare(std::string("SELECT ") + kTokenColumns + " FROM tokens WHERE secret_hash = ?1");
  if (!st) return st.take_error();
  (*st)->bind(1, secret_hash);
  Result<bool> row = (*st)->step();
  if (!row) return row.take_error();
  if (!*row) return Error(Code::kNotFound, "token not found");  // never echo the hash
  return read_token(**st);
}

Result<std::vector<TokenRecord>> SqliteStore::list_tokens() {
  ReaderLease r = lease_reader();
  Result<sql::StatementRef> st =
      r.db().prepare(std::string("SELECT ") + kTokenColumns + " FROM tokens ORDER BY created_at, id");
  if (!st) return st.take_error();
  return collect<TokenRecord>(**st, read_token);
}

Status SqliteStore::delete_token(std::string_view id) {
  Result<WriterLock> w = lock_writer();
  if (!w) return w.take_error();
  Result<sql::StatementRef> st = w->db().prepare("DELETE FROM tokens WHERE id = ?1");
  if (!st) return st.take_error();
  (*st)->bind(1, id);
  if (Status s = (*st)->run(); !s) return s;
  if (w->db().changes() == 0) return Error(Code::kNotFound, "token " + std::string(id) + " not found");
  return ok_status();
}

Result<bool> SqliteStore::has_token_with_role(std::string_view role) {
  ReaderLease r = lease_reader();
  Result<sql::StatementRef> st = r.db().prepare(
      "SELECT EXISTS (SELECT 1 FROM tokens WHERE role = ?1 AND (expires_at = 0 OR expires_at > ?2))");
  if (!st) return st.take_error();
  (*st)->bind(1, role).bind(2, now_ms());
  Result<bool> row = (*st)->step();
  if (!row) return row.take_error();
  return (*st)->column_bool(0);
}

Result<std::string> SqliteStore::key_check(const std::string& proposed) {
  Result<std::string> out = Error(Code::kInternal, "key check not read");
  Status s = on_writer([&](sql::Database& db) -> Status {
    Result<sql::StatementRef> ins = db.prepare("INSERT INTO key_check (id, value) VALUES (1, ?1) ON CONFLICT (id) DO NOTHING");
    if (!ins) return ins.take_error();
    (*ins)->bind(1, proposed);
    if (Status run = (*ins)->run(); !run) return run;
    Result<sql::StatementRef> sel = db.prepare("SELECT value FROM key_check WHERE id = 1");
    if (!sel) return sel.take_error();
    Result<bool> row = (*sel)->step();
    if (!row) return row.take_error();
    if (!*row) return Error(Code::kInternal, "key check value missing after insert");
    out = (*sel)->column_text(0);
    return ok_status();
  });
  if (!s) return s.take_error();
  return out;
}

}  // namespace kiln
