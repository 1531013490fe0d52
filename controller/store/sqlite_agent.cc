// SqliteStore: kiln-agent boot tokens and sessions (schemas/sql/003_agent.sql)
// and events that change no node. Only SHA-256 hashes of the secrets are
// written; the broker (controller/agent) hashes before calling.

#include "controller/store/sqlite_store.h"

namespace kiln {

namespace {

// SqliteStore's WriterLock and ReaderLease live in sqlite_store.cc; these do
// the same on the members handed to them (the store's one writer, with its
// re-entrancy guard, and its reader pool).
class WriterHold {
 public:
  WriterHold(std::mutex& mu, std::atomic<std::thread::id>& owner) : lock_(mu), owner_(owner) {
    owner_.store(std::this_thread::get_id());
  }
  ~WriterHold() { owner_.store(std::thread::id()); }
  WriterHold(const WriterHold&) = delete;
  WriterHold& operator=(const WriterHold&) = delete;

 private:
  std::unique_lock<std::mutex> lock_;
  std::atomic<std::thread::id>& owner_;
};

class ReaderHold {
 public:
  ReaderHold(std::mutex& mu, std::condition_variable& cv, std::vector<sql::Database*>& free)
      : mu_(mu), cv_(cv), free_(free) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return !free_.empty(); });
    db_ = free_.back();
    free_.pop_back();
  }
  ~ReaderHold() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      free_.push_back(db_);
    }
    cv_.notify_one();
  }
  ReaderHold(const ReaderHold&) = delete;
  ReaderHold& operator=(const ReaderHold&) = delete;
  sql::Database& db() const { return *db_; }

 private:
  std::mutex& mu_;
  std::condition_variable& cv_;
  std::vector<sql::Database*>& free_;
  sql::Database* db_ = nullptr;
};

Error reentrant_write() {
  return Error(Code::kInternal, "store: write from inside update_node_if's mutate or the event listener "
                                "(would deadlock)");
}

constexpr const char* kSessionColumns = "token_hash, node_id, phase, issued_state, created_at";

AgentSession read_session(const sql::Statement& st) {
  AgentSession s;
  s.token_hash = st.column_text(0);
  s.node_id = st.column_text(1);
  s.phase = st.column_text(2);
  s.issued_state = st.column_text(3);
  s.created_at = st.column_int64(4);
  return s;
}

// Whether a node with this id exists (on the writer, inside a transaction).
Result<bool> node_exists(sql::Database& db, std::string_view node_id) {
  Result<sql::StatementRef> st = db.prepare("SELECT 1 FROM nodes WHERE id = ?1");
  if (!st) return st.take_error();
  (*st)->bind(1, node_id);
  return (*st)->step();
}

}  // namespace

Status SqliteStore::set_agent_boot_token(std::string_view node_id, std::string_view token_hash) {
  if (writer_owner_.load() == std::this_thread::get_id()) return reentrant_write();
  WriterHold hold(writer_mu_, writer_owner_);
  sql::Database& db = *writer_;
  Result<sql::Transaction> tx = sql::Transaction::begin_immediate(db);
  if (!tx) return tx.take_error();
  Result<bool> exists = node_exists(db, node_id);
  if (!exists) return exists.take_error();
  if (!*exists) return Error(Code::kNotFound, "node " + std::string(node_id) + " not found");
  Result<sql::StatementRef> st = db.prepare(
      "INSERT INTO agent_boot_tokens (node_id, token_hash, created_at) VALUES (?1, ?2, ?3)"
      " ON CONFLICT (node_id) DO UPDATE SET token_hash = excluded.token_hash, created_at = excluded.created_at");
  if (!st) return st.take_error();
  (*st)->bind(1, node_id).bind(2, token_hash).bind(3, now_ms());
  if (Status s = (*st)->run(); !s) return s;
  return tx->commit();
}

Status SqliteStore::open_agent_session(const AgentSession& session, std::string_view boot_token_hash,
                                       const std::vector<EventDraft>& events) {
  if (writer_owner_.load() == std::this_thread::get_id()) return reentrant_write();
  WriterHold hold(writer_mu_, writer_owner_);
  sql::Database& db = *writer_;
  Result<sql::Transaction> tx = sql::Transaction::begin_immediate(db);
  if (!tx) return tx.take_error();
  if (!boot_token_hash.empty()) {
    Result<sql::StatementRef> del =
        db.prepare("DELETE FROM agent_boot_tokens WHERE node_id = ?1 AND token_hash = ?2");
    if (!del) return del.take_error();
    (*del)->bind(1, session.node_id).bind(2, boot_token_hash);
    if (Status s = (*del)->run(); !s) return s;
    if (db.changes() != 1) return Error(Code::kUnauthenticated, "boot token is unknown or already used");
  }
  {
    Result<sql::StatementRef> del = db.prepare("DELETE FROM agent_sessions WHERE node_id = ?1");
    if (!del) return del.take_error();
    (*del)->bind(1, session.node_id);
    if (Status s = (*del)->run(); !s) return s;
  }
  Result<sql::StatementRef> ins = db.prepare(
      "INSERT INTO agent_sessions (token_hash, node_id, phase, issued_state, created_at)"
      " VALUES (?1, ?2, ?3, ?4, ?5)");
  if (!ins) return ins.take_error();
  (*ins)->bind(1, session.token_hash)
      .bind(2, session.node_id)
      .bind(3, session.phase)
      .bind(4, session.issued_state)
      .bind(5, session.created_at != 0 ? session.created_at : now_ms());
  if (Status s = (*ins)->run(); !s) {
    Error e = s.take_error();
    if (e.code == Code::kConflict && e.message.find("FOREIGN KEY") != std::string::npos)
      return Error(Code::kNotFound, "node " + session.node_id + " not found");
    return e;
  }
  Result<int64_t> seq = insert_events(events, nullptr, "");
  if (!seq) return seq.take_error();
  if (Status s = tx->commit(); !s) return s;
  notify(*seq);
  return ok_status();
}

Result<AgentSession> SqliteStore::find_agent_session(std::string_view token_hash) {
  ReaderHold r(readers_mu_, reader_free_, free_readers_);
  Result<sql::StatementRef> st =
      r.db().prepare(std::string("SELECT ") + kSessionColumns + " FROM agent_sessions WHERE token_hash = ?1");
  if (!st) return st.take_error();
  (*st)->bind(1, token_hash);
  Result<bool> row = (*st)->step();
  if (!row) return row.take_error();
  if (!*row) return Error(Code::kNotFound, "agent session not found");
  return read_session(**st);
}

Result<std::vector<AgentSession>> SqliteStore::agent_sessions_of(std::string_view node_id) {
  ReaderHold r(readers_mu_, reader_free_, free_readers_);
  Result<sql::StatementRef> st = r.db().prepare(std::string("SELECT ") + kSessionColumns +
                                                " FROM agent_sessions WHERE node_id = ?1 ORDER BY created_at");
  if (!st) return st.take_error();
  (*st)->bind(1, node_id);
  std::vector<AgentSession> out;
  for (;;) {
    Result<bool> row = (*st)->step();
    if (!row) return row.take_error();
    if (!*row) break;
    out.push_back(read_session(**st));
  }
  return out;
}

Status SqliteStore::delete_agent_sessions(std::string_view node_id) {
  if (writer_owner_.load() == std::this_thread::get_id()) return reentrant_write();
  WriterHold hold(writer_mu_, writer_owner_);
  Result<sql::StatementRef> st = writer_->prepare("DELETE FROM agent_sessions WHERE node_id = ?1");
  if (!st) return st.take_error();
  (*st)->bind(1, node_id);
  return (*st)->run();
}

Status SqliteStore::append_events(const std::vector<EventDraft>& events) {
  if (events.empty()) return ok_status();
  if (writer_owner_.load() == std::this_thread::get_id()) return reentrant_write();
  WriterHold hold(writer_mu_, writer_owner_);
  Result<sql::Transaction> tx = sql::Transaction::begin_immediate(*writer_);
  if (!tx) return tx.take_error();
  Result<int64_t> seq = insert_events(events, nullptr, "");
  if (!seq) return seq.take_error();
  if (Status s = tx->commit(); !s) return s;
  notify(*seq);
  return ok_status();
}

}  // namespace kiln
