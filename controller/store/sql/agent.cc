#include <string>
#include <utility>

#include "controller/store/sql/sql_store.h"
#include "controller/store/store_rules.h"

namespace kiln {

// SqlStore: kiln-agent boot tokens, os-phase secrets, sessions and each
// node's outstanding command (AgentStore; schemas/sql/<dialect>/003_agent.sql,
// 011_agent_trust.sql, 017_agent_commands.sql). Secrets arrive hashed and
// sealed: the broker (controller/agent) hashes and seals before calling.
// Everything the agent protocol needs is here, not in one instance's memory,
// so an agent may talk to any kilnd sharing the database.
//
// Races between instances are settled in the database:
//   - A row keyed by a node is written with the node's row locked
//     (lock_node): the node's delete, which takes that row and then cascades
//     to these tables, waits for the write (and removes what it wrote), or
//     the write finds no node (kNotFound), never a foreign key failure.
//   - A boot token is consumed by one DELETE ... WHERE token_hash: a second
//     consumer finds no row (kUnauthenticated).
//   - The os secret is minted by INSERT ... ON CONFLICT DO NOTHING and read
//     back, so racing minters agree on the first.
//   - A command's first delivery is marked by the one UPDATE that still
//     finds delivered_at = 0, with the row locked while it is read again,
//     so one heartbeat alone records it; its result is the one UPDATE that
//     finds the command id with no result yet (any other poster gets
//     kConflict).

namespace {

using db::Binds;
using db::Rows;

Error node_gone(std::string_view node_id) {
  return Error(Code::kNotFound, "node " + std::string(node_id) + " not found");
}

// Inside a write: whether the node exists, its row locked until the
// transaction ends (see above; SQLite's writer transaction already excludes
// the delete).
Result<bool> lock_node(db::Conn& c, std::string_view node_id) {
  Result<int64_t> n =
      db::query_int(c, "SELECT 1 FROM nodes WHERE id = $1" + std::string(c.dialect().for_update), Binds().add(node_id));
  if (!n) return n.take_error();
  return *n > 0;
}

// As lock_node, kNotFound when there is no node.
Status node_locked(db::Conn& c, std::string_view node_id) {
  Result<bool> exists = lock_node(c, node_id);
  if (!exists) return exists.take_error();
  if (!*exists) return node_gone(node_id);
  return ok_status();
}

// Every row of `sql`, read with `read`.
template <typename T, typename Read>
Result<std::vector<T>> rows_of(db::Conn& c, const std::string& sql, const Binds& b, Read read) {
  Result<Rows> r = c.query(sql, b);
  if (!r) return r.take_error();
  return db::collect<T>(*r, read);
}

// The one row `sql` returns, if any.
template <typename T, typename Read>
Result<std::optional<T>> optional_row(db::Conn& c, const std::string& sql, const Binds& b, Read read) {
  Result<std::vector<T>> rows = rows_of<T>(c, sql, b, read);
  if (!rows) return rows.take_error();
  if (rows->empty()) return std::optional<T>();
  return std::optional<T>(std::move(rows->front()));
}

// --- sessions and os secrets

constexpr const char kSessionSelect[] =
    "SELECT token_hash, node_id, phase, issued_state, created_at FROM agent_sessions";

AgentSession read_session(const Rows& r) {
  return AgentSession{r.text(0), r.text(1), r.text(2), r.text(3), r.int64(4)};
}

constexpr const char kOsSecretSelect[] =
    "SELECT node_id, secret_hash, secret_sealed, created_at FROM agent_os_secrets";

AgentOsSecret read_os_secret(const Rows& r) { return AgentOsSecret{r.text(0), r.text(1), r.text(2), r.int64(3)}; }

Result<std::optional<AgentOsSecret>> os_secret_of(db::Conn& c, std::string_view node_id) {
  return optional_row<AgentOsSecret>(c, std::string(kOsSecretSelect) + " WHERE node_id = $1", Binds().add(node_id),
                                     read_os_secret);
}

// --- commands

constexpr const char kCommandColumns[] =
    "node_id, command_id, name, args, created_at, delivered_at, status, result, error, finished_at";

Result<AgentCommandRecord> read_command(const Rows& r) {
  AgentCommandRecord c;
  c.node_id = r.text(0);
  c.id = r.text(1);
  c.name = r.text(2);
  Result<nlohmann::json> args = db::json_column(r, 3, "agent_commands.args");
  if (!args) return args.take_error();
  c.args = std::move(*args);
  c.created_at = r.int64(4);
  c.delivered_at = r.int64(5);
  c.status = r.text(6);
  Result<nlohmann::json> result = db::json_column(r, 7, "agent_commands.result");
  if (!result) return result.take_error();
  c.result = std::move(*result);
  c.error = r.text(8);
  c.finished_at = r.int64(9);
  return c;
}

// The node's command, if any; `lock` reads it with the dialect's row lock.
Result<std::optional<AgentCommandRecord>> command_of(db::Conn& c, std::string_view node_id, bool lock = false) {
  std::string sql = std::string("SELECT ") + kCommandColumns + " FROM agent_commands WHERE node_id = $1";
  if (lock) sql += c.dialect().for_update;
  return optional_row<AgentCommandRecord>(c, sql, Binds().add(node_id), read_command);
}

}  // namespace

Status SqlStore::set_agent_boot_token(std::string_view node_id, std::string_view token_hash,
                                      std::string_view token_sealed) {
  return write([&](Tx& tx) -> Status {
    if (Status s = node_locked(tx.conn, node_id); !s) return s;
    Result<int64_t> n = tx.conn.exec(
        "INSERT INTO agent_boot_tokens (node_id, token_hash, token_sealed, created_at) VALUES ($1, $2, $3, $4)"
        " ON CONFLICT (node_id) DO UPDATE SET token_hash = excluded.token_hash,"
        " token_sealed = excluded.token_sealed, created_at = excluded.created_at",
        Binds().add(node_id).add(token_hash).add(token_sealed).add(now_ms()));
    if (!n) return n.take_error();
    return ok_status();
  });
}

Result<std::optional<std::string>> SqlStore::agent_boot_token_sealed(std::string_view node_id) {
  return read_value<std::optional<std::string>>([&](db::Conn& c) -> Result<std::optional<std::string>> {
    Result<std::optional<std::string>> sealed =
        optional_row<std::string>(c, "SELECT token_sealed FROM agent_boot_tokens WHERE node_id = $1",
                                  Binds().add(node_id), [](const Rows& r) { return r.text(0); });
    // A row from before migration 011 has no sealed token: treated as none,
    // so the next script mints one.
    if (sealed && *sealed && (*sealed)->empty()) sealed->reset();
    return sealed;
  });
}

Status SqlStore::clear_agent_boot_token(std::string_view node_id) {
  return autocommit([&](db::Conn& c) -> Status {
    Result<int64_t> n = c.exec("DELETE FROM agent_boot_tokens WHERE node_id = $1", Binds().add(node_id));
    if (!n) return n.take_error();
    return ok_status();
  });
}

Result<AgentOsSecret> SqlStore::put_agent_os_secret(const AgentOsSecret& secret) {
  AgentOsSecret in = secret;
  if (in.created_at == 0) in.created_at = now_ms();
  return write_value<AgentOsSecret>([&](Tx& tx) -> Result<AgentOsSecret> {
    if (Status s = node_locked(tx.conn, in.node_id); !s) return s.take_error();
    Result<int64_t> n = tx.conn.exec(
        "INSERT INTO agent_os_secrets (node_id, secret_hash, secret_sealed, created_at) VALUES ($1, $2, $3, $4)"
        " ON CONFLICT (node_id) DO NOTHING",
        Binds().add(in.node_id).add(in.secret_hash).add(in.secret_sealed).add(in.created_at));
    if (!n) return n.take_error();
    // Ours or the one that was there first: the same row for every caller.
    Result<std::optional<AgentOsSecret>> have = os_secret_of(tx.conn, in.node_id);
    if (!have) return have.take_error();
    if (!*have) return Error(Code::kInternal, "agent os secret missing after insert");
    return std::move(**have);
  });
}

Result<std::optional<AgentOsSecret>> SqlStore::get_agent_os_secret(std::string_view node_id) {
  return read_value<std::optional<AgentOsSecret>>([&](db::Conn& c) { return os_secret_of(c, node_id); });
}

Status SqlStore::delete_agent_os_secret(std::string_view node_id) {
  return autocommit([&](db::Conn& c) -> Status {
    Result<int64_t> n = c.exec("DELETE FROM agent_os_secrets WHERE node_id = $1", Binds().add(node_id));
    if (!n) return n.take_error();
    return ok_status();
  });
}

Status SqlStore::open_agent_session(const AgentSession& session, std::string_view boot_token_hash,
                                    const std::vector<EventDraft>& events) {
  const int64_t created_at = session.created_at != 0 ? session.created_at : now_ms();
  return write([&](Tx& tx) -> Status {
    // The node first, as its delete takes it before the agent rows.
    Result<bool> node = lock_node(tx.conn, session.node_id);
    if (!node) return node.take_error();
    if (!boot_token_hash.empty()) {  // a node that is gone has none
      Result<int64_t> used = tx.conn.exec("DELETE FROM agent_boot_tokens WHERE node_id = $1 AND token_hash = $2",
                                          Binds().add(session.node_id).add(boot_token_hash));
      if (!used) return used.take_error();
      if (*used != 1) return Error(Code::kUnauthenticated, "boot token is unknown or already used");
    }
    if (!*node) return node_gone(session.node_id);
    if (Result<int64_t> d = tx.conn.exec("DELETE FROM agent_sessions WHERE node_id = $1", Binds().add(session.node_id));
        !d)
      return d.take_error();
    Result<int64_t> ins = tx.conn.exec(
        "INSERT INTO agent_sessions (token_hash, node_id, phase, issued_state, created_at)"
        " VALUES ($1, $2, $3, $4, $5)",
        Binds().add(session.token_hash).add(session.node_id).add(session.phase).add(session.issued_state).add(
            created_at));
    if (!ins) return ins.take_error();
    return append_tx_events(tx, events, nullptr, "");
  });
}

Result<AgentSession> SqlStore::find_agent_session(std::string_view token_hash) {
  return read_value<AgentSession>([&](db::Conn& c) {
    return db::query_one<AgentSession>(c, std::string(kSessionSelect) + " WHERE token_hash = $1",
                                       Binds().add(token_hash), read_session, "agent session not found");
  });
}

Result<std::vector<AgentSession>> SqlStore::agent_sessions_of(std::string_view node_id) {
  return read_value<std::vector<AgentSession>>([&](db::Conn& c) {
    return rows_of<AgentSession>(c, std::string(kSessionSelect) + " WHERE node_id = $1 ORDER BY created_at",
                                 Binds().add(node_id), read_session);
  });
}

Status SqlStore::delete_agent_sessions(std::string_view node_id) {
  return autocommit([&](db::Conn& c) -> Status {
    Result<int64_t> n = c.exec("DELETE FROM agent_sessions WHERE node_id = $1", Binds().add(node_id));
    if (!n) return n.take_error();
    return ok_status();
  });
}

Status SqlStore::put_agent_command(const AgentCommandRecord& command) {
  const int64_t created_at = command.created_at != 0 ? command.created_at : now_ms();
  return write([&](Tx& tx) -> Status {
    if (Status s = node_locked(tx.conn, command.node_id); !s) return s;
    // A new command replaces the whole row: the delivery mark and any result
    // belonged to the command being replaced.
    Result<int64_t> n = tx.conn.exec(
        "INSERT INTO agent_commands (node_id, command_id, name, args, created_at)"
        " VALUES ($1, $2, $3, $4, $5) ON CONFLICT (node_id) DO UPDATE SET"
        " command_id = excluded.command_id, name = excluded.name, args = excluded.args,"
        " created_at = excluded.created_at, delivered_at = 0, status = '', result = '{}',"
        " error = '', finished_at = 0",
        Binds()
            .add(command.node_id)
            .add(command.id)
            .add(command.name)
            .add(store_rules::json_text(command.args))
            .add(created_at));
    if (!n) return n.take_error();
    return ok_status();
  });
}

Result<std::optional<AgentCommandRecord>> SqlStore::get_agent_command(std::string_view node_id) {
  return read_value<std::optional<AgentCommandRecord>>([&](db::Conn& c) { return command_of(c, node_id); });
}

Result<std::optional<AgentCommandHandout>> SqlStore::deliver_agent_command(std::string_view node_id, int64_t now) {
  using Handout = std::optional<AgentCommandHandout>;
  // Every heartbeat asks: a read answers unless this looks like the first
  // delivery, which only a write may mark.
  Result<Handout> seen = read_value<Handout>([&](db::Conn& c) -> Result<Handout> {
    Result<std::optional<AgentCommandRecord>> cmd = command_of(c, node_id);
    if (!cmd) return cmd.take_error();
    if (!*cmd || !(*cmd)->status.empty()) return Handout();  // none, or its result is in
    return Handout(AgentCommandHandout{std::move(**cmd), false});
  });
  if (!seen || !*seen || (*seen)->command.delivered_at != 0) return seen;
  return write_value<Handout>([&](Tx& tx) -> Result<Handout> {
    // Read again with the row locked: a racing heartbeat (or result) waits,
    // then sees it delivered.
    Result<std::optional<AgentCommandRecord>> cmd = command_of(tx.conn, node_id, /*lock=*/true);
    if (!cmd) return cmd.take_error();
    if (!*cmd || !(*cmd)->status.empty()) return Handout();
    AgentCommandHandout h{std::move(**cmd), false};
    if (h.command.delivered_at == 0) {
      Result<int64_t> mark =
          tx.conn.exec("UPDATE agent_commands SET delivered_at = $2 WHERE node_id = $1 AND delivered_at = 0",
                       Binds().add(node_id).add(now));
      if (!mark) return mark.take_error();
      h.first_delivery = *mark == 1;
      h.command.delivered_at = now;
    }
    return Handout(std::move(h));
  });
}

Result<AgentCommandRecord> SqlStore::record_agent_result(std::string_view node_id, std::string_view command_id,
                                                         std::string_view status, const nlohmann::json& result,
                                                         std::string_view error) {
  return write_value<AgentCommandRecord>([&](Tx& tx) -> Result<AgentCommandRecord> {
    Result<std::optional<AgentCommandRecord>> done = optional_row<AgentCommandRecord>(
        tx.conn,
        std::string("UPDATE agent_commands SET status = $3, result = $4, error = $5, finished_at = $6"
                    " WHERE node_id = $1 AND command_id = $2 AND status = '' RETURNING ") +
            kCommandColumns,
        Binds().add(node_id).add(command_id).add(status).add(store_rules::json_text(result)).add(error).add(now_ms()),
        read_command);
    if (!done) return done.take_error();
    if (!*done) return Error(Code::kConflict, "kilnd is not waiting for command " + std::string(command_id));
    return std::move(**done);
  });
}

Status SqlStore::clear_agent_command(std::string_view node_id, std::string_view command_id) {
  return autocommit([&](db::Conn& c) -> Status {
    Result<int64_t> n = c.exec("DELETE FROM agent_commands WHERE node_id = $1 AND ($2 = '' OR command_id = $2)",
                               Binds().add(node_id).add(command_id));
    if (!n) return n.take_error();
    return ok_status();
  });
}

}  // namespace kiln
