// PostgreSQL only: where a write's events are numbered. With no publisher at
// work, the writing transaction numbers them itself just before its commit
// (kiln_publish_events_in_writer(), migration 027): the change and its
// events then carry the same transaction id (xmin). With the publishing lock
// held elsewhere the writer does not wait for it inside its transaction: it
// commits, then publishes once the lock is free, as before 027.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "backends.h"

using namespace kiln;
using namespace kiln::test;
using namespace std::chrono_literals;

namespace {

// The lock key kiln_publish_events() takes ("kevt" in ASCII).
constexpr const char* kPublishLock = "1801811572";

std::unique_ptr<pg::Connection> session(const std::string& conninfo) {
  auto c = pg::Connection::open(conninfo);
  REQUIRE(c);
  return std::move(*c);
}

// The transaction that wrote `node`'s row, and those of the events about it.
std::string node_xmin(pg::Connection& c, const std::string& node) {
  auto r = c.exec("SELECT xmin::text FROM nodes WHERE id = $1", pg::Params().add(node));
  REQUIRE(r);
  REQUIRE(r->size() == 1);
  return r->text(0, 0);
}

std::vector<std::string> event_xmins(pg::Connection& c, const std::string& node) {
  auto r = c.exec("SELECT xmin::text FROM events WHERE node_id = $1 ORDER BY seq", pg::Params().add(node));
  REQUIRE(r);
  std::vector<std::string> out;
  for (int i = 0; i < r->size(); ++i) out.push_back(r->text(i, 0));
  return out;
}

}  // namespace

TEST_CASE("postgresql: a lone writer numbers its events in its own transaction, and one that finds the publishing "
          "lock held commits without waiting for it and publishes after",
          "[store][postgresql][events]") {
  PostgresBackend b;
  auto look = session(b.conninfo);
  const int64_t before = *b.events().last_event_seq();

  // Alone: the node and its event committed together.
  auto alone = b.nodes().create_node(make_node("alone"), event("node.created"));
  REQUIRE(alone);
  CHECK(event_xmins(*look, alone->id) == std::vector<std::string>{node_xmin(*look, alone->id)});
  CHECK(*b.events().last_event_seq() == before + 1);
  CHECK(b.raw_sql("SELECT count(*) FROM event_queue") == 0);

  // Another session holds the publishing lock: the write commits (the node
  // is there, its event still queued) and its call waits for the lock.
  auto holder = session(b.conninfo);
  REQUIRE(holder->exec(std::string("SELECT pg_advisory_lock(") + kPublishLock + ")"));
  std::atomic<bool> returned{false};
  std::string id;
  std::thread writer([&] {
    auto n = b.nodes().create_node(make_node("behind"), event("node.created"));
    if (n) id = n->id;
    returned = true;
  });
  bool committed = false;
  for (int i = 0; i < 500 && !committed; ++i) {
    committed = b.raw_sql("SELECT count(*) FROM nodes WHERE name = 'behind'") == 1;
    if (!committed) std::this_thread::sleep_for(10ms);
  }
  CHECK(committed);
  CHECK(b.raw_sql("SELECT count(*) FROM event_queue") == 1);
  std::this_thread::sleep_for(100ms);
  CHECK_FALSE(returned.load());
  CHECK(*b.events().last_event_seq() == before + 1);

  REQUIRE(holder->exec(std::string("SELECT pg_advisory_unlock(") + kPublishLock + ")"));
  writer.join();
  REQUIRE(id != "");
  // Published after the commit, by another transaction.
  CHECK(*b.events().last_event_seq() == before + 2);
  CHECK(b.raw_sql("SELECT count(*) FROM event_queue") == 0);
  std::vector<std::string> xmins = event_xmins(*look, id);
  REQUIRE(xmins.size() == 1);
  CHECK(xmins[0] != node_xmin(*look, id));
}
