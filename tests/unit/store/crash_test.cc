// Crash safety: a writer process killed with SIGKILL in the middle of its work
// leaves a consistent file: integrity_check passes, every node's version
// matches the events committed with it, migrations are intact, and the store
// opens and works again.
#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "controller/store/migrations.h"
#include "store_test_util.h"

using namespace kiln;
using namespace kiln::test;

namespace {

// The child: create nodes and update each a few times, until killed. Uses no
// Catch2 macros (it must never return into the test runner).
[[noreturn]] void crash_child(const std::string& path) {
  SqliteStoreOptions o;
  o.path = path;
  o.reader_connections = 1;
  auto s = open_sqlite_store(o);
  if (!s) _exit(2);
  NodeStore& store = **s;
  for (uint64_t i = 0;; ++i) {
    Node n;
    n.name = "crash-" + std::to_string(getpid()) + "-" + std::to_string(i);
    n.bmc.driver = "fake";
    n.ports.push_back(Port{"", "", "cc:" + std::to_string(i), true, 0});
    EventDraft created;
    created.type = "node.created";
    auto c = store.create_node(n, created);
    if (!c) _exit(3);
    for (uint64_t k = 0; k < 1 + i % 4; ++k) {
      EventDraft e;
      e.type = "provision.transition";
      e.detail = {{"step", k}};
      auto u = store.update_node_if(
          c->id, NodeCondition{c->version + static_cast<int64_t>(k), {}, {}},
          [k](Node& x) {
            x.provision_step = "step-" + std::to_string(k);
            x.inventory = nlohmann::json{{"blob", std::string(2000, 'x')}};  // bigger pages, more WAL
            return ok_status();
          },
          {e});
      if (!u) _exit(4);
    }
  }
}

}  // namespace

TEST_CASE("a writer killed mid-flight leaves a consistent database", "[store][crash]") {
  TempDir dir;
  std::string path = dir.file("kiln.db");
  // Create and migrate in the parent, then close: no connection crosses fork().
  open_migrated(path, nullptr).reset();

  pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) crash_child(path);

  // Let it get going (it must have committed something), then kill it ~300 ms in.
  auto start = std::chrono::steady_clock::now();
  while (count_nodes(path) < 5 && std::chrono::steady_clock::now() - start < std::chrono::seconds(10))
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  REQUIRE(kill(child, SIGKILL) == 0);
  int status = 0;
  REQUIRE(waitpid(child, &status, 0) == child);
  REQUIRE(WIFSIGNALED(status));  // it was still working, not failed early
  CHECK(WTERMSIG(status) == SIGKILL);

  CHECK(sql_text(path, "PRAGMA integrity_check") == "ok");
  CHECK(sql_text(path, "PRAGMA foreign_key_check").empty());
  int64_t nodes = count_nodes(path);
  INFO("nodes committed before the kill: " << nodes);
  CHECK(nodes >= 5);
  // Every committed node change came with its events, and nothing else did.
  CHECK(sql_int(path,
                "SELECT count(*) FROM nodes n WHERE n.version != 1 + (SELECT count(*) FROM events e"
                " WHERE e.node_id = n.id AND e.type = 'provision.transition')") == 0);
  CHECK(sql_int(path, "SELECT count(*) FROM events WHERE type = 'node.created'") == nodes);
  CHECK(sql_int(path, "SELECT count(*) FROM ports") == nodes);
  CHECK(sql_int(path, "SELECT count(*) FROM events WHERE node_id NOT IN (SELECT id FROM nodes)") == 0);

  auto store = open_migrated(path, nullptr);
  auto applied = store->applied_migrations();
  REQUIRE(applied);
  CHECK(applied->size() == store::embedded_migrations().size());
  auto n = store->create_node(make_node("after-crash", {"dd:00:00:00:00:01"}), event("node.created"));
  REQUIRE(n);
  CHECK(store->get_node("after-crash"));
  auto listed = store->list_nodes({}, ListOptions{1000, "", "created_at", false});
  REQUIRE(listed);
  CHECK(static_cast<int64_t>(listed->size()) == std::min<int64_t>(nodes + 1, 1000));
  CHECK(sql_text(path, "PRAGMA integrity_check") == "ok");
}
