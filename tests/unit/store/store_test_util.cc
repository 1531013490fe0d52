#include "store_test_util.h"

#include <sqlite3.h>
#include <stdlib.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <stdexcept>

namespace kiln::test {

TempDir::TempDir() {
  char tmpl[] = "/tmp/kiln-store-test-XXXXXX";
  if (mkdtemp(tmpl) == nullptr) throw std::runtime_error("mkdtemp failed");
  path_ = tmpl;
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

std::unique_ptr<NodeStore> open_migrated(const std::string& path, const Clock* clock, int readers) {
  SqliteStoreOptions o;
  o.path = path;
  o.clock = clock;
  o.reader_connections = readers;
  Result<std::unique_ptr<NodeStore>> s = open_sqlite_store(o);
  if (!s) FAIL("open_sqlite_store: " << s.error().message);
  Status m = (*s)->migrate();
  if (!m) FAIL("migrate: " << m.error().message);
  return std::move(*s);
}

Node make_node(const std::string& name, std::vector<std::string> macs) {
  Node n;
  n.name = name;
  n.bmc.driver = "fake";
  n.bmc.address = "fake://" + (name.empty() ? std::string("anon") : name);
  for (const std::string& m : macs) {
    Port p;
    p.address = m;
    n.ports.push_back(p);
  }
  return n;
}

EventDraft event(const std::string& type) {
  EventDraft e;
  e.type = type;
  return e;
}

namespace {
struct Raw {
  sqlite3* db = nullptr;
  explicit Raw(const std::string& path) {
    if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE, nullptr) != SQLITE_OK)
      throw std::runtime_error("open " + path + ": " + sqlite3_errmsg(db));
    sqlite3_busy_timeout(db, 5000);
  }
  ~Raw() { sqlite3_close(db); }
  template <typename F>
  void rows(const std::string& q, F f) {
    sqlite3_stmt* st = nullptr;
    if (sqlite3_prepare_v2(db, q.c_str(), -1, &st, nullptr) != SQLITE_OK)
      throw std::runtime_error("prepare " + q + ": " + sqlite3_errmsg(db));
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) f(st);
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE) throw std::runtime_error("step " + q + ": " + sqlite3_errstr(rc));
  }
};
}  // namespace

int64_t sql_int(const std::string& path, const std::string& query) {
  Raw r(path);
  int64_t v = -1;
  r.rows(query, [&](sqlite3_stmt* st) { v = sqlite3_column_int64(st, 0); });
  return v;
}

std::string sql_text(const std::string& path, const std::string& query) {
  auto c = sql_column(path, query);
  return c.empty() ? std::string() : c.front();
}

std::vector<std::string> sql_column(const std::string& path, const std::string& query) {
  Raw r(path);
  std::vector<std::string> out;
  r.rows(query, [&](sqlite3_stmt* st) {
    const unsigned char* t = sqlite3_column_text(st, 0);
    out.emplace_back(t != nullptr ? reinterpret_cast<const char*>(t) : "");
  });
  return out;
}

int64_t count_nodes(const std::string& path) { return sql_int(path, "SELECT count(*) FROM nodes"); }
int64_t count_events(const std::string& path) { return sql_int(path, "SELECT count(*) FROM events"); }

}  // namespace kiln::test
