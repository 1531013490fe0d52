#pragma once
// Helpers shared by the store tests: a temporary directory, a migrated store on
// a real SQLite file in it, raw SQLite access for checks the store does not
// expose, and node/event builders.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/clock.h"
#include "controller/store/store.h"

namespace kiln::test {

// mkdtemp under /tmp; removed with its contents on destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// Opens the store at `path` and migrates it; fails the test on error.
std::unique_ptr<NodeStore> open_migrated(const std::string& path, const Clock* clock, int readers = 4);

// A temp dir, a fake clock and a migrated store in it.
struct StoreFixture {
  TempDir dir;
  FakeClock clock;
  std::string path = dir.file("kiln.db");
  std::unique_ptr<NodeStore> store = open_migrated(path, &clock);
};

Node make_node(const std::string& name = "", std::vector<std::string> macs = {});
EventDraft event(const std::string& type);

// Raw SQLite, for checks from outside the store (opened read-write, no pragmas).
int64_t sql_int(const std::string& path, const std::string& query);
std::string sql_text(const std::string& path, const std::string& query);
std::vector<std::string> sql_column(const std::string& path, const std::string& query);

int64_t count_nodes(const std::string& path);
int64_t count_events(const std::string& path);

}  // namespace kiln::test
