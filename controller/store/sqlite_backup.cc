#include "controller/store/sqlite_backup.h"

#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <memory>
#include <thread>

#include "controller/model/image.h"
#include "controller/store/migrations.h"
#include "controller/store/sqlite.h"

namespace kiln::store {

namespace {

// The tables a restore is checked against (docs/operations.md lists them).
constexpr const char* kCountedTables[] = {"nodes",       "ports",       "tenants",        "tenant_quotas",
                                          "allocations", "allocation_members", "usage_records", "tokens",
                                          "events",      "images",      "profiles",       "hosts",
                                          "validations"};

void remove_copy(const std::string& path) {
  for (const char* suffix : {"", "-journal", "-wal", "-shm"}) ::unlink((path + suffix).c_str());
}

// Runs the online backup from `src` into `dst` (both open). See the header
// for the stepping rule.
Status run_backup(sqlite3* src, sqlite3* dst, const LiveCopyOptions& o) {
  sqlite3_backup* b = sqlite3_backup_init(dst, "main", src, "main");
  if (b == nullptr) return sql::sqlite_error(dst, sqlite3_errcode(dst), "backup init");
  int steps = 0;
  int busy = 0;
  int budget = -1;  // steps one pass needs plus extra_steps, known after the first step
  int rc = SQLITE_OK;
  for (;;) {
    const bool whole = budget >= 0 && steps >= budget;
    rc = sqlite3_backup_step(b, whole ? -1 : o.pages_per_step);
    if (rc == SQLITE_DONE) break;
    if (rc == SQLITE_BUSY || rc == SQLITE_LOCKED) {
      if (++busy > o.busy_retries) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(o.busy_sleep_ms));
      continue;
    }
    if (rc != SQLITE_OK) break;
    ++steps;
    if (budget < 0) budget = sqlite3_backup_pagecount(b) / o.pages_per_step + 1 + o.extra_steps;
  }
  sqlite3_backup_finish(b);
  if (rc == SQLITE_DONE) return ok_status();
  if (rc == SQLITE_BUSY || rc == SQLITE_LOCKED)
    return Error(Code::kUnavailable, "the database stayed busy through " + std::to_string(o.busy_retries) +
                                         " retries of the online backup");
  return sql::sqlite_error(dst, rc, "backup step");
}

Result<DatabaseFacts> facts_of(sql::Database& db) {
  // integrity_check answers one row "ok", or up to 100 rows naming problems.
  {
    Result<sql::StatementRef> st = db.prepare("PRAGMA integrity_check");
    if (!st) return st.take_error();
    std::string report;
    for (int rows = 0; rows < 5; ++rows) {
      Result<bool> row = (*st)->step();
      if (!row) return row.take_error();
      if (!*row) break;
      if (!report.empty()) report += "; ";
      report += (*st)->column_text(0);
    }
    if (report != "ok") return Error(Code::kInternal, "integrity_check failed: " + report);
  }
  DatabaseFacts f;
  Result<std::vector<std::string>> applied = applied_migrations(db);
  if (!applied) return applied.take_error();
  if (applied->empty()) return Error(Code::kInternal, "not a kilnd database (no schema_migrations)");
  f.migrations = std::move(*applied);
  f.schema = f.migrations.back();
  for (const char* table : kCountedTables) {
    Result<std::string> exists =
        db.query_text("SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = '" + std::string(table) + "'");
    if (!exists) return exists.take_error();
    if (*exists == "0") continue;  // an older schema; kilnd migrates it at start
    Result<std::string> n = db.query_text("SELECT count(*) FROM " + std::string(table));
    if (!n) return n.take_error();
    f.row_counts.emplace_back(table, std::stoll(*n));
  }
  Result<std::string> has_check =
      db.query_text("SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'key_check'");
  if (!has_check) return has_check.take_error();
  if (*has_check != "0") {
    Result<std::string> v = db.query_text("SELECT value FROM key_check WHERE id = 1");
    if (!v) return v.take_error();
    f.key_check = std::move(*v);
  }
  Result<sql::StatementRef> st =
      db.prepare("SELECT id, name, state, path, size, served_path, served_size, kernel FROM images ORDER BY name");
  if (!st) return st.take_error();
  for (;;) {
    Result<bool> row = (*st)->step();
    if (!row) return row.take_error();
    if (!*row) break;
    f.images.push_back(ImageFiles{.id = (*st)->column_text(0),
                                  .name = (*st)->column_text(1),
                                  .state = (*st)->column_text(2),
                                  .path = (*st)->column_text(3),
                                  .size = (*st)->column_int64(4),
                                  .served_path = (*st)->column_text(5),
                                  .served_size = (*st)->column_int64(6),
                                  .kernel = (*st)->column_text(7)});
  }
  return f;
}

// Why `path` cannot stand for the image's file, or "" when it can. size < 0:
// any size.
std::string file_problem(const std::string& path, int64_t size) {
  struct stat st{};
  if (::stat(path.c_str(), &st) != 0) return path + " is missing";
  if (!S_ISREG(st.st_mode)) return path + " is not a regular file";
  if (size >= 0 && st.st_size != size)
    return path + " has " + std::to_string(st.st_size) + " bytes, not " + std::to_string(size);
  return "";
}

}  // namespace

Result<DatabaseFacts> copy_live_database(const std::string& source, const std::string& dest,
                                         const LiveCopyOptions& options) {
  struct stat st{};
  if (::stat(source.c_str(), &st) != 0 || !S_ISREG(st.st_mode))
    return Error(Code::kNotFound, "no SQLite database at " + source);
  if (::stat(dest.c_str(), &st) == 0) return Error(Code::kConflict, dest + " already exists");
  auto src = sql::Database::open(source, {.create = false, .query_only = true});
  if (!src) return src.take_error();
  Result<DatabaseFacts> facts = [&]() -> Result<DatabaseFacts> {
    auto dst = sql::Database::open(dest, {.create = true});
    if (!dst) return dst.take_error();
    if (Status s = run_backup((*src)->raw(), (*dst)->raw(), options); !s) return s.take_error();
    // One file, no -wal: the archive carries exactly this file.
    Result<std::string> mode = (*dst)->query_text("PRAGMA journal_mode=DELETE");
    if (!mode) return mode.take_error();
    if (*mode != "delete") return Error(Code::kInternal, "the copy stayed in journal mode " + *mode);
    return facts_of(**dst);
  }();
  if (!facts) remove_copy(dest);
  return facts;
}

Result<DatabaseFacts> check_database(const std::string& path) {
  auto db = sql::Database::open(path, {.create = false, .query_only = true});
  if (!db) return db.take_error();
  return facts_of(**db);
}

Result<std::vector<std::string>> fail_images_without_files(const std::string& path, int64_t now_ms) {
  auto db = sql::Database::open(path, {.create = false});
  if (!db) return db.take_error();
  Result<DatabaseFacts> facts = facts_of(**db);
  if (!facts) return facts.take_error();
  std::vector<std::string> failed;
  Result<sql::Transaction> tx = sql::Transaction::begin_immediate(**db);
  if (!tx) return tx.take_error();
  for (const ImageFiles& img : facts->images) {
    if (img.state != kImageReady) continue;
    std::string problem = img.path.empty() ? "it has no file" : file_problem(img.path, img.size);
    if (problem.empty() && !img.served_path.empty()) problem = file_problem(img.served_path, img.served_size);
    if (problem.empty() && !img.kernel.empty()) problem = file_problem(img.kernel, -1);
    if (problem.empty()) continue;
    Result<sql::StatementRef> up =
        (*db)->prepare("UPDATE images SET state = ?2, last_error = ?3, updated_at = ?4 WHERE id = ?1");
    if (!up) return up.take_error();
    (*up)->bind(1, img.id)
        .bind(2, kImageFailed)
        .bind(3, "restored from a backup without its file: " + problem + " (copy it back and register the image "
                 "again, or delete it)")
        .bind(4, now_ms);
    if (Status s = (*up)->run(); !s) return s.take_error();
    failed.push_back(img.name);
  }
  if (Status s = tx->commit(); !s) return s.take_error();
  return failed;
}

}  // namespace kiln::store
