#pragma once
// SqlStore: the NodeStore's flows, written once over the SQL seam
// (controller/store/sql/conn.h) and shared by the SQLite store
// (sqlite_store.h) and the PostgreSQL store (pg/pg_store.h). Each engine
// derives from it and supplies only what really differs: how a write
// transaction, a read and a read snapshot begin, and how events are numbered
// and announced (the hooks below). The flows' files are named beside the
// aggregates they implement.
//
// Threading and errors: as NodeStore (store.h). A hook runs `f` on a
// connection leased for the call; `f` must not call another store method
// that writes (the SQLite engine refuses it: one writer), and must return
// the first error it meets.

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "controller/store/sql/conn.h"
#include "controller/store/store.h"

namespace kiln {

class SqlStore : public NodeStore {
 public:
  // AccessStore (sql/tokens.cc)
  Result<TokenRecord> create_token(const TokenRecord& token) override;
  Result<TokenRecord> find_token_by_hash(std::string_view secret_hash) override;
  Result<std::vector<TokenRecord>> list_tokens() override;
  Status delete_token(std::string_view id) override;
  Result<bool> has_token_with_role(std::string_view role) override;
  Result<std::string> key_check(const std::string& proposed) override;

 protected:
  // One write transaction's connection, and the highest event sequence it
  // appended (announced to the listener after the commit).
  struct Tx {
    db::Conn& conn;
    int64_t last_seq = 0;
  };

  // Runs `f` in one write transaction: committed when `f` succeeds, rolled
  // back when it fails; its events are announced after the commit. SQLite:
  // the writer connection, BEGIN IMMEDIATE. PostgreSQL: a pooled
  // connection, BEGIN (READ COMMITTED), so `f` locks what it will update with
  // dialect().for_update.
  virtual Status write(const std::function<Status(Tx&)>& f) = 0;
  // Runs `f`, whose writes are each their own transaction (one statement, or
  // statements that need no atomicity between them), without BEGIN/COMMIT's
  // round trips.
  virtual Status autocommit(const std::function<Status(db::Conn&)>& f) = 0;
  // Runs `f` on a reader; each statement sees the latest committed state.
  virtual Status read(const std::function<Status(db::Conn&)>& f) = 0;
  // Runs `f` on a reader inside one read-only snapshot: its statements see
  // one committed state (a node and its ports, a page and its ports).
  virtual Status snapshot(const std::function<Status(db::Conn&)>& f) = 0;
  // Appends `events` inside the caller's write transaction, numbering them as
  // the engine does; returns the highest sequence written (0 for none). Node
  // events get the node's id and tenant (`fallback_tenant` when the node has
  // none any more) where the draft leaves them empty.
  virtual Result<int64_t> insert_events(db::Conn& conn, const std::vector<EventDraft>& events, const Node* node,
                                        const std::string& fallback_tenant) = 0;
  virtual int64_t now_ms() const = 0;

  // The hooks for a flow that returns a value: `f` returns Result<T>; its
  // error fails the hook (rolling a write back) and is returned as is.
  template <typename T, typename F>
  Result<T> write_value(F&& f) {
    return value_of<T>([&](auto&& g) { return write(g); }, f);
  }
  template <typename T, typename F>
  Result<T> autocommit_value(F&& f) {
    return value_of<T>([&](auto&& g) { return autocommit(g); }, f);
  }
  template <typename T, typename F>
  Result<T> read_value(F&& f) {
    return value_of<T>([&](auto&& g) { return read(g); }, f);
  }
  template <typename T, typename F>
  Result<T> snapshot_value(F&& f) {
    return value_of<T>([&](auto&& g) { return snapshot(g); }, f);
  }

  // insert_events inside `tx`, remembering the sequence to announce.
  Status append_tx_events(Tx& tx, const std::vector<EventDraft>& events, const Node* node,
                          const std::string& fallback_tenant);

 private:
  template <typename T, typename Hook, typename F>
  static Result<T> value_of(Hook&& hook, F& f) {
    std::optional<Result<T>> out;
    Status s = hook([&](auto& conn) -> Status {
      out.emplace(f(conn));
      if (*out) return ok_status();
      return out->error();
    });
    if (s) return std::move(*out);
    if (out && !*out) return std::move(*out);  // f's own error
    return s.take_error();                     // the hook failed (to begin, or to commit)
  }
};

}  // namespace kiln
