#pragma once
// Schema migrations: the numbered files in schemas/sql/sqlite (NNN_name.sql), embedded
// into the binary at build time (see CMakeLists.txt), applied in name order.
//
// Each migration runs in its own BEGIN IMMEDIATE transaction together with the
// row recording it in schema_migrations(name, applied_at), so a crash leaves
// either all of a migration or none of it. Applying is idempotent: migrations
// already recorded are skipped, so running it on every start-up is cheap.
// Migration files must not contain BEGIN/COMMIT of their own.

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "controller/store/sqlite.h"

namespace kiln::store {

struct Migration {
  std::string_view name;  // "001_initial" (file name without .sql)
  std::string_view sql;
};

// The migrations compiled into this binary, sorted by name.
std::span<const Migration> embedded_migrations();

// Applies every embedded migration not yet recorded. `now_ms` stamps applied_at.
// Runs on the writer connection; kInternal with SQLite's message and the
// migration's name on failure (that migration is rolled back, earlier ones stay).
Status apply_migrations(sql::Database& db, int64_t now_ms);

// Names recorded in schema_migrations, in the order applied. Empty when the
// table does not exist yet.
Result<std::vector<std::string>> applied_migrations(sql::Database& db);

}  // namespace kiln::store
