// copy_live_database (controller/store/sqlite_backup.h) against a writer on
// another connection that commits without pause: the copy in one-page steps
// keeps being restarted by the writer's commits, so only the bounded fallback
// (the rest in one WAL snapshot) lets it finish; the copy is one consistent
// snapshot (rows written together are copied together), self-contained (no
// -wal), and integrity-checked. Also: fail_images_without_files.
#include <catch2/catch.hpp>

#include <sys/stat.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <thread>

#include "controller/store/sqlite.h"
#include "controller/store/sqlite_backup.h"
#include "store_test_util.h"

using namespace kiln;
using namespace kiln::test;

namespace {

std::string migrated_db(const TempDir& dir) {
  FakeClock clock(1'000);
  SqliteStoreOptions o;
  o.path = dir.file("kiln.db");
  o.clock = &clock;
  auto s = open_sqlite_store(o);
  REQUIRE(s);
  REQUIRE((*s)->migrate());
  return o.path;
}

}  // namespace

TEST_CASE("an online copy finishes against a writer that never pauses, and is one snapshot", "[store][backup]") {
  TempDir dir;
  const std::string path = migrated_db(dir);
  auto w = sql::Database::open(path, {});
  REQUIRE(w);
  // synchronous=OFF: commits as fast as the CPU allows (measured: a one-page
  // stepped copy then restarts for ever, 20,000 steps without finishing).
  REQUIRE((*w)->exec("PRAGMA journal_mode=WAL; PRAGMA synchronous=OFF; CREATE TABLE pair_a (n INTEGER, pad BLOB); "
                     "CREATE TABLE pair_b (n INTEGER, pad BLOB)"));
  std::atomic<bool> stop{false};
  std::atomic<int64_t> commits{0};
  std::thread writer([&] {
    for (int64_t n = 0; !stop.load(); ++n) {
      // Two rows in one transaction, a page of padding each: the file grows
      // and every commit restarts a stepped copy.
      std::string sql = "BEGIN IMMEDIATE; INSERT INTO pair_a VALUES (" + std::to_string(n) +
                        ", zeroblob(4000)); INSERT INTO pair_b VALUES (" + std::to_string(n) +
                        ", zeroblob(4000)); COMMIT";
      if ((*w)->exec(sql)) ++commits;
    }
  });
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (commits.load() < 1000 && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
  if (commits.load() < 1000) {
    stop = true;
    writer.join();
    FAIL("the writer committed " << commits.load() << " times in 20 s");
  }
  store::LiveCopyOptions o;
  o.pages_per_step = 1;  // restarted by nearly every commit
  o.extra_steps = 16;
  const int64_t at_start = commits.load();
  auto facts = store::copy_live_database(path, dir.file("copy.db"), o);
  const int64_t at_end = commits.load();
  stop = true;
  writer.join();
  REQUIRE(facts);
  CHECK(at_end > at_start);  // the writer kept committing while the copy ran
  const int64_t a = sql_int(dir.file("copy.db"), "SELECT count(*) FROM pair_a");
  CHECK(a == sql_int(dir.file("copy.db"), "SELECT count(*) FROM pair_b"));
  CHECK(a >= at_start);
  CHECK(a <= at_end);
  struct stat st {};
  CHECK(::stat(dir.file("copy.db-wal").c_str(), &st) != 0);  // self-contained
  CHECK(facts->schema == facts->migrations.back());
  CHECK(sql_int(dir.file("copy.db"), "SELECT count(*) FROM schema_migrations") ==
        static_cast<int64_t>(facts->migrations.size()));
  // An existing destination is refused, and left alone.
  auto again = store::copy_live_database(path, dir.file("copy.db"), o);
  REQUIRE(!again);
  CHECK(again.error().code == Code::kConflict);
  CHECK(sql_int(dir.file("copy.db"), "SELECT count(*) FROM pair_a") == a);
}

TEST_CASE("a copy of something that is not a kilnd database is refused and removed", "[store][backup]") {
  TempDir dir;
  {
    auto db = sql::Database::open(dir.file("other.db"), {});
    REQUIRE(db);
    REQUIRE((*db)->exec("CREATE TABLE x (a INTEGER)"));
  }
  auto facts = store::copy_live_database(dir.file("other.db"), dir.file("copy.db"));
  REQUIRE(!facts);
  CHECK_THAT(facts.error().message, Catch::Contains("schema_migrations"));
  struct stat st {};
  CHECK(::stat(dir.file("copy.db").c_str(), &st) != 0);
  auto none = store::copy_live_database(dir.file("absent.db"), dir.file("copy2.db"));
  REQUIRE(!none);
  CHECK(none.error().code == Code::kNotFound);
}

TEST_CASE("images whose files are missing or of another size are marked failed, the rest left ready", "[store][backup]") {
  TempDir dir;
  const std::string path = migrated_db(dir);
  { std::ofstream(dir.file("ok.img")) << std::string(10, 'x'); }
  { std::ofstream(dir.file("short.img")) << std::string(5, 'x'); }
  auto db = sql::Database::open(path, {});
  REQUIRE(db);
  auto add = [&](const std::string& name, const std::string& state, const std::string& file) {
    REQUIRE((*db)->exec("INSERT INTO images (id, name, kind, format, sha256, size, source, path, state, created_at, "
                        "updated_at) VALUES ('id-" + name + "', '" + name + "', 'os', 'raw', '', 10, '', '" + file +
                        "', '" + state + "', 1, 1)"));
  };
  add("ok", "ready", dir.file("ok.img"));
  add("short", "ready", dir.file("short.img"));
  add("gone", "ready", dir.file("gone.img"));
  add("converting", "converting", dir.file("gone.img"));  // not served yet: left to its own flow
  db->reset();
  auto failed = store::fail_images_without_files(path, 99);
  REQUIRE(failed);
  CHECK(*failed == std::vector<std::string>{"gone", "short"});
  CHECK(sql_int(path, "SELECT count(*) FROM images WHERE state = 'ready'") == 1);
  CHECK(sql_int(path, "SELECT count(*) FROM images WHERE name = 'converting' AND state = 'converting'") == 1);
  CHECK(sql_int(path, "SELECT count(*) FROM images WHERE name = 'short' AND last_error LIKE '%has 5 bytes, not 10%'") == 1);
  CHECK(sql_int(path, "SELECT count(*) FROM images WHERE name = 'gone' AND last_error LIKE '%gone.img is missing%'") == 1);
}
