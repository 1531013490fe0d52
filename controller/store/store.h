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
#include "controller/model/node.h"

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

struct NodeFilter {
  std::optional<ProvisionState> provision_state;
  std::optional<NodeKind> kind;
  std::optional<std::string> profile;
  std::optional<bool> maintenance;
  std::optional<std::string> tenant;
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
