#pragma once
// The SQLite -> PostgreSQL move (`kilnd migrate-store`, docs/scale-out.md):
// every row of a kilnd's SQLite database copied into an empty PostgreSQL
// database, so several kilnd can take over the fleet with its whole history.
//
// What is copied. Every table the PostgreSQL schema has, with the columns it
// has; both schemas come from the same migrations (schemas/sql/sqlite and
// schemas/sql/postgresql), so the tables and columns match by name. Values
// keep their meaning: ids, versions, event sequence numbers, audit ids, the
// sealed secrets (still sealed with the same kiln.key, so the new instances
// must be given that file with --key-file) and the key check. Afterwards the
// identity sequences and the event counter continue after the copied
// numbers, so a reader paging events by `since` sees no gap and no repeat.
// Not copied: schema_migrations (the target records its own), conductor
// registrations (they describe processes, not the fleet) and PostgreSQL's
// event_queue (events not yet numbered: SQLite has none).
//
// All or nothing. The target is migrated to this build's schema first; then
// one transaction checks that every table to fill is empty (a second run, or
// a target already in use, is refused naming the table), copies the tables
// parents first (by the target's foreign keys) with COPY, moves the
// counters, compares each table's row count with the source, and commits.
// Any failure rolls everything back: the target stays empty.
//
// The source. It is migrated to this build's schema first (as starting this
// kilnd on it would), then read inside one read transaction: a consistent
// snapshot even if something writes meanwhile. Stop the kilnd that uses it
// first all the same: what it writes after the snapshot is not copied.
//
// Errors: kInvalidArgument when the schemas disagree (a column or table one
// side lacks) or the target is not empty; kUnavailable when PostgreSQL cannot
// be reached; kInternal for other database failures. Messages never contain
// the connection string (it may hold a password).
//
// Threading: blocking; call it from a command-line tool, not a server thread.

#include <cstdint>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/result.h"

namespace kiln {

struct TableCopied {
  std::string table;
  int64_t rows = 0;
};

// Copies the SQLite database at `sqlite_path` (a kilnd's DIR/kiln.db) into
// the PostgreSQL database `conninfo`. Returns each table copied with its
// row count, in the order copied.
Result<std::vector<TableCopied>> copy_sqlite_to_postgres(const std::string& sqlite_path,
                                                         const std::string& conninfo, const Clock& clock);

}  // namespace kiln
