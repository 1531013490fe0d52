#pragma once
// Schema migrations on PostgreSQL: the numbered files in
// schemas/sql/postgresql (NNN_name.sql, the same names as SQLite's), embedded
// at build time (controller/store/CMakeLists.txt), applied in name order.
//
// Several kilnd may start against one database at the same moment. Applying
// runs under a session-level advisory lock (pg_advisory_lock on
// kMigrationLockKey), so one instance migrates while the others wait and then
// find every migration recorded. Each migration runs in its own transaction
// with the row recording it in schema_migrations(name, applied_at): a crash
// leaves all of a migration or none of it (PostgreSQL's DDL is
// transactional). Migration files must not contain BEGIN/COMMIT.

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "common/result.h"
#include "controller/store/migrations.h"
#include "controller/store/pg/connection.h"

namespace kiln::pg {

// The advisory lock key migrations hold ("kiln" in ASCII). Any other user of
// advisory locks in the same database must avoid it.
constexpr int64_t kMigrationLockKey = 0x6b696c6e;

// The PostgreSQL migrations compiled into this binary, sorted by name.
std::span<const store::Migration> embedded_migrations();

// Applies every embedded migration not yet recorded, holding the advisory
// lock while it does (blocks while another instance migrates). `now_ms`
// stamps applied_at. kInternal naming the migration on failure (it is rolled
// back, earlier ones stay); kUnavailable when the connection is lost. Uses
// `conn` alone; on return the lock is released.
Status apply_migrations(Connection& conn, int64_t now_ms);

// Names recorded in schema_migrations, in the order applied. Empty when the
// table does not exist yet.
Result<std::vector<std::string>> applied_migrations(Connection& conn);

}  // namespace kiln::pg
