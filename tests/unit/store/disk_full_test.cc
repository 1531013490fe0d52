// A full disk under the SQLite store: a write that cannot be stored is
// kInsufficientStorage naming the cause and the data directory (507 with Retry-After
// at the API), it leaves nothing half-written, reads keep working, and the
// same connection writes again once there is room, with no reopen.
//
// Two ways to run out of room: SQLite's own page limit (max_page_count, which
// answers SQLITE_FULL exactly as a full disk does; runs anywhere), and a real
// tmpfs of 2 MiB filled with a filler file (needs root to mount; skipped
// otherwise).
#include <catch2/catch.hpp>

#include <sqlite3.h>
#include <sys/mount.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <string>

#include "controller/store/sqlite.h"
#include "store_test_util.h"
#include "tests/support/skip.h"

using namespace kiln;
using namespace kiln::test;
using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;

namespace {

// A tmpfs of `size` mounted on `dir` for the test's lifetime.
class TinyTmpfs {
 public:
  TinyTmpfs(const std::string& dir, const std::string& size) : dir_(dir) {
    std::filesystem::create_directories(dir);
    mounted_ = ::mount("tmpfs", dir.c_str(), "tmpfs", 0, ("size=" + size).c_str()) == 0;
  }
  ~TinyTmpfs() {
    if (mounted_) ::umount2(dir_.c_str(), MNT_DETACH);
  }
  TinyTmpfs(const TinyTmpfs&) = delete;
  TinyTmpfs& operator=(const TinyTmpfs&) = delete;
  bool mounted() const { return mounted_; }

 private:
  std::string dir_;
  bool mounted_ = false;
};

// Writes `path` until the filesystem has no room left (ENOSPC).
void fill(const std::string& path) {
  FILE* f = std::fopen(path.c_str(), "wb");
  REQUIRE(f != nullptr);
  std::string block(64 * 1024, 'x');
  while (std::fwrite(block.data(), 1, block.size(), f) == block.size()) {
  }
  std::fclose(f);
  // Whatever stdio buffered and could not write is lost, not retried later.
}

std::string integrity(const std::string& path) { return sql_text(path, "PRAGMA integrity_check"); }

}  // namespace

TEST_CASE("sqlite - a full database is kInsufficientStorage naming its directory and the connection recovers",
          "[store][disk-full]") {
  TempDir dir;
  const std::string path = dir.file("full.db");
  auto db = sql::Database::open(path, {});
  REQUIRE(db);
  sql::Database& d = **db;
  REQUIRE(d.query_text("PRAGMA journal_mode=WAL"));
  REQUIRE(d.exec("CREATE TABLE t(v TEXT)"));
  const std::string pages = *d.query_text("PRAGMA page_count");
  // No page more than the file has now: the next row that needs one fails
  // as it would on a full disk.
  REQUIRE(d.query_text("PRAGMA max_page_count=" + pages));
  const std::string row(8000, 'r');  // two pages' worth: cannot fit in a free slot
  Status failed = ok_status();
  {
    auto tx = sql::Transaction::begin_immediate(d);
    REQUIRE(tx);
    auto st = d.prepare("INSERT INTO t(v) VALUES (?)");
    REQUIRE(st);
    (*st)->bind(1, row);
    failed = (*st)->run();
  }  // rolled back
  REQUIRE_FALSE(failed.ok());
  CHECK(failed.error().code == Code::kInsufficientStorage);
  CHECK_THAT(failed.error().message, StartsWith("no space left on device"));
  CHECK_THAT(failed.error().message, Contains(dir.path()));
  CHECK(sql_int(path, "SELECT count(*) FROM t") == 0);

  // The same connection writes once there is room again.
  REQUIRE(d.query_text("PRAGMA max_page_count=100000"));
  {
    auto tx = sql::Transaction::begin_immediate(d);
    REQUIRE(tx);
    auto st = d.prepare("INSERT INTO t(v) VALUES (?)");
    REQUIRE(st);
    (*st)->bind(1, row);
    REQUIRE((*st)->run());
    REQUIRE(tx->commit());
  }
  CHECK(sql_int(path, "SELECT count(*) FROM t") == 1);
  CHECK(integrity(path) == "ok");
}

TEST_CASE("store - writes on a full tmpfs fail with the cause, reads work, writes resume when space returns",
          "[store][disk-full]") {
  if (::geteuid() != 0) KILN_SKIP("mounting a tmpfs needs root");
  TempDir scratch;
  const std::string mnt = scratch.file("small");
  TinyTmpfs tmpfs(mnt, "2M");
  if (!tmpfs.mounted()) KILN_SKIP("cannot mount a tmpfs here: " << std::strerror(errno));
  const std::string path = mnt + "/kiln.db";
  FakeClock clock;
  std::unique_ptr<NodeStore> store = open_migrated(path, &clock, 2);
  REQUIRE(store->create_node(make_node("before-1", {"aa:00:00:00:00:01"}), event("node.created")));
  REQUIRE(store->create_node(make_node("before-2", {"aa:00:00:00:00:02"}), event("node.created")));
  const int64_t events_before = count_events(path);

  fill(mnt + "/filler");
  int refused = 0;
  for (int i = 0; i < 5; ++i) {
    const std::string name = "during-" + std::to_string(i);
    auto r = store->create_node(make_node(name, {"bb:00:00:00:00:0" + std::to_string(i)}), event("node.created"));
    if (r) continue;  // a write that found room in a page already allocated
    ++refused;
    CHECK(r.error().code == Code::kInsufficientStorage);
    CHECK_THAT(r.error().message, StartsWith("no space left on device"));
    CHECK_THAT(r.error().message, Contains(mnt));
  }
  CHECK(refused == 5);
  // Reads are served from what is committed.
  auto got = store->get_node("before-2");
  REQUIRE(got);
  CHECK(got->name == "before-2");
  auto updated = store->update_node_if("before-1", {}, [](Node& n) {
    n.last_error = std::string(64 * 1024, 'd');
    return ok_status();
  }, {event("node.updated")});
  REQUIRE_FALSE(updated);
  CHECK(updated.error().code == Code::kInsufficientStorage);

  // Space returns: the same store (the same writer connection) writes again.
  std::filesystem::remove(mnt + "/filler");
  auto after = store->create_node(make_node("after", {"cc:00:00:00:00:01"}), event("node.created"));
  REQUIRE(after);
  REQUIRE(store->update_node_if("before-1", {}, [](Node& n) {
    n.last_error = "room again";
    return ok_status();
  }, {event("node.updated")}));
  store.reset();

  CHECK(integrity(path) == "ok");
  CHECK(sql_column(path, "SELECT name FROM nodes ORDER BY name") ==
        std::vector<std::string>{"after", "before-1", "before-2"});
  // Every refused write left no event; the two that worked after left theirs.
  CHECK(count_events(path) == events_before + 2);
  CHECK(sql_text(path, "SELECT last_error FROM nodes WHERE name = 'before-1'") == "room again");
}
