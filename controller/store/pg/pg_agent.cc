#include <utility>

#include "controller/store/pg/pg_store.h"
#include "controller/store/store_rules.h"

namespace kiln {

// PgStore: kiln-agent boot tokens, os-phase secrets, sessions and outstanding
// commands (AgentStore),
// as sqlite_agent.cc. Everything the agent protocol needs is here, not in one
// instance's memory, so an agent may talk to any kilnd sharing the database.
//
// Races between instances are settled by single statements: a boot token is
// consumed by one DELETE ... WHERE token_hash (a second consumer finds no row
// and gets kUnauthenticated); the os secret is minted by INSERT ... ON
// CONFLICT DO NOTHING and read back, so racing minters agree on the first;
// a node deleted meanwhile shows up as a foreign key violation, reported as
// kNotFound. A command's first delivery is marked with its row locked
// (SELECT ... FOR UPDATE), so one heartbeat alone sees delivered_at = 0; its
// result is the one UPDATE that finds the command id with no result yet (any
// other poster gets kConflict).

namespace {

constexpr const char kSessionSelect[] =
    "SELECT token_hash, node_id, phase, issued_state, created_at FROM agent_sessions";

std::vector<AgentSession> read_sessions(const pg::Rows& r) {
  std::vector<AgentSession> out;
  for (int i = 0; i < r.size(); ++i)
    out.push_back(AgentSession{r.text(i, 0), r.text(i, 1), r.text(i, 2), r.text(i, 3), r.int64(i, 4)});
  return out;
}

Error node_gone(std::string_view node_id) { return Error(Code::kNotFound, "node " + std::string(node_id) + " not found"); }

// Runs one statement keyed by node id; a foreign key violation is kNotFound.
Status exec_for_node(pg::Connection& c, const std::string& sql, const pg::Params& params, std::string_view node_id) {
  Result<pg::Rows> r = c.exec(sql, params);
  if (r) return ok_status();
  Error e = r.take_error();
  if (pg::is_foreign_key_violation(e)) return node_gone(node_id);
  return e;
}

}  // namespace

Status PgStore::set_agent_boot_token(std::string_view node_id, std::string_view token_hash,
                                     std::string_view token_sealed) {
  Result<Lease> l = lease();
  if (!l) return l.take_error();
  return exec_for_node(l->conn(),
                       "INSERT INTO agent_boot_tokens (node_id, token_hash, token_sealed, created_at)"
                       " VALUES ($1, $2, $3, $4) ON CONFLICT (node_id) DO UPDATE SET"
                       " token_hash = excluded.token_hash, token_sealed = excluded.token_sealed,"
                       " created_at = excluded.created_at",
                       pg::Params().add(node_id).add(token_hash).add(token_sealed).add(now_ms()), node_id);
}

Result<std::optional<std::string>> PgStore::agent_boot_token_sealed(std::string_view node_id) {
  Result<Lease> l = lease();
  if (!l) return l.take_error();
  Result<pg::Rows> r =
      l->conn().exec("SELECT token_sealed FROM agent_boot_tokens WHERE node_id = $1", pg::Params().add(node_id));
  if (!r) return r.take_error();
  std::optional<std::string> out;
  if (!r->empty() && !r->text(0, 0).empty()) out = r->text(0, 0);
  return out;
}

Status PgStore::clear_agent_boot_token(std::string_view node_id) {
  Result<Lease> l = lease();
  if (!l) return l.take_error();
  return exec_for_node(l->conn(), "DELETE FROM agent_boot_tokens WHERE node_id = $1", pg::Params().add(node_id),
                       node_id);
}

namespace {
Result<std::optional<AgentOsSecret>> select_os_secret(pg::Connection& c, std::string_view node_id) {
  Result<pg::Rows> r = c.exec(
      "SELECT node_id, secret_hash, secret_sealed, created_at FROM agent_os_secrets WHERE node_id = $1",
      pg::Params().add(node_id));
  if (!r) return r.take_error();
  if (r->empty()) return std::optional<AgentOsSecret>();
  return std::optional<AgentOsSecret>(AgentOsSecret{r->text(0, 0), r->text(0, 1), r->text(0, 2), r->int64(0, 3)});
}
}  // namespace

Result<AgentOsSecret> PgStore::put_agent_os_secret(const AgentOsSecret& secret) {
  AgentOsSecret in = secret;
  if (in.created_at == 0) in.created_at = now_ms();
  Result<Lease> l = lease();
  if (!l) return l.take_error();
  pg::Connection& c = l->conn();
  if (Status s = exec_for_node(c,
                               "INSERT INTO agent_os_secrets (node_id, secret_hash, secret_sealed, created_at)"
                               " VALUES ($1, $2, $3, $4) ON CONFLICT (node_id) DO NOTHING",
                               pg::Params().add(in.node_id).add(in.secret_hash).add(in.secret_sealed).add(in.created_at),
                               in.node_id);
      !s)
    return s.take_error();
  // Ours or the one that was there first: the same row for every caller.
  Result<std::optional<AgentOsSecret>> have = select_os_secret(c, in.node_id);
  if (!have) return have.take_error();
  if (!*have) return node_gone(in.node_id);  // deleted with its node in between
  return std::move(**have);
}

Result<std::optional<AgentOsSecret>> PgStore::get_agent_os_secret(std::string_view node_id) {
  Result<Lease> l = lease();
  if (!l) return l.take_error();
  return select_os_secret(l->conn(), node_id);
}

Status PgStore::delete_agent_os_secret(std::string_view node_id) {
  Result<Lease> l = lease();
  if (!l) return l.take_error();
  return exec_for_node(l->conn(), "DELETE FROM agent_os_secrets WHERE node_id = $1", pg::Params().add(node_id),
                       node_id);
}

Status PgStore::open_agent_session(const AgentSession& session, std::string_view boot_token_hash,
                                   const std::vector<EventDraft>& events) {
  Result<Lease> l = lease();
  if (!l) return l.take_error();
  pg::Connection& c = l->conn();
  Result<pg::Transaction> tx = pg::Transaction::begin(c);
  if (!tx) return tx.take_error();
  if (!boot_token_hash.empty()) {
    Result<pg::Rows> used = c.exec("DELETE FROM agent_boot_tokens WHERE node_id = $1 AND token_hash = $2",
                                   pg::Params().add(session.node_id).add(boot_token_hash));
    if (!used) return used.take_error();
    if (used->affected() != 1) return Error(Code::kUnauthenticated, "boot token is unknown or already used");
  }
  if (Result<pg::Rows> d = c.exec("DELETE FROM agent_sessions WHERE node_id = $1", pg::Params().add(session.node_id));
      !d)
    return d.take_error();
  if (Status s = exec_for_node(c,
                               "INSERT INTO agent_sessions (token_hash, node_id, phase, issued_state, created_at)"
                               " VALUES ($1, $2, $3, $4, $5)",
                               pg::Params()
                                   .add(session.token_hash)
                                   .add(session.node_id)
                                   .add(session.phase)
                                   .add(session.issued_state)
                                   .add(session.created_at != 0 ? session.created_at : now_ms()),
                               session.node_id);
      !s)
    return s;
  Result<int64_t> seq = insert_events(c, events, nullptr, "");
  if (!seq) return seq.take_error();
  if (Status s = tx->commit(); !s) return s;
  notify(*seq);
  return ok_status();
}

Result<AgentSession> PgStore::find_agent_session(std::string_view token_hash) {
  Result<Lease> l = lease();
  if (!l) return l.take_error();
  Result<pg::Rows> r = l->conn().exec(std::string(kSessionSelect) + " WHERE token_hash = $1", pg::Params().add(token_hash));
  if (!r) return r.take_error();
  if (r->empty()) return Error(Code::kNotFound, "agent session not found");
  return read_sessions(*r).front();
}

Result<std::vector<AgentSession>> PgStore::agent_sessions_of(std::string_view node_id) {
  Result<Lease> l = lease();
  if (!l) return l.take_error();
  Result<pg::Rows> r = l->conn().exec(std::string(kSessionSelect) + " WHERE node_id = $1 ORDER BY created_at",
                                      pg::Params().add(node_id));
  if (!r) return r.take_error();
  return read_sessions(*r);
}

Status PgStore::delete_agent_sessions(std::string_view node_id) {
  Result<Lease> l = lease();
  if (!l) return l.take_error();
  return exec_for_node(l->conn(), "DELETE FROM agent_sessions WHERE node_id = $1", pg::Params().add(node_id), node_id);
}

namespace {

constexpr const char kCommandSelect[] =
    "SELECT node_id, command_id, name, args, created_at, delivered_at, status, result, error, finished_at"
    " FROM agent_commands";

Result<nlohmann::json> parse_object(const std::string& text, const char* what) {
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Error(Code::kInternal, std::string("store: corrupt JSON in ") + what);
  return j;
}

Result<AgentCommandRecord> read_command(const pg::Rows& r, int i) {
  AgentCommandRecord c;
  c.node_id = r.text(i, 0);
  c.id = r.text(i, 1);
  c.name = r.text(i, 2);
  Result<nlohmann::json> args = parse_object(r.text(i, 3), "agent_commands.args");
  if (!args) return args.take_error();
  c.args = std::move(*args);
  c.created_at = r.int64(i, 4);
  c.delivered_at = r.int64(i, 5);
  c.status = r.text(i, 6);
  Result<nlohmann::json> result = parse_object(r.text(i, 7), "agent_commands.result");
  if (!result) return result.take_error();
  c.result = std::move(*result);
  c.error = r.text(i, 8);
  c.finished_at = r.int64(i, 9);
  return c;
}

Result<std::optional<AgentCommandRecord>> select_command(pg::Connection& c, std::string_view node_id) {
  Result<pg::Rows> r = c.exec(std::string(kCommandSelect) + " WHERE node_id = $1", pg::Params().add(node_id));
  if (!r) return r.take_error();
  if (r->empty()) return std::optional<AgentCommandRecord>();
  Result<AgentCommandRecord> cmd = read_command(*r, 0);
  if (!cmd) return cmd.take_error();
  return std::optional<AgentCommandRecord>(std::move(*cmd));
}

}  // namespace

Status PgStore::put_agent_command(const AgentCommandRecord& command) {
  Result<Lease> l = lease();
  if (!l) return l.take_error();
  // ON CONFLICT replaces the whole row: the delivery mark and any result
  // belonged to the command being replaced.
  return exec_for_node(l->conn(),
                       "INSERT INTO agent_commands (node_id, command_id, name, args, created_at)"
                       " VALUES ($1, $2, $3, $4, $5) ON CONFLICT (node_id) DO UPDATE SET"
                       " command_id = excluded.command_id, name = excluded.name, args = excluded.args,"
                       " created_at = excluded.created_at, delivered_at = 0, status = '', result = '{}',"
                       " error = '', finished_at = 0",
                       pg::Params()
                           .add(command.node_id)
                           .add(command.id)
                           .add(command.name)
                           .add(store_rules::json_text(command.args))
                           .add(command.created_at != 0 ? command.created_at : now_ms()),
                       command.node_id);
}

Result<std::optional<AgentCommandRecord>> PgStore::get_agent_command(std::string_view node_id) {
  Result<Lease> l = lease();
  if (!l) return l.take_error();
  return select_command(l->conn(), node_id);
}

Result<std::optional<AgentCommandHandout>> PgStore::deliver_agent_command(std::string_view node_id, int64_t now) {
  Result<Lease> l = lease();
  if (!l) return l.take_error();
  pg::Connection& c = l->conn();
  // Every heartbeat asks: a plain read answers unless this looks like the
  // first delivery.
  Result<std::optional<AgentCommandRecord>> seen = select_command(c, node_id);
  if (!seen) return seen.take_error();
  if (!*seen || !(*seen)->status.empty()) return std::optional<AgentCommandHandout>();
  if ((*seen)->delivered_at != 0) return std::optional<AgentCommandHandout>(AgentCommandHandout{std::move(**seen), false});
  // The row locked while it is read again and marked: a racing heartbeat (or
  // result) on another instance waits, then sees it delivered.
  Result<pg::Transaction> tx = pg::Transaction::begin(c);
  if (!tx) return tx.take_error();
  Result<pg::Rows> r = c.exec(std::string(kCommandSelect) + " WHERE node_id = $1 FOR UPDATE", pg::Params().add(node_id));
  if (!r) return r.take_error();
  // None, or its result is in (a result ends the handing out).
  if (r->empty()) return std::optional<AgentCommandHandout>();
  Result<AgentCommandRecord> cmd = read_command(*r, 0);
  if (!cmd) return cmd.take_error();
  if (!cmd->status.empty()) return std::optional<AgentCommandHandout>();
  AgentCommandHandout h;
  h.command = std::move(*cmd);
  if (h.command.delivered_at == 0) {
    Result<pg::Rows> mark =
        c.exec("UPDATE agent_commands SET delivered_at = $2 WHERE node_id = $1", pg::Params().add(node_id).add(now));
    if (!mark) return mark.take_error();
    h.first_delivery = true;
    h.command.delivered_at = now;
  }
  if (Status s = tx->commit(); !s) return s.take_error();
  return std::optional<AgentCommandHandout>(std::move(h));
}

Result<AgentCommandRecord> PgStore::record_agent_result(std::string_view node_id, std::string_view command_id,
                                                        std::string_view status, const nlohmann::json& result,
                                                        std::string_view error) {
  Result<Lease> l = lease();
  if (!l) return l.take_error();
  Result<pg::Rows> r = l->conn().exec(
      "UPDATE agent_commands SET status = $3, result = $4, error = $5, finished_at = $6"
      " WHERE node_id = $1 AND command_id = $2 AND status = ''"
      " RETURNING node_id, command_id, name, args, created_at, delivered_at, status, result, error, finished_at",
      pg::Params().add(node_id).add(command_id).add(status).add(store_rules::json_text(result)).add(error).add(now_ms()));
  if (!r) return r.take_error();
  if (r->empty()) return Error(Code::kConflict, "kilnd is not waiting for command " + std::string(command_id));
  return read_command(*r, 0);
}

Status PgStore::clear_agent_command(std::string_view node_id, std::string_view command_id) {
  Result<Lease> l = lease();
  if (!l) return l.take_error();
  Result<pg::Rows> r = l->conn().exec("DELETE FROM agent_commands WHERE node_id = $1 AND ($2 = '' OR command_id = $2)",
                                      pg::Params().add(node_id).add(command_id));
  if (!r) return r.take_error();
  return ok_status();
}

}  // namespace kiln
