#pragma once
// NodeStore: Kiln's persistent state, in domain verbs.
//
// No SQL exists outside controller/store/. The interface is shaped so a
// PostgreSQL implementation shared by several kilnd instances can sit behind it
// later: every mutation is a conditional update inside one transaction
// (update_node_if), which is also how the per-node lock is taken (the Ironic
// conductor model: a conditional UPDATE of a reservation column).
//
// Threading: every method is safe to call from any thread. Writes are
// serialized on one writer connection; reads use a pool of reader connections
// (WAL lets them run alongside the writer). Calls block on disk I/O, so async
// callers run them on a BlockingPool, not on I/O threads.
//
// Errors (as values): kNotFound (no such node/port/token), kConflict (duplicate
// name or MAC, with the field; failed condition), kPreconditionFailed (version
// mismatch), kInternal (SQLite failure, with SQLite's message).

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/clock.h"
#include "common/result.h"
#include "controller/model/host.h"
#include "controller/model/image.h"
#include "controller/model/node.h"
#include "controller/model/validation.h"

namespace kiln {

// An event to append in the same transaction as a node change.
struct EventDraft {
  std::string type;        // "node.created", "provision.transition", "power.changed", ...
  std::string node_id;     // filled by the store for node changes when empty
  std::string from_state;  // provision or power state before, when a transition
  std::string to_state;
  nlohmann::json detail = nlohmann::json::object();  // verb, actor, reason, step...
  std::string request_id;
  std::string tenant;      // owner at the time, so tenants can be shown their own events
};

struct EventRecord {
  int64_t seq = 0;  // strictly increasing, never reused
  int64_t ts = 0;   // ms epoch
  std::string type, node_id, from_state, to_state, request_id, tenant;
  nlohmann::json detail;
};

struct AuditRecord {
  int64_t id = 0;
  int64_t ts = 0;
  std::string actor;       // token id
  std::string actor_name;  // token name
  std::string role;
  std::string method, path, request_id, node_id;
  int status = 0;
};

struct TokenRecord {
  std::string id;          // UUID; the public handle
  std::string name;
  std::string role;        // admin | operator | tenant
  std::string tenant;      // for role tenant
  std::string secret_hash; // sha256 hex of the secret; the secret is never stored
  int64_t created_at = 0;
  int64_t expires_at = 0;  // 0 = never
};

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

struct NodeFilter {
  std::optional<ProvisionState> provision_state;
  std::optional<NodeKind> kind;
  std::optional<std::string> profile;
  std::optional<bool> maintenance;
  std::optional<std::string> tenant;
  std::optional<std::string> allocation;
};

// Keyset pagination: results sorted by (sort_key, id); `marker` is the id of the
// last node of the previous page.
struct ListOptions {
  int limit = 100;
  std::string marker;
  std::string sort_key = "created_at";  // created_at | updated_at | name | provision_state | id
  bool descending = false;
};

// Conditions checked, inside the write transaction, before a mutation applies.
struct NodeCondition {
  std::optional<int64_t> version;                 // else kPreconditionFailed
  std::optional<std::string> reservation;         // must equal ("" = must be free); else kConflict
  std::optional<ProvisionState> provision_state;  // must equal; else kConflict
};

class NodeStore {
 public:
  virtual ~NodeStore() = default;

  // Applies pending migrations (schemas/sql, embedded at build time).
  virtual Status migrate() = 0;
  // Names of the migrations applied, in order ("001_initial", ...).
  virtual Result<std::vector<std::string>> applied_migrations() = 0;

  // --- nodes ---
  // Inserts `node` (id, created_at, version set by caller or filled when empty)
  // with its ports and `event`. kConflict naming "/name" or "/ports/N/address"
  // on duplicates; nothing is written then.
  virtual Result<Node> create_node(const Node& node, const EventDraft& event) = 0;
  // By UUID, or by name when `id_or_name` is not a UUID.
  virtual Result<Node> get_node(std::string_view id_or_name) = 0;
  virtual Result<std::vector<Node>> list_nodes(const NodeFilter& filter, const ListOptions& opts) = 0;
  // Reads the node, checks `cond`, runs `mutate` on it, writes it back with
  // version+1 and updated_at=now, appends `events` — all in one transaction.
  // `mutate` may return an Error to abort without writing anything. Ports are
  // not changed by this call. Returns the node as written.
  virtual Result<Node> update_node_if(std::string_view id_or_name, const NodeCondition& cond,
                                      const std::function<Status(Node&)>& mutate,
                                      const std::vector<EventDraft>& events) = 0;
  // Deletes the node and its ports if `cond` holds, appending `event`.
  virtual Status delete_node_if(std::string_view id_or_name, const NodeCondition& cond,
                                const EventDraft& event) = 0;
  // Nodes whose deadline_at is set and earlier than `now_ms` (for timeouts).
  virtual Result<std::vector<Node>> nodes_past_deadline(int64_t now_ms, int limit) = 0;
  // Nodes that hold a reservation or are in a transient state (start-up recovery).
  virtual Result<std::vector<Node>> nodes_in_flight() = 0;
  // Node counts by provision state (for /metrics).
  virtual Result<std::map<std::string, int64_t>> count_nodes_by_state() = 0;

  // --- ports ---
  virtual Result<Port> create_port(const Port& port, const EventDraft& event) = 0;
  virtual Result<Port> get_port(std::string_view id) = 0;
  // By MAC (normalized lowercase); kNotFound when unknown.
  virtual Result<Port> find_port_by_address(std::string_view mac) = 0;
  virtual Result<std::vector<Port>> list_ports(std::optional<std::string> node_id, int limit,
                                               std::string_view marker) = 0;
  virtual Status delete_port(std::string_view id, const EventDraft& event) = 0;

  // --- events and audit ---
  virtual Result<std::vector<EventRecord>> list_events(int64_t since_seq, int limit,
                                                       std::optional<std::string> node_id,
                                                       std::optional<std::string> tenant) = 0;
  virtual Result<int64_t> last_event_seq() = 0;
  // Called (outside the transaction, on the writing thread) with the highest
  // seq after every commit that appended events. One listener; set before use.
  virtual void set_event_listener(std::function<void(int64_t)> listener) = 0;
  virtual Status append_audit(const AuditRecord& record) = 0;
  virtual Result<std::vector<AuditRecord>> list_audit(int64_t since_id, int limit) = 0;

  // --- tokens ---
  virtual Result<TokenRecord> create_token(const TokenRecord& token) = 0;
  virtual Result<TokenRecord> find_token_by_hash(std::string_view secret_hash) = 0;
  virtual Result<std::vector<TokenRecord>> list_tokens() = 0;
  virtual Status delete_token(std::string_view id) = 0;
  virtual Result<bool> has_token_with_role(std::string_view role) = 0;

  // --- images (controller/boot owns these; sqlite_images.cc) ---
  // Inserts `image` (id, created_at filled when empty; updated_at = now).
  // kConflict naming "/name" when the name is taken; kInvalidArgument for an
  // empty or UUID-looking name.
  virtual Result<Image> create_image(const Image& image) = 0;
  // By UUID, or by name when `id_or_name` is not a UUID. kNotFound.
  virtual Result<Image> get_image(std::string_view id_or_name) = 0;
  // Every image, oldest first (a catalogue is small: no paging).
  virtual Result<std::vector<Image>> list_images() = 0;
  // kNotFound when absent. The file it served is the caller's to remove.
  virtual Status delete_image(std::string_view id_or_name) = 0;
  // Writes `status`, `path` and `last_error` of the image `image.id` (after a
  // download) and returns the image as stored. kNotFound.
  virtual Result<Image> update_image(const Image& image) = 0;

  // --- agent boot tokens and sessions (controller/agent; sqlite_agent.cc) ---
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
  // Appends events that change no node (agent lookups, commands, results).
  virtual Status append_events(const std::vector<EventDraft>& events) = 0;

  // --- hardware profiles and validation reports (issue 6; sqlite_profiles.cc) ---
  // Inserts `profile` (created_at = updated_at = now, version 1; doc["name"]
  // is set to profile.name). kConflict naming "/name" when the name is taken.
  virtual Result<Profile> create_profile(const Profile& profile) = 0;
  // kNotFound.
  virtual Result<Profile> get_profile(std::string_view name) = 0;
  // Every profile, by name (a catalogue is small: no paging).
  virtual Result<std::vector<Profile>> list_profiles() = 0;
  // Replaces the document of the profile `profile.name` (version+1,
  // updated_at = now). kNotFound; kPreconditionFailed when `expected_version`
  // is set and differs.
  virtual Result<Profile> replace_profile(const Profile& profile, std::optional<int64_t> expected_version) = 0;
  // kNotFound; kConflict when nodes still name it (the count in the message).
  virtual Status delete_profile(std::string_view name) = 0;
  // Creates each of `defaults` that was never seeded before and whose name
  // is free, remembering it as seeded: a default an operator edited is kept,
  // one an operator deleted stays deleted. Returns the names created.
  virtual Result<std::vector<std::string>> seed_profiles(const std::vector<Profile>& defaults) = 0;

  // In one transaction: inserts `record` (id filled when empty), sets the
  // node's last_validation to its id (version+1) and appends `events`.
  // kNotFound when the node is gone. Returns the record as stored.
  virtual Result<ValidationRecord> record_validation(const ValidationRecord& record,
                                                     const std::vector<EventDraft>& events) = 0;
  // kNotFound.
  virtual Result<ValidationRecord> get_validation(std::string_view id) = 0;
  // The node's reports, newest first; `marker` is the id of the last report
  // of the previous page ("" for the first). limit > 0.
  virtual Result<std::vector<ValidationRecord>> list_validations(std::string_view node_id, int limit,
                                                                 std::string_view marker) = 0;
  // The newest `limit` passing reports run on nodes of `profile` and `kind`.
  virtual Result<std::vector<ValidationRecord>> recent_passing_validations(std::string_view profile,
                                                                           std::string_view kind, int limit) = 0;
  // Free nodes by (profile, kind): available, not in maintenance, no fault,
  // not reserved. Pairs with no free node are absent.
  virtual Result<std::map<std::pair<std::string, std::string>, int64_t>> count_free_nodes() = 0;

  // --- hypervisor hosts and virtual machines (issue 7; sqlite_hosts.cc) ---
  // Inserts `host` (id, created_at filled when empty). kConflict naming
  // "/name" when the name is taken; kInvalidArgument for a UUID-looking name.
  virtual Result<Host> create_host(const Host& host) = 0;
  // By UUID or name. kNotFound.
  virtual Result<Host> get_host(std::string_view id_or_name) = 0;
  // Every host, by name (a small catalogue: no paging).
  virtual Result<std::vector<Host>> list_hosts() = 0;
  // Records a connection outcome: status and reason, and the capacity when
  // `capacity` is set (discovered_at = now then). kNotFound.
  virtual Status set_host_status(std::string_view id, std::string_view status, std::string_view reason,
                                 const std::optional<HostCapacity>& capacity) = 0;
  // kNotFound; kConflict (with the count) while virtual machines are placed on it.
  virtual Status delete_host(std::string_view id_or_name) = 0;
  // The host's reservation rows.
  virtual Result<std::vector<HostReservation>> host_reservations(std::string_view host_id) = 0;

  using PlacementPlanner =
      std::function<Result<PlacementPlan>(const Host& host, const std::vector<HostReservation>& booked)>;
  // Places the virtual node `vm.node_id` in ONE writer transaction: reads the
  // candidate hosts (`host` when non-empty, else all, by name) and their
  // rows, asks `planner` for each in turn and, on the first success, inserts
  // its rows and `vm` with the placement. Returns the stored VirtualMachine.
  // When the node already has a VirtualMachine it is returned unchanged (a
  // resumed deploy does not book twice). kNotFound naming /host for an
  // unknown host; kConflict joining every host's shortage when none fits.
  virtual Result<VirtualMachine> place_virtual_node(const VirtualMachine& vm, std::string_view host,
                                                    const PlacementPlanner& planner) = 0;
  // kNotFound when the node has no virtual machine.
  virtual Result<VirtualMachine> get_virtual_machine(std::string_view node_id) = 0;
  // Every virtual machine placed on `host_id` (every one when empty).
  virtual Result<std::vector<VirtualMachine>> list_virtual_machines(std::string_view host_id) = 0;
  // Writes domain, mac, volume, nvram and state. kNotFound.
  virtual Status update_virtual_machine(const VirtualMachine& vm) = 0;
  // Deletes the node's virtual machine and every reservation row it holds,
  // in one transaction (capacity is free again). Idempotent.
  virtual Status release_virtual_machine(std::string_view node_id) = 0;
};

struct SqliteStoreOptions {
  std::string path;          // the database file ("DIR/kiln.db")
  int reader_connections = 4;
  // How long a writer waits for SQLite's lock before failing (another process
  // holding the file, e.g. a backup). Milliseconds.
  int busy_timeout_ms = 5000;
  // Source of created_at/updated_at/event timestamps; the system clock when null.
  const Clock* clock = nullptr;
};

// Opens (creating when absent) the SQLite store. Does not migrate.
Result<std::unique_ptr<NodeStore>> open_sqlite_store(const SqliteStoreOptions& options);

}  // namespace kiln
