#pragma once
// PgStore: the whole NodeStore (controller/store/store.h: nodes, events,
// tokens, tenants, agent credentials and commands, the image and profile
// catalogue, validation reports, hypervisor hosts, allocations and usage) on
// PostgreSQL, the database several kilnd instances share (`kilnd --database
// postgresql://...`, docs/scale-out.md). Each aggregate's file is named
// below; the conformance suite (tests/unit/store/conformance) runs the same
// cases on it and on SqliteStore.
//
// Connections. A pool of `connections` libpq connections; each call borrows
// one for its duration (waiting while all are busy) and returns it. Every
// mutation is one READ COMMITTED transaction that writes the rows and
// appends their events, then commits.
//
// Database outages. Before lending a connection the pool reads what the
// server sent it while idle (pg::Connection::alive): a server that stopped
// or restarted, or a backend terminated, is seen there and the connection
// re-established, so the first call after the server is back does not fail
// on a connection that died with it. While the server stays away every call
// is kUnavailable at once (the API's 503 with Retry-After) and reconnecting
// backs off: after a failed attempt no connection of the pool tries again
// before `reconnect_backoff` (doubling after each failure up to
// `reconnect_backoff_max`, reset by a success), so calls arriving during an
// outage cost a failed connect each only that often, never a busy loop, and
// recovery is seen within `reconnect_backoff_max` of the server's return.
// A connection lost mid-transaction makes that call kUnavailable; the
// server rolled the transaction back (a COMMIT whose answer was lost may
// have committed: the flows' writes are conditional, so a retry of one that
// did finds its condition gone rather than applying it twice).
//
// The per-node lock (Node::reservation) is a column, taken as in SQLite by
// update_node_if with NodeCondition{.reservation = ""}. Here several writers
// (threads, other kilnd) run at once, so the write is one conditional UPDATE:
// the node is read, the condition checked and `mutate` applied in memory, and
// the row written back only `WHERE id = $1 AND version = <version read>`. If
// another writer committed in between, that UPDATE touches no row; the
// attempt is rolled back and made once more, reading the row FOR UPDATE this
// time (the condition is checked again, so a second taker of a free
// reservation gets kConflict). The common, uncontended write holds no row
// lock while `mutate` runs; a contended one waits its turn rather than
// retrying without end.
//
// Events. A writing transaction queues its events (event_queue), unnumbered,
// beside the change they describe; after its COMMIT the same call publishes
// them: kiln_publish_events() numbers every committed queued event from
// event_counter and moves it into `events`, one publisher at a time
// (schemas/sql/postgresql/024_event_queue.sql; pg_events.cc says why this
// design). A writer that finds no publisher at work publishes in its own
// transaction instead, just before its COMMIT (one commit instead of two:
// 027_publish_in_writer.sql). The numbers are gap-free, a reader paging by `seq > since` never
// misses one committed late (only committed events are numbered, and each
// publisher's rows are visible before the next publisher numbers), and
// writers no longer wait for each other's commits: only publishing is
// serialized, and one publish takes every event committed so far. A store
// call returns after its events are published, unless publishing failed
// after the commit (the connection lost): the call still succeeds, and the
// next publish by any instance, at the latest the listening thread's poll,
// numbers them.
//
// Other aggregates' races, each settled in the database so that several
// kilnd agree (the files say how): a profile replace is conditional on the
// version read (sql/profiles.cc); racing seeders of the default profiles
// create each default once (sql/profiles.cc); validation reports are numbered
// under a short transaction-scoped lock (sql/validations.cc, db::lock_tx); host
// capacity is booked under host row locks, and two placements of one node
// end with one machine (sql/host_rows.h, sql/hosts.cc).
//
// Listener: called with the highest seq known committed, after every commit
// of this process that appended events (on the writing thread) and after
// commits of other instances sharing the database (on the listening thread).
// Calls are serialized and never go backwards; one call may cover several
// commits. How other instances' events arrive: every publish that numbers
// events also runs NOTIFY kiln_events, '<the highest seq>' (delivered by the
// server at its commit). Once a listener is set, PgStore keeps one
// more connection of its own that LISTENs on kiln_events, on its own thread
// waiting on the socket, and calls the listener with the highest seq of what
// arrived. When that connection drops it is opened again (every
// `listen_retry`), and at (re)connection and every `event_poll_interval` the
// thread also publishes what is queued and calls the listener with the
// highest seq published, so a notification missed while disconnected, or a
// writer that died between its commit and its publish, delays an event,
// never loses it.
//
// Write generation (NodeStore::database_generation). Other instances write
// to the same database, so no counter in this process can say that nothing
// changed; the database can. The generation is the text of
// pg_current_snapshot() (xmin:xmax:xip-list), read by one statement outside
// any transaction, which takes a snapshot of its own and no transaction id.
// Two equal snapshots mean the same set of committed transactions: a
// transaction that commits either was running (listed in xip, or at or above
// xmax, since xmax is one past the newest finished one) and leaves that
// list or moves xmax, or had not started and moves xmax when it ends. So an
// answer read after a snapshot S is at least as new as every write that
// committed before S, and it stays current while the snapshot is still S.
// Any commit in the cluster moves it, whatever it wrote: conductor
// heartbeats (every instance's, every 2 s by default), audit rows, other
// databases of the server. That ends kept answers early, never late. What
// runs without a transaction id (reads, kiln_publish_events() when nothing
// is queued, a sequence's nextval) changes no row a read returns and leaves
// it. One round trip, on a pooled connection.
//
// Re-entrancy: `mutate` (and place_virtual_node's planner, which also runs
// while host rows are locked) runs while the call holds a pooled connection;
// calling this store from inside it borrows another one, and blocks forever
// when the pool has none left, so do not.
//
// Allocations: the row locks a claim takes, in order, so that claims from
// several kilnd are all or nothing without SQLite's one writer, are
// described with the flows, in sql/allocation_claims.cc.
//
// Clarifications shared with SqliteStore (controller/store/sqlite_store.h):
// created_at kept when set, version kept when > 0; ports read back in
// creation order; event node_id/tenant filled from the node; every
// provision state is a key of count_nodes_by_state; list limits must be > 0.
//
// Errors as NodeStore (controller/store/store.h); kUnavailable when the
// server cannot be reached (or a deadlock or serialization failure was
// reported: retry).

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "common/clock.h"
#include "common/result.h"
#include "controller/store/access_store.h"
#include "controller/store/agent_store.h"
#include "controller/store/allocation_store.h"
#include "controller/store/catalogue_store.h"
#include "controller/store/conductor_store.h"
#include "controller/store/event_log.h"
#include "controller/store/host_store.h"
#include "controller/store/node_repo.h"
#include "controller/store/pg/connection.h"
#include "controller/store/sql/sql_store.h"
#include "controller/store/store.h"
#include "controller/store/tenant_store.h"
#include "controller/store/validation_store.h"

namespace kiln {

struct PgStoreOptions {
  // libpq connection string or URI ("postgresql://kiln@db:5432/kiln"). May hold
  // a password: it is never logged or put into an error.
  std::string conninfo;
  // Connections kept open. Each blocking call uses one, so this bounds how many
  // store calls run at once in this process.
  int connections = 4;
  // Source of created_at/updated_at/event timestamps; the system clock when null.
  const Clock* clock = nullptr;
  // The listening thread's safety net (see "Listener"): how often it
  // publishes what is queued and reads the highest seq, whatever
  // notifications came.
  std::chrono::milliseconds event_poll_interval{2000};
  // How soon the listening thread tries again when it cannot connect.
  std::chrono::milliseconds listen_retry{500};
  // The pool's pause after a failed reconnect, doubled per failure up to the
  // max (see "Database outages"): long enough that an outage costs nothing,
  // short enough that a restarted server is back in use within 2 s.
  std::chrono::milliseconds reconnect_backoff{100};
  std::chrono::milliseconds reconnect_backoff_max{2000};
};

class PgStore final : public SqlStore {
 public:
  // Opens the pool (every connection, so a wrong address fails here).
  // Does not migrate. The listening connection opens when a listener is set;
  // the destructor stops its thread.
  static Result<std::unique_ptr<PgStore>> open(const PgStoreOptions& options);
  ~PgStore() override;

  // Applies pending migrations under the migration advisory lock
  // (controller/store/pg/migrations.h).
  Status migrate() override;
  Result<std::vector<std::string>> applied_migrations() override;

  // EventLog's listener (pg_events.cc; the flows of NodeRepo and EventLog are
  // SqlStore's: sql/nodes.cc, sql/events.cc)
  void set_event_listener(std::function<void(int64_t)> listener) override;

  // The cluster's snapshot as the write generation (see "Write generation").
  bool has_database_generation() const override { return true; }
  Result<WriteGeneration> database_generation() override;

 private:
  // Exclusive use of one pooled connection; returned on scope exit.
  class Lease {
   public:
    Lease(PgStore& store, pg::Connection* conn) : store_(&store), conn_(conn) {}
    Lease(Lease&& o) noexcept : store_(o.store_), conn_(o.conn_) { o.conn_ = nullptr; }
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;
    Lease& operator=(Lease&&) = delete;
    ~Lease();
    pg::Connection& conn() const { return *conn_; }

   private:
    PgStore* store_;
    pg::Connection* conn_;
  };

  PgStore(const PgStoreOptions& options, std::vector<std::unique_ptr<pg::Connection>> conns);

  // SqlStore's engine hooks: a pooled connection; BEGIN (READ COMMITTED) for
  // a write, REPEATABLE READ READ ONLY for a snapshot; events queued in the
  // transaction, published (numbered, NOTIFY) after its commit and then
  // announced to this instance's listener.
  Status write(const std::function<Status(Tx&)>& f) override;
  Status autocommit(const std::function<Status(db::Conn&)>& f) override;
  Status read(const std::function<Status(db::Conn&)>& f) override;
  Status snapshot(const std::function<Status(db::Conn&)>& f) override;
  Result<int64_t> insert_events(db::Conn& conn, const std::vector<EventDraft>& events, const Node* node,
                                const std::string& fallback_tenant) override;
  int64_t now_ms() const override { return clock_->now_ms(); }
  // Borrows a connection (waits for one), reconnecting it when it was lost.
  Result<Lease> lease();
  // Publishes every committed queued event (kiln_publish_events(), in its own
  // transaction: call it outside one); the highest seq published so far,
  // which covers every event committed before the call. kUnavailable when
  // the connection is lost.
  static Result<int64_t> publish_events(pg::Connection& conn);
  // Inside a writing transaction, as its last statement before COMMIT:
  // publishes as publish_events does, in this transaction, if no other
  // publisher holds the lock (kiln_publish_events_in_writer()); the highest
  // seq published, or nullopt when the lock was busy (publish after the
  // commit then).
  static Result<std::optional<int64_t>> publish_events_in_writer(pg::Connection& conn);
  void notify(int64_t seq);
  // The listening thread (pg_events.cc): LISTEN kiln_events, wait on the
  // socket or wake_fd_, call notify(); reconnects and polls (see "Listener").
  void listen_loop();
  // Waits until the listening socket `fd` (-1: none) is readable, the store is
  // being destroyed, or `timeout` passed; whether `fd` is readable.
  bool wait_listen(int fd, std::chrono::milliseconds timeout);

  SystemClock system_clock_;
  const Clock* clock_;

  std::mutex pool_mu_;
  std::condition_variable pool_free_;
  std::vector<std::unique_ptr<pg::Connection>> conns_;
  std::vector<pg::Connection*> free_;  // guarded by pool_mu_
  // Reconnect back-off (see "Database outages"), guarded by pool_mu_.
  const std::chrono::milliseconds reconnect_backoff_;
  const std::chrono::milliseconds reconnect_backoff_max_;
  std::chrono::milliseconds backoff_now_{0};         // 0: the last attempt succeeded
  std::chrono::steady_clock::time_point retry_at_;  // no reconnect before this
  std::string last_connect_error_;                  // libpq's words from the last failure

  std::mutex listener_mu_;
  std::function<void(int64_t)> listener_;  // guarded by listener_mu_
  int64_t notified_seq_ = 0;               // guarded by listener_mu_

  // The listening thread, started by the first set_event_listener().
  const std::string conninfo_;
  const std::chrono::milliseconds event_poll_interval_;
  const std::chrono::milliseconds listen_retry_;
  std::once_flag listen_started_;
  std::thread listen_thread_;
  std::atomic<bool> stopping_{false};
  int wake_fd_[2] = {-1, -1};  // a pipe: the destructor writes to end the thread's wait
};

}  // namespace kiln
