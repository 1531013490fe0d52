#pragma once
// AgentBroker: kilnd's side of the kiln-agent protocol (docs/agent-protocol.md).
//
// It stands between the agents on the nodes (reached through the API routes
// in controller/api/agent_routes.cc) and the workflows (reached through the
// in-band driver capabilities in drivers/agent/agent_driver.h, through the
// AgentChannel in agent_channel.h):
//
//  - Boot tokens. boot_token() gives the deploy ramdisk's kernel arguments a
//    random one-time token per boot attempt: minted once (SHA-256 stored for
//    lookup, the token sealed with kiln.key so a re-fetched script shows the
//    same one), consumed by the ramdisk lookup, forgotten by forget() when a
//    new attempt starts (set_boot_pxe).
//  - OS secrets. os_secret() gives each deploy a random secret (hashed and
//    sealed the same way) that the os-phase agent must present at lookup: the
//    ramdisk agent writes it on the deployed disk (write_image's os_secret),
//    a virtual node's NoCloud seed carries it. forget() drops it, so the next
//    deploy mints a new one and a former tenant's copy is worthless.
//  - Phone-home tokens. phone_home_token() is "<node id>.<hex>", the hex a
//    SHA-256 of a label and the deploy's os secret: one-way (the URL, which
//    cloud-init logs, gives nobody the secret), stable per deploy, and dead
//    once forget() drops the secret. The first post that records the
//    node's ssh_host_keys uses it up; forget() empties them.
//  - Lookup. An agent names its MACs and presents its credential (ramdisk:
//    the boot token; os: the deploy secret); a wrong or missing one is 401
//    before anything about the node's state is said. The node owning one of
//    the MACs must then be expecting an agent: ramdisk phase in inspecting,
//    cleaning, burning_in and deploying before set_boot_disk (the token is
//    consumed), or in an on-demand validation's ramdisk steps
//    (on_demand_ramdisk() in controller/model/node.h); os phase in deploying
//    at step wait_boot (that lookup is the "OS booted" signal) or
//    validating. The agent gets a session bearer.
//  - Sessions are rows (hash only), so a kilnd restart does not cut agents
//    off. A session is good while the node stays in the states its lookup
//    leads through (ramdisk from cleaning: cleaning and burning_in; os:
//    deploying and validating; otherwise the state it was issued in). The
//    first use after the node moved on deletes it and answers 401; a new
//    lookup, or forget() before a fresh boot, replaces it.
//  - Commands. Each node has at most one outstanding command, a row in the
//    store (AgentStore, agent_commands), so the kilnd whose workflow sends it,
//    the one the agent heartbeats to and the one it posts the result to may
//    be different instances sharing the database. It is handed out on every
//    heartbeat (by any instance) until its result (matched by command id)
//    arrives; a result for any other id is stale (kConflict, 409). A wait that
//    ends without a result (shutdown) leaves the row: after a restart the
//    resumed workflow sends a new command, which replaces it, so the old
//    command's result is then stale.
//  - Phone-home wait. An image whose OS runs no kiln-agent (Image::os_agent
//    false) says it booted only through cloud-init's phone_home: the post
//    stores the OS's ssh_host_keys (at least one key; forget() emptied them
//    when the deploy began), so a node that has keys again has phoned home
//    in this deploy. wait_for_phone_home() watches for that in the store,
//    as wait_for_agent() watches for a session.
//  - Waits. wait_for_agent(), wait_for_phone_home() and run_command() poll the store (every
//    poll_interval) for the lookup's session or the result, and poll
//    `still_held` (the operation may have lost the node to an abort or a
//    timeout) and shutdown(), so no wait outlives its operation by more than
//    a poll or hangs kilnd's exit. A lookup or a result received by another
//    instance is seen within a poll.
//
// Events (in the store's log): agent.lookup, agent.os_booted,
// agent.command_sent (first delivery), agent.result.
//
// In memory, per process, are only last_heartbeat_ms() and the boot URL and
// TLS pin; everything an agent needs is in the store.
//
// Threading: every method may be called from any I/O thread. In-memory state
// is under one mutex (never held across a co_await); store calls run on the
// BlockingPool.

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <utility>  // before Asio (docs/coroutines.md)
#include <vector>

#include <boost/asio/awaitable.hpp>
#include <nlohmann/json.hpp>

#include "common/blocking_pool.h"
#include "common/clock.h"
#include "common/crypto.h"
#include "common/log.h"
#include "common/result.h"
#include "controller/agent/agent_authority.h"
#include "controller/model/node.h"
#include "controller/store/agent_store.h"
#include "controller/store/event_log.h"
#include "drivers/driver.h"

namespace kiln {

class NodeStore;  // controller/store/store.h

struct AgentBrokerOptions {
  // Told to agents in lookup and heartbeat replies (the contract's value).
  int heartbeat_interval_s = 2;
  // How often a wait looks for the agent, the result, and whether its
  // operation still holds the node: an abort is noticed within this.
  std::chrono::milliseconds poll_interval{200};
};

struct AgentLookup {
  std::vector<std::string> macs;  // normalized (lowercase, ':')
  std::string node;               // optional: the node's uuid
  std::string token;              // ramdisk phase: the boot token
  std::string secret;             // os phase: the deploy secret
  std::string phase;              // ramdisk | os
  std::string version;
  // os phase: the booted OS's addresses (checked by the caller), recorded as
  // a heartbeat's are.
  std::optional<std::vector<std::string>> addresses;
};

struct AgentLookupReply {
  Node node;
  std::string session;  // the bearer; shown once
  int heartbeat_interval_s = 2;
};

struct AgentCommand {
  std::string id;
  std::string name;
  nlohmann::json args = nlohmann::json::object();
};

struct AgentHeartbeatReply {
  std::optional<AgentCommand> command;
  int heartbeat_interval_s = 2;
};

struct AgentResultPost {
  std::string node;
  std::string command_id;
  std::string status;  // ok | error
  nlohmann::json result = nlohmann::json::object();
  std::string error;
};

using StillHeld = std::function<asio::awaitable<bool>()>;

// Whether `phase` lookups are accepted for a node in this state (the rules above).
bool agent_expected(const Node& node, const std::string& phase);
// Whether a session is still good for the node as it is now (the rules above).
bool agent_session_valid(const AgentSession& session, const Node& node);

// The login a tenant uses: "<user>@<first IPv4 address>", else the first
// address; "" without a user or an address.
std::string ssh_login(const std::string& user, const std::vector<std::string>& addresses);

class AgentBroker final : public AgentAuthority {
 public:
  // `secrets` seals boot tokens and os secrets at rest (kiln.key); it must
  // outlive the broker. The whole store: the broker keeps the agent rows and
  // reads and moves nodes, reads images and appends events.
  AgentBroker(NodeStore& store, BlockingPool& db, const Clock& clock, const SecretBox& secrets,
              AgentBrokerOptions options, Logger log);

  // --- AgentAuthority (boot script, image serving) ---
  // kNotFound for an unknown node; kInternal when a sealed value no longer
  // opens (kiln.key replaced).
  asio::awaitable<Result<std::string>> boot_token(const Node& node) override;
  asio::awaitable<Result<std::string>> os_secret(const Node& node) override;
  asio::awaitable<Result<Node>> session_node(std::string bearer) override;
  asio::awaitable<Result<std::string>> phone_home_token(const Node& node) override;
  asio::awaitable<Result<Node>> phone_home_node(std::string token) override;
  asio::awaitable<Result<Node>> record_ssh_host_keys(const Node& node, std::vector<SshHostKey> keys,
                                                     std::string hostname) override;
  // "<boot url>/v1/phone-home/<phone_home_token>" for node `node_id` (the
  // config drive's phone_home URL); "" before set_boot_url. Errors as
  // phone_home_token.
  asio::awaitable<Result<std::string>> phone_home_url(std::string node_id);

  // --- the agent API ---
  // Errors: kNotFound (no node owns these MACs, or `node` is not theirs),
  // kUnauthenticated (a missing, wrong or used token or secret; checked
  // before the state), kConflict (not expecting an agent).
  asio::awaitable<Result<AgentLookupReply>> lookup(AgentLookup request);
  // kUnauthenticated (session unknown or over); kInvalidArgument "/node" when
  // `node` is not the session's node. `addresses` (the OS-phase agent's IPs,
  // checked by the caller) are written to the node, with its `ssh` login, when
  // they differ from what it shows, with a node.addresses event.
  asio::awaitable<Result<AgentHeartbeatReply>> heartbeat(
      std::string bearer, std::string node, std::string busy,
      std::optional<std::vector<std::string>> addresses = std::nullopt);
  // As heartbeat, plus kConflict when kilnd is not waiting for that command.
  asio::awaitable<Status> post_result(std::string bearer, AgentResultPost post);

  // An agent body kilnd refused (api/agent_input.h): appends a
  // node.agent_input_refused event {route, errors: [{field, message}]} (the
  // reasons, never the values) on the session's node, so its operator and
  // tenant see that the machine said something kilnd would not store.
  // Nothing else is written. Does nothing when the session is unknown or
  // over (a stranger's body is nobody's event); store errors are logged.
  asio::awaitable<void> record_refused_input(std::string bearer, std::string route, std::vector<FieldError> errors);
  // The same for a refused lookup, once `credential`
  // (parse_agent_lookup_credential) proves the caller holds the node's boot
  // token or os secret; a ramdisk token is not used up by this.
  asio::awaitable<void> record_refused_lookup(AgentLookup credential, std::vector<FieldError> errors);

  // --- the workflow side (BrokerChannel, agent_channel.h) ---
  // A new boot attempt: deletes the node's sessions, its unused boot token
  // and its os secret (and with it the deploy's phone-home token), drops its
  // outstanding command, and empties the addresses (agent- or DHCP-learned),
  // address_source, ssh login and SSH host keys of the last OS.
  asio::awaitable<Status> forget(std::string node_id);
  // Until the node has a session of `phase` (an agent looked up, through any
  // instance, or already had one before a restart). kConflict when
  // `still_held` turns false, kUnavailable on shutdown().
  asio::awaitable<Status> wait_for_agent(std::string node_id, AgentPhase phase, StillHeld still_held);
  // Until the node's deployed OS has phoned home (the node has ssh_host_keys,
  // recorded by any instance, or before a kilnd restart). kConflict when
  // `still_held` turns false, kUnavailable on shutdown(), kNotFound when the
  // node is gone, other store errors as they come.
  asio::awaitable<Status> wait_for_phone_home(std::string node_id, StillHeld still_held);
  // Stores `name` with `args` as the node's command (replacing any
  // outstanding one) and waits for its result, recorded by whichever instance
  // the agent posted it to: the result object when the agent says ok,
  // kDriverError "<name> failed: <agent's error>" when it says error,
  // kConflict when the command was replaced or dropped (forget(), another
  // run_command) or `still_held` turns false (the command is cleared then),
  // kUnavailable on shutdown(). A store error while waiting is logged and the
  // wait goes on (it is bounded by still_held and shutdown()).
  asio::awaitable<Result<nlohmann::json>> run_command(std::string node_id, std::string name,
                                                      nlohmann::json args, StillHeld still_held);

  // When the node's agent last heartbeated in this process (ms epoch).
  std::optional<int64_t> last_heartbeat_ms(const std::string& node_id) const;
  // Ends every wait promptly (kUnavailable). Idempotent; thread-safe.
  void shutdown();

  // The base URL agents reach kilnd at (write_image URLs). Set once the
  // listen port is known; thread-safe.
  void set_boot_url(std::string url);
  std::string boot_url() const;
  // SHA-256 (hex) of kilnd's TLS leaf certificate (DER), which write_image
  // tells the ramdisk agent to leave beside the os secret so the OS's agent
  // pins it; "" when kilnd serves plain HTTP. Thread-safe.
  void set_tls_pin(std::string sha256_hex);
  std::string tls_pin() const;

  int heartbeat_interval_s() const { return opt_.heartbeat_interval_s; }

 private:
  // Calls `done` every poll_interval until it says true (ok), fails (its
  // error), kilnd shuts down (kUnavailable) or `still_held` says the
  // operation lost the node (kConflict): the one loop of every wait above.
  asio::awaitable<Status> poll_until(std::function<asio::awaitable<Result<bool>>()> done, StillHeld still_held);

  // The node a lookup's MACs name, once its credential is good (lookup()'s
  // errors but kConflict); consumes nothing.
  asio::awaitable<Result<Node>> authorize_lookup(const AgentLookup& req);
  asio::awaitable<void> record_refusal(const Node& node, std::string route, std::vector<FieldError> errors);
  // The session's node when the session is good; deletes it when it is over.
  asio::awaitable<Result<Node>> authenticate(std::string bearer);
  EventDraft event(const Node& node, std::string type, nlohmann::json detail) const;
  asio::awaitable<void> append(std::vector<EventDraft> events);
  // Writes the node's addresses (address_source agent, or none when empty)
  // and its ssh login (the image's ssh_user).
  asio::awaitable<void> record_addresses(Node node, std::vector<std::string> addresses);

  NodeStore& store_;
  BlockingPool& db_;
  const Clock& clock_;
  const AgentBrokerOptions opt_;
  Logger log_;
  std::atomic<bool> shutdown_{false};

  mutable std::mutex mu_;
  std::map<std::string, int64_t> last_heartbeat_;  // by node id: ms epoch, this process
  std::string boot_url_;
  std::string tls_pin_;
  const SecretBox& secrets_;
};

}  // namespace kiln
