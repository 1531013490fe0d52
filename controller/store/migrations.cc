#include "controller/store/migrations.h"

namespace kiln::store {

// Defined in the file CMake generates from schemas/sql/sqlite/*.sql.
extern const Migration kEmbeddedMigrations[];
extern const std::size_t kEmbeddedMigrationsCount;

std::span<const Migration> embedded_migrations() {
  return {kEmbeddedMigrations, kEmbeddedMigrationsCount};
}

namespace {

constexpr const char kCreateTable[] =
    "CREATE TABLE IF NOT EXISTS schema_migrations ("
    " name TEXT PRIMARY KEY NOT NULL,"
    " applied_at INTEGER NOT NULL)";

Result<bool> is_applied(sql::Database& db, std::string_view name) {
  Result<sql::StatementRef> st = db.prepare("SELECT 1 FROM schema_migrations WHERE name = ?1");
  if (!st) return st.take_error();
  (*st)->bind(1, name);
  return (*st)->step();
}

}  // namespace

Status apply_migrations(sql::Database& db, int64_t now_ms) {
  if (Status s = db.exec(kCreateTable); !s) return s;
  for (const Migration& m : embedded_migrations()) {
    // Check inside the write transaction: another process opening the same
    // file at the same moment must not apply a migration twice.
    Result<sql::Transaction> tx = sql::Transaction::begin_immediate(db);
    if (!tx) return tx.take_error();
    Result<bool> applied = is_applied(db, m.name);
    if (!applied) return applied.take_error();
    if (*applied) continue;  // tx rolls back: nothing was written
    if (Status s = db.exec(m.sql); !s) {
      Error e = s.take_error();
      e.message = "migration " + std::string(m.name) + ": " + e.message;
      e.code = Code::kInternal;
      return e;
    }
    {
      Result<sql::StatementRef> ins =
          db.prepare("INSERT INTO schema_migrations (name, applied_at) VALUES (?1, ?2)");
      if (!ins) return ins.take_error();
      (*ins)->bind(1, m.name).bind(2, now_ms);
      if (Status s = (*ins)->run(); !s) return s;
    }
    if (Status s = tx->commit(); !s) return s;
  }
  return ok_status();
}

Result<std::vector<std::string>> applied_migrations(sql::Database& db) {
  std::vector<std::string> names;
  {
    Result<sql::StatementRef> exists =
        db.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations'");
    if (!exists) return exists.take_error();
    Result<bool> row = (*exists)->step();
    if (!row) return row.take_error();
    if (!*row) return names;
  }
  // rowid grows with each insert: the order applied.
  Result<sql::StatementRef> st = db.prepare("SELECT name FROM schema_migrations ORDER BY rowid");
  if (!st) return st.take_error();
  for (;;) {
    Result<bool> row = (*st)->step();
    if (!row) return row.take_error();
    if (!*row) break;
    names.push_back((*st)->column_text(0));
  }
  return names;
}

}  // namespace kiln::store
