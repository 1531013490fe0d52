#pragma once
// AgentStore: what kiln-agent authenticates with (controller/agent;
// sql/agent.cc): one-time boot tokens, the per-deploy os secret and the
// sessions opened at lookup. Secrets are stored only as their SHA-256, plus
// a copy sealed with kiln.key where one must be handed out again. Also each
// node's one outstanding agent command and its result, so that the kilnd
// that sends a command, the one the agent heartbeats to and the one it posts
// the result to may all be different instances sharing the database.
//
// Threading and errors as NodeStore (controller/store/store.h): every method
// is safe from any thread and blocks on disk I/O.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/result.h"
#include "controller/store/event_log.h"

namespace kiln {

// An agent session (controller/agent): kiln-agent's bearer after lookup. Only
// the SHA-256 of the bearer is stored.
struct AgentSession {
  std::string token_hash;    // sha256 hex of the bearer
  std::string node_id;
  std::string phase;         // ramdisk | os
  std::string issued_state;  // the node's provision state at lookup
  int64_t created_at = 0;
};

// The per-deploy secret of a node's os-phase agent (controller/agent):
// SHA-256 hex for the comparison at lookup, and the secret sealed with
// kiln.key for the places that must hand it out again (write_image, the
// NoCloud seed).
struct AgentOsSecret {
  std::string node_id;
  std::string secret_hash;
  std::string secret_sealed;
  int64_t created_at = 0;
};

// A node's outstanding agent command (controller/agent, "Commands"): at most
// one per node. Written by the kilnd whose workflow waits for it, handed out
// by whichever kilnd the agent heartbeats to, its result recorded by whichever
// kilnd the agent posts it to.
struct AgentCommandRecord {
  std::string node_id;
  std::string id;  // the command id the agent echoes with its result
  std::string name;
  nlohmann::json args = nlohmann::json::object();
  int64_t created_at = 0;
  int64_t delivered_at = 0;  // first handed out by a heartbeat; 0 = not yet
  // The result; status is "" until the agent posted one.
  std::string status;  // "" | ok | error
  nlohmann::json result = nlohmann::json::object();
  std::string error;
  int64_t finished_at = 0;
};

// What a heartbeat hands out: the command, and whether this call was its
// first delivery (exactly one caller sees true, however many instances race).
struct AgentCommandHandout {
  AgentCommandRecord command;
  bool first_delivery = false;
};

class AgentStore {
 public:
  virtual ~AgentStore() = default;

  // Secrets are stored only as their SHA-256 (hex).
  // Sets the node's one-time boot token, replacing any earlier one: its hash
  // (what lookup checks) and the token sealed with kiln.key (so the boot
  // script can show it again for the same boot attempt). kNotFound.
  virtual Status set_agent_boot_token(std::string_view node_id, std::string_view token_hash,
                                      std::string_view token_sealed) = 0;
  // The node's unused boot token, sealed; nullopt when there is none (never
  // minted, consumed by a lookup, or cleared for a new boot attempt).
  virtual Result<std::optional<std::string>> agent_boot_token_sealed(std::string_view node_id) = 0;
  // Forgets the node's boot token (a new boot attempt starts). Idempotent.
  virtual Status clear_agent_boot_token(std::string_view node_id) = 0;
  // The per-deploy secret of the os-phase agent: hash and sealed value.
  // Sets it only when the node has none (an earlier one is kept and
  // returned), so two callers racing to mint agree on one secret. kNotFound
  // for an unknown node.
  virtual Result<AgentOsSecret> put_agent_os_secret(const AgentOsSecret& secret) = 0;
  // nullopt when the node has no secret.
  virtual Result<std::optional<AgentOsSecret>> get_agent_os_secret(std::string_view node_id) = 0;
  // Idempotent.
  virtual Status delete_agent_os_secret(std::string_view node_id) = 0;
  // In one transaction: when `boot_token_hash` is non-empty, consumes the
  // node's boot token (kUnauthenticated when it is not the node's current
  // one; nothing is written then); replaces the node's sessions with
  // `session`; appends `events`.
  virtual Status open_agent_session(const AgentSession& session, std::string_view boot_token_hash,
                                    const std::vector<EventDraft>& events) = 0;
  // kNotFound when no session has that hash.
  virtual Result<AgentSession> find_agent_session(std::string_view token_hash) = 0;
  virtual Result<std::vector<AgentSession>> agent_sessions_of(std::string_view node_id) = 0;
  virtual Status delete_agent_sessions(std::string_view node_id) = 0;

  // --- the node's outstanding command ---
  // Stores `command` as the node's command, replacing any earlier one (with
  // its result, if it had one): node_id, id, name, args; created_at is the
  // store's clock when 0; delivered_at and the result start empty whatever
  // `command` says. kNotFound for an unknown node.
  virtual Status put_agent_command(const AgentCommandRecord& command) = 0;
  // The node's command, with its result once recorded; nullopt when it has
  // none (never sent, cleared, or the node is gone).
  virtual Result<std::optional<AgentCommandRecord>> get_agent_command(std::string_view node_id) = 0;
  // For a heartbeat: the node's command while it has no result (nullopt when
  // there is none, or its result is in). The first call to hand it out sets
  // delivered_at to `now_ms` and says first_delivery; later calls, in this
  // process or another, hand out the same command without it.
  virtual Result<std::optional<AgentCommandHandout>> deliver_agent_command(std::string_view node_id,
                                                                           int64_t now_ms) = 0;
  // Records the agent's result for command `command_id` (status ok | error,
  // its result object, its error text; finished_at is the store's clock) and
  // returns the command with it. kConflict when the node's command is not
  // `command_id` (stale: replaced or cleared) or already has a result:
  // nothing is written then.
  virtual Result<AgentCommandRecord> record_agent_result(std::string_view node_id, std::string_view command_id,
                                                         std::string_view status, const nlohmann::json& result,
                                                         std::string_view error) = 0;
  // Deletes the node's command; when `command_id` is non-empty, only if it is
  // still that command (a newer one is kept). Idempotent.
  virtual Status clear_agent_command(std::string_view node_id, std::string_view command_id) = 0;
};

}  // namespace kiln
