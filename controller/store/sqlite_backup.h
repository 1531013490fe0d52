#pragma once
// The SQLite side of `kilnd backup` and `kilnd restore` (controller/backup.h
// is the command; docs/operations.md the procedure).
//
// copy_live_database() takes a consistent copy of a database another process
// (a running kilnd) keeps writing, with SQLite's online backup API
// (sqlite3_backup_init/step/finish), never a file copy: a file copy of a WAL
// database misses what sits in the -wal file and can catch a page mid-write.
//
// Why in steps, and why a fallback. Each sqlite3_backup_step() copies a few
// pages under a short read transaction and lets go, so the copy never holds a
// lock for long. But when another process commits between two steps, SQLite
// restarts the copy from page 1 at the next step: against a kilnd that writes
// all the time, small steps could restart forever. After a bounded number of
// steps the rest is therefore copied in one step (-1): one read snapshot. In
// WAL mode (kilnd's) a reader does not block the writer, so that snapshot
// costs the live kilnd nothing but a checkpoint that waits for it to end.
// SQLITE_BUSY / SQLITE_LOCKED from a step are retried after a short sleep, a
// bounded number of times, then reported.
//
// The copy is turned into a single self-contained file (journal_mode DELETE:
// no -wal beside it) and checked with PRAGMA integrity_check before it is
// reported as made.
//
// Threading: plain blocking calls, for a command-line process (no pool).

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "common/result.h"

namespace kiln::store {

struct LiveCopyOptions {
  // Pages per sqlite3_backup_step(): 1024 pages is 4 MiB at SQLite's default
  // page size, a few milliseconds of reading per step.
  int pages_per_step = 1024;
  // Steps allowed beyond what one pass needs before the rest is copied in one
  // snapshot (see above): a writer restarting the copy this often is busy.
  int extra_steps = 64;
  // SQLITE_BUSY / SQLITE_LOCKED retries, each after busy_sleep_ms.
  int busy_retries = 200;
  int busy_sleep_ms = 25;
};

// An image row as the copy records it: enough to tell after a restore whether
// its files are there.
struct ImageFiles {
  std::string id;
  std::string name;
  std::string state;
  std::string path;         // the file served ('' until downloaded)
  int64_t size = 0;         // bytes of `path`
  std::string served_path;  // a converted qcow2's raw+zstd file, '' otherwise
  int64_t served_size = 0;
  std::string kernel;       // a ramdisk's kernel file, '' otherwise
};

// What a restore needs to know about a copy.
struct DatabaseFacts {
  std::string schema;            // the last migration applied, e.g. "022_ironic_fields"
  std::vector<std::string> migrations;  // every one applied, in order
  std::vector<std::pair<std::string, int64_t>> row_counts;  // the tables that matter, by name
  std::vector<ImageFiles> images;
  // The key_check row's sealed value ('' before any kilnd started on it):
  // opening it with a key proves the key is this database's.
  std::string key_check;
};

// Copies the database at `source` (opened read-only in intent: query_only)
// into a new file `dest` (which must not exist; created with the process's
// umask, so callers set 077), makes it self-contained, runs integrity_check on
// it and returns its facts. `dest` is removed again on any error.
// Errors: kNotFound when `source` is absent; kUnavailable when the source
// stayed busy past the retries; kInternal for SQLite failures and a failed
// integrity check (its first lines in the message).
Result<DatabaseFacts> copy_live_database(const std::string& source, const std::string& dest,
                                         const LiveCopyOptions& options = {});

// The facts of a database file at rest (a restored copy), after PRAGMA
// integrity_check. Errors: kInternal when it is not a SQLite database, fails
// the check, or has no schema_migrations table.
Result<DatabaseFacts> check_database(const std::string& path);

// For a restore: every image row in state `ready` whose files (path, and
// served_path and kernel where set) is absent, or not a regular file of the recorded
// size, becomes `failed` with last_error naming the missing file, so the
// restored kilnd refuses to deploy it (409) instead of serving a broken file.
// Returns the names of the images so marked. kInternal on SQLite failures.
Result<std::vector<std::string>> fail_images_without_files(const std::string& path, int64_t now_ms);

}  // namespace kiln::store
