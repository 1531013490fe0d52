#pragma once
// AgentStore: what kiln-agent authenticates with (controller/agent;
// sqlite_agent.cc): one-time boot tokens, the per-deploy os secret and the
// sessions opened at lookup. Secrets are stored only as their SHA-256, plus
// a copy sealed with kiln.key where one must be handed out again.
//
// Threading and errors as NodeStore (controller/store/store.h): every method
// is safe from any thread and blocks on disk I/O.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

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
};

}  // namespace kiln
