#include "controller/store/pg/migrations.h"

namespace kiln::store {
// Defined in the file CMake generates from schemas/sql/postgresql/*.sql.
extern const Migration kEmbeddedPgMigrations[];
extern const std::size_t kEmbeddedPgMigrationsCount;
}  // namespace kiln::store

namespace kiln::pg {

std::span<const store::Migration> embedded_migrations() {
  return {store::kEmbeddedPgMigrations, store::kEmbeddedPgMigrationsCount};
}

namespace {

// Holds the migration advisory lock for its lifetime. The lock is
// session-level (it survives the migrations' own COMMITs); a lost connection
// releases it on the server.
class MigrationLock {
 public:
  static Result<MigrationLock> take(Connection& conn) {
    if (Result<Rows> r = conn.exec("SELECT pg_advisory_lock($1)", Params().add(kMigrationLockKey)); !r)
      return r.take_error();
    return MigrationLock(&conn);
  }
  MigrationLock(MigrationLock&& o) noexcept : conn_(o.conn_) { o.conn_ = nullptr; }
  MigrationLock(const MigrationLock&) = delete;
  MigrationLock& operator=(const MigrationLock&) = delete;
  MigrationLock& operator=(MigrationLock&&) = delete;
  ~MigrationLock() {
    if (conn_ != nullptr) (void)conn_->exec("SELECT pg_advisory_unlock($1)", Params().add(kMigrationLockKey));
  }

 private:
  explicit MigrationLock(Connection* conn) : conn_(conn) {}
  Connection* conn_;
};

// A serial column records the order applied (SQLite's rowid does that there).
constexpr const char kCreateTable[] =
    "CREATE TABLE IF NOT EXISTS schema_migrations ("
    " name TEXT PRIMARY KEY NOT NULL,"
    " applied_at BIGINT NOT NULL,"
    " ord BIGINT GENERATED ALWAYS AS IDENTITY)";

}  // namespace

Status apply_migrations(Connection& conn, int64_t now_ms) {
  Result<MigrationLock> lock = MigrationLock::take(conn);
  if (!lock) return lock.take_error();
  // Under the lock: CREATE TABLE IF NOT EXISTS itself races between sessions.
  if (Status s = conn.exec_script(kCreateTable); !s) return s;
  for (const store::Migration& m : embedded_migrations()) {
    Result<Rows> applied = conn.exec("SELECT 1 FROM schema_migrations WHERE name = $1", Params().add(m.name));
    if (!applied) return applied.take_error();
    if (!applied->empty()) continue;
    Result<Transaction> tx = Transaction::begin(conn);
    if (!tx) return tx.take_error();
    if (Status s = conn.exec_script(m.sql); !s) {
      Error e = s.take_error();
      e.message = "migration " + std::string(m.name) + ": " + e.message;
      if (e.code != Code::kUnavailable) e.code = Code::kInternal;
      return e;
    }
    Result<Rows> ins = conn.exec("INSERT INTO schema_migrations (name, applied_at) VALUES ($1, $2)",
                                 Params().add(m.name).add(now_ms));
    if (!ins) return ins.take_error();
    if (Status s = tx->commit(); !s) return s;
  }
  return ok_status();
}

Result<std::vector<std::string>> applied_migrations(Connection& conn) {
  std::vector<std::string> names;
  Result<Rows> exists = conn.exec("SELECT to_regclass('schema_migrations') IS NOT NULL");
  if (!exists) return exists.take_error();
  if (!exists->boolean(0, 0)) return names;
  Result<Rows> rows = conn.exec("SELECT name FROM schema_migrations ORDER BY ord");
  if (!rows) return rows.take_error();
  for (int i = 0; i < rows->size(); ++i) names.push_back(rows->text(i, 0));
  return names;
}

}  // namespace kiln::pg
