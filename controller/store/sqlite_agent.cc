// SqliteStore: kiln-agent boot tokens, os-phase secrets, sessions and
// outstanding commands (schemas/sql/sqlite/003_agent.sql, 011_agent_trust.sql,
// 017_agent_commands.sql) and events that change no node. Secrets arrive hashed and sealed: the
// broker (controller/agent) hashes and seals before calling.

#include "controller/store/sqlite_store.h"

#include "controller/store/sqlite_rows.h"
#include "controller/store/store_rules.h"

namespace kiln {

namespace {

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

Status SqliteStore::set_agent_boot_token(std::string_view node_id, std::string_view token_hash,
                                         std::string_view token_sealed) {
  return on_writer([&](sql::Database& db) -> Status {
    Result<sql::Transaction> tx = sql::Transaction::begin_immediate(db);
    if (!tx) return tx.take_error();
    Result<bool> exists = node_exists(db, node_id);
    if (!exists) return exists.take_error();
    if (!*exists) return Error(Code::kNotFound, "node " + std::string(node_id) + " not found");
    Result<sql::StatementRef> st = db.prepare(
        "INSERT INTO agent_boot_tokens (node_id, token_hash, token_sealed, created_at) VALUES (?1, ?2, ?3, ?4)"
        " ON CONFLICT (node_id) DO UPDATE SET token_hash = excluded.token_hash,"
        " token_sealed = excluded.token_sealed, created_at = excluded.created_at");
    if (!st) return st.take_error();
    (*st)->bind(1, node_id).bind(2, token_hash).bind(3, token_sealed).bind(4, now_ms());
    if (Status s = (*st)->run(); !s) return s;
    return tx->commit();
  });
}

Result<std::optional<std::string>> SqliteStore::agent_boot_token_sealed(std::string_view node_id) {
  std::optional<std::string> out;
  Status s = on_reader([&](sql::Database& db) -> Status {
    Result<sql::StatementRef> st = db.prepare("SELECT token_sealed FROM agent_boot_tokens WHERE node_id = ?1");
    if (!st) return st.take_error();
    (*st)->bind(1, node_id);
    Result<bool> row = (*st)->step();
    if (!row) return row.take_error();
    // A row from before migration 011 has no sealed token: treated as none,
    // so the next script mints one.
    if (*row && !(*st)->column_text(0).empty()) out = (*st)->column_text(0);
    return ok_status();
  });
  if (!s) return s.take_error();
  return out;
}

Status SqliteStore::clear_agent_boot_token(std::string_view node_id) {
  return on_writer([&](sql::Database& db) -> Status {
    Result<sql::StatementRef> st = db.prepare("DELETE FROM agent_boot_tokens WHERE node_id = ?1");
    if (!st) return st.take_error();
    (*st)->bind(1, node_id);
    return (*st)->run();
  });
}

namespace {

constexpr const char* kOsSecretColumns = "node_id, secret_hash, secret_sealed, created_at";

AgentOsSecret read_os_secret(const sql::Statement& st) {
  AgentOsSecret s;
  s.node_id = st.column_text(0);
  s.secret_hash = st.column_text(1);
  s.secret_sealed = st.column_text(2);
  s.created_at = st.column_int64(3);
  return s;
}

Result<std::optional<AgentOsSecret>> select_os_secret(sql::Database& db, std::string_view node_id) {
  Result<sql::StatementRef> st =
      db.prepare(std::string("SELECT ") + kOsSecretColumns + " FROM agent_os_secrets WHERE node_id = ?1");
  if (!st) return st.take_error();
  (*st)->bind(1, node_id);
  Result<bool> row = (*st)->step();
  if (!row) return row.take_error();
  if (!*row) return std::optional<AgentOsSecret>();
  return std::optional<AgentOsSecret>(read_os_secret(**st));
}

}  // namespace

Result<AgentOsSecret> SqliteStore::put_agent_os_secret(const AgentOsSecret& secret) {
  AgentOsSecret out;
  Status s = on_writer([&](sql::Database& db) -> Status {
    Result<sql::Transaction> tx = sql::Transaction::begin_immediate(db);
    if (!tx) return tx.take_error();
    Result<bool> exists = node_exists(db, secret.node_id);
    if (!exists) return exists.take_error();
    if (!*exists) return Error(Code::kNotFound, "node " + secret.node_id + " not found");
    Result<std::optional<AgentOsSecret>> have = select_os_secret(db, secret.node_id);
    if (!have) return have.take_error();
    if (*have) {
      out = **have;
      return ok_status();
    }
    Result<sql::StatementRef> st = db.prepare(
        "INSERT INTO agent_os_secrets (node_id, secret_hash, secret_sealed, created_at) VALUES (?1, ?2, ?3, ?4)");
    if (!st) return st.take_error();
    out = secret;
    if (out.created_at == 0) out.created_at = now_ms();
    (*st)->bind(1, out.node_id).bind(2, out.secret_hash).bind(3, out.secret_sealed).bind(4, out.created_at);
    if (Status r = (*st)->run(); !r) return r;
    return tx->commit();
  });
  if (!s) return s.take_error();
  return out;
}

Result<std::optional<AgentOsSecret>> SqliteStore::get_agent_os_secret(std::string_view node_id) {
  std::optional<AgentOsSecret> out;
  Status s = on_reader([&](sql::Database& db) -> Status {
    Result<std::optional<AgentOsSecret>> r = select_os_secret(db, node_id);
    if (!r) return r.take_error();
    out = std::move(*r);
    return ok_status();
  });
  if (!s) return s.take_error();
  return out;
}

Status SqliteStore::delete_agent_os_secret(std::string_view node_id) {
  return on_writer([&](sql::Database& db) -> Status {
    Result<sql::StatementRef> st = db.prepare("DELETE FROM agent_os_secrets WHERE node_id = ?1");
    if (!st) return st.take_error();
    (*st)->bind(1, node_id);
    return (*st)->run();
  });
}

Status SqliteStore::open_agent_session(const AgentSession& session, std::string_view boot_token_hash,
                                       const std::vector<EventDraft>& events) {
  return on_writer([&](sql::Database& db) -> Status {
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
  });
}

Result<AgentSession> SqliteStore::find_agent_session(std::string_view token_hash) {
  AgentSession out;
  Status s = on_reader([&](sql::Database& db) -> Status {
    Result<sql::StatementRef> st =
        db.prepare(std::string("SELECT ") + kSessionColumns + " FROM agent_sessions WHERE token_hash = ?1");
    if (!st) return st.take_error();
    (*st)->bind(1, token_hash);
    Result<bool> row = (*st)->step();
    if (!row) return row.take_error();
    if (!*row) return Error(Code::kNotFound, "agent session not found");
    out = read_session(**st);
    return ok_status();
  });
  if (!s) return s.take_error();
  return out;
}

Result<std::vector<AgentSession>> SqliteStore::agent_sessions_of(std::string_view node_id) {
  std::vector<AgentSession> out;
  Status s = on_reader([&](sql::Database& db) -> Status {
    Result<sql::StatementRef> st = db.prepare(std::string("SELECT ") + kSessionColumns +
                                              " FROM agent_sessions WHERE node_id = ?1 ORDER BY created_at");
    if (!st) return st.take_error();
    (*st)->bind(1, node_id);
    for (;;) {
      Result<bool> row = (*st)->step();
      if (!row) return row.take_error();
      if (!*row) return ok_status();
      out.push_back(read_session(**st));
    }
  });
  if (!s) return s.take_error();
  return out;
}

Status SqliteStore::delete_agent_sessions(std::string_view node_id) {
  return on_writer([&](sql::Database& db) -> Status {
    Result<sql::StatementRef> st = db.prepare("DELETE FROM agent_sessions WHERE node_id = ?1");
    if (!st) return st.take_error();
    (*st)->bind(1, node_id);
    return (*st)->run();
  });
}

namespace {

constexpr const char* kCommandColumns =
    "node_id, command_id, name, args, created_at, delivered_at, status, result, error, finished_at";

Result<AgentCommandRecord> read_command(const sql::Statement& st) {
  AgentCommandRecord c;
  c.node_id = st.column_text(0);
  c.id = st.column_text(1);
  c.name = st.column_text(2);
  Result<nlohmann::json> args = store_rows::parse_json_column(st, 3, "agent_commands.args");
  if (!args) return args.take_error();
  c.args = std::move(*args);
  c.created_at = st.column_int64(4);
  c.delivered_at = st.column_int64(5);
  c.status = st.column_text(6);
  Result<nlohmann::json> result = store_rows::parse_json_column(st, 7, "agent_commands.result");
  if (!result) return result.take_error();
  c.result = std::move(*result);
  c.error = st.column_text(8);
  c.finished_at = st.column_int64(9);
  return c;
}

Result<std::optional<AgentCommandRecord>> select_command(sql::Database& db, std::string_view node_id) {
  Result<sql::StatementRef> st =
      db.prepare(std::string("SELECT ") + kCommandColumns + " FROM agent_commands WHERE node_id = ?1");
  if (!st) return st.take_error();
  (*st)->bind(1, node_id);
  Result<bool> row = (*st)->step();
  if (!row) return row.take_error();
  if (!*row) return std::optional<AgentCommandRecord>();
  Result<AgentCommandRecord> c = read_command(**st);
  if (!c) return c.take_error();
  return std::optional<AgentCommandRecord>(std::move(*c));
}

}  // namespace

Status SqliteStore::put_agent_command(const AgentCommandRecord& command) {
  return on_writer([&](sql::Database& db) -> Status {
    Result<sql::Transaction> tx = sql::Transaction::begin_immediate(db);
    if (!tx) return tx.take_error();
    Result<bool> exists = node_exists(db, command.node_id);
    if (!exists) return exists.take_error();
    if (!*exists) return Error(Code::kNotFound, "node " + command.node_id + " not found");
    Result<sql::StatementRef> st = db.prepare(
        "INSERT OR REPLACE INTO agent_commands (node_id, command_id, name, args, created_at)"
        " VALUES (?1, ?2, ?3, ?4, ?5)");
    if (!st) return st.take_error();
    (*st)->bind(1, command.node_id)
        .bind(2, command.id)
        .bind(3, command.name)
        .bind(4, store_rules::json_text(command.args))
        .bind(5, command.created_at != 0 ? command.created_at : now_ms());
    if (Status s = (*st)->run(); !s) return s;
    return tx->commit();
  });
}

Result<std::optional<AgentCommandRecord>> SqliteStore::get_agent_command(std::string_view node_id) {
  std::optional<AgentCommandRecord> out;
  Status s = on_reader([&](sql::Database& db) -> Status {
    Result<std::optional<AgentCommandRecord>> r = select_command(db, node_id);
    if (!r) return r.take_error();
    out = std::move(*r);
    return ok_status();
  });
  if (!s) return s.take_error();
  return out;
}

Result<std::optional<AgentCommandHandout>> SqliteStore::deliver_agent_command(std::string_view node_id,
                                                                              int64_t now) {
  std::optional<AgentCommandHandout> out;
  // Every heartbeat asks: a reader answers unless this is the first delivery,
  // which only the writer may mark.
  bool first = false;
  Status read = on_reader([&](sql::Database& db) -> Status {
    Result<std::optional<AgentCommandRecord>> c = select_command(db, node_id);
    if (!c) return c.take_error();
    if (!*c || !(*c)->status.empty()) return ok_status();  // none, or its result is in
    first = (*c)->delivered_at == 0;
    if (!first) out = AgentCommandHandout{std::move(**c), false};
    return ok_status();
  });
  if (!read) return read.take_error();
  if (!first) return out;
  Status s = on_writer([&](sql::Database& db) -> Status {
    Result<sql::Transaction> tx = sql::Transaction::begin_immediate(db);
    if (!tx) return tx.take_error();
    Result<std::optional<AgentCommandRecord>> c = select_command(db, node_id);
    if (!c) return c.take_error();
    if (!*c || !(*c)->status.empty()) return ok_status();  // none, or its result is in
    AgentCommandHandout h;
    h.command = std::move(**c);
    if (h.command.delivered_at == 0) {
      Result<sql::StatementRef> st =
          db.prepare("UPDATE agent_commands SET delivered_at = ?2 WHERE node_id = ?1 AND delivered_at = 0");
      if (!st) return st.take_error();
      (*st)->bind(1, node_id).bind(2, now);
      if (Status r = (*st)->run(); !r) return r;
      h.first_delivery = db.changes() == 1;
      h.command.delivered_at = now;
      if (Status r = tx->commit(); !r) return r;
    }
    out = std::move(h);
    return ok_status();
  });
  if (!s) return s.take_error();
  return out;
}

Result<AgentCommandRecord> SqliteStore::record_agent_result(std::string_view node_id, std::string_view command_id,
                                                            std::string_view status, const nlohmann::json& result,
                                                            std::string_view error) {
  AgentCommandRecord out;
  Status s = on_writer([&](sql::Database& db) -> Status {
    Result<sql::Transaction> tx = sql::Transaction::begin_immediate(db);
    if (!tx) return tx.take_error();
    Result<std::optional<AgentCommandRecord>> c = select_command(db, node_id);
    if (!c) return c.take_error();
    if (!*c || (*c)->id != command_id || !(*c)->status.empty())
      return Error(Code::kConflict, "kilnd is not waiting for command " + std::string(command_id));
    out = std::move(**c);
    out.status = status;
    out.result = result;
    out.error = error;
    out.finished_at = now_ms();
    Result<sql::StatementRef> st = db.prepare(
        "UPDATE agent_commands SET status = ?3, result = ?4, error = ?5, finished_at = ?6"
        " WHERE node_id = ?1 AND command_id = ?2 AND status = ''");
    if (!st) return st.take_error();
    (*st)->bind(1, node_id)
        .bind(2, command_id)
        .bind(3, status)
        .bind(4, store_rules::json_text(result))
        .bind(5, error)
        .bind(6, out.finished_at);
    if (Status r = (*st)->run(); !r) return r;
    return tx->commit();
  });
  if (!s) return s.take_error();
  return out;
}

Status SqliteStore::clear_agent_command(std::string_view node_id, std::string_view command_id) {
  return on_writer([&](sql::Database& db) -> Status {
    Result<sql::StatementRef> st =
        db.prepare("DELETE FROM agent_commands WHERE node_id = ?1 AND (?2 = '' OR command_id = ?2)");
    if (!st) return st.take_error();
    (*st)->bind(1, node_id).bind(2, command_id);
    return (*st)->run();
  });
}

Status SqliteStore::append_events(const std::vector<EventDraft>& events) {
  if (events.empty()) return ok_status();
  return on_writer([&](sql::Database& db) -> Status {
    Result<sql::Transaction> tx = sql::Transaction::begin_immediate(db);
    if (!tx) return tx.take_error();
    Result<int64_t> seq = insert_events(events, nullptr, "");
    if (!seq) return seq.take_error();
    if (Status s = tx->commit(); !s) return s;
    notify(*seq);
    return ok_status();
  });
}

}  // namespace kiln
