#pragma once
// SqliteStore: the NodeStore on one SQLite file (WAL).
//
// Connections. One writer connection, guarded by writer_mu_, performs every
// write: each public mutation is one BEGIN IMMEDIATE transaction that reads
// what it must check, writes the rows and appends the events, then commits;
// the event listener is called after the commit while the mutex is still held,
// so listeners see sequence numbers in increasing order (and must be quick: a
// listener should only wake whoever streams events). A small pool of
// reader connections (query_only) serves reads; WAL lets them read a committed
// snapshot while the writer works. Readers that need more than one query
// (a node and its ports, a page and the page's ports) run them inside one read
// transaction, so they never see a node without the ports committed with it.
//
// The per-node lock (Node::reservation) is just a column: taking it is an
// update_node_if with NodeCondition{.reservation = ""}, which, running under
// BEGIN IMMEDIATE on the single writer, is atomic against every other writer
// of this file, in this process or another.
//
// Statements are prepared once per connection and cached by SQL text (the
// list query's text depends only on which filters are set and the sort, never
// on their values, so the cache stays small).
//
// Re-entrancy: `mutate` in update_node_if and the event listener run with the
// writer held; calling a writing method of the same store from inside them
// would deadlock, so that is refused with kInternal (set_event_listener, which
// returns nothing, must not be called from there). Reads use the reader pool
// and work.
//
// Clarifications of the NodeStore contract as implemented here:
// - create_node/create_port: created_at is kept when set (else now), version is
//   kept when > 0 (else 1); updated_at = now. Port ids and created_at are
//   filled when empty.
// - Ports read back in (created_at, insertion order), so a node's ports keep the
//   order they were created in.
// - Events: node_id is filled with the node's id when empty, tenant with the
//   node's tenant after the change (before it, when the change cleared it) so a
//   release is still shown to the tenant that was released.
// - count_nodes_by_state has every provision state as a key, 0 when empty.
// - has_token_with_role counts only tokens that have not expired.
// - list_* limits must be > 0 (kInvalidArgument, field "limit").

#include <atomic>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "controller/store/sql/sql_store.h"
#include "controller/store/sqlite.h"

namespace kiln {

class SqliteStore final : public SqlStore {
 public:
  // Use open_sqlite_store(); this is public for tests that need the concrete type.
  static Result<std::unique_ptr<SqliteStore>> open(const SqliteStoreOptions& options);
  ~SqliteStore() override;

  Status migrate() override;
  Result<std::vector<std::string>> applied_migrations() override;

  // EventLog's listener (the flows of NodeRepo and EventLog are SqlStore's:
  // sql/nodes.cc, sql/events.cc)
  void set_event_listener(std::function<void(int64_t)> listener) override;

 private:
  // Exclusive use of the writer connection for one call.
  class WriterLock;
  // Exclusive use of one reader connection for one call; returned on scope exit.
  class ReaderLease;

  SqliteStore(const SqliteStoreOptions& options, std::unique_ptr<sql::Database> writer,
              std::vector<std::unique_ptr<sql::Database>> readers);

  // SqlStore's engine hooks: the writer connection under BEGIN IMMEDIATE,
  // the reader pool, AUTOINCREMENT event numbers announced while the writer
  // is still held (so listeners see them in order).
  Status write(const std::function<Status(Tx&)>& f) override;
  Status autocommit(const std::function<Status(db::Conn&)>& f) override;
  Status read(const std::function<Status(db::Conn&)>& f) override;
  Status snapshot(const std::function<Status(db::Conn&)>& f) override;
  Result<int64_t> insert_events(db::Conn& conn, const std::vector<EventDraft>& events, const Node* node,
                                const std::string& fallback_tenant) override;
  int64_t now_ms() const override { return clock_->now_ms(); }
  // Engaged: the data directory's lock keeps every other kilnd out, so every
  // write goes through writer_ (see NodeStore::write_generation).
  std::optional<uint64_t> write_generation() const override { return generation_.load(std::memory_order_acquire); }
  // The writer (kInternal when this thread already holds it: a write from
  // inside a write would deadlock) and a pooled reader, for the hooks above
  // and migrations.
  Result<WriterLock> lock_writer();
  ReaderLease lease_reader();
  void notify(int64_t seq);

  const SqliteStoreOptions options_;
  SystemClock system_clock_;
  const Clock* clock_;

  std::mutex writer_mu_;
  std::atomic<std::thread::id> writer_owner_{};
  std::unique_ptr<sql::Database> writer_;
  std::function<void(int64_t)> listener_;  // guarded by writer_mu_
  // write_generation(): moved when the writer is released after a write
  // that changed a row of a table readers may cache (`changed_`, set by
  // SQLite's update hook on the writer, guarded by writer_mu_).
  std::atomic<uint64_t> generation_{0};
  bool changed_ = false;
  static void on_row_changed(void* self, int op, const char* db, const char* table, int64_t rowid);

  std::mutex readers_mu_;
  std::condition_variable reader_free_;
  std::vector<std::unique_ptr<sql::Database>> readers_;
  std::vector<sql::Database*> free_readers_;  // guarded by readers_mu_
};

}  // namespace kiln
