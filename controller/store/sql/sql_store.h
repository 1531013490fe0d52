#pragma once
// SqlStore: the NodeStore's flows, written once over the SQL seam
// (controller/store/sql/conn.h) and shared by the SQLite store
// (sqlite_store.h) and the PostgreSQL store (pg/pg_store.h). Each engine
// derives from it and supplies only what really differs: how a write
// transaction, a read and a read snapshot begin, and how events are numbered
// and announced (the hooks below; SQLite numbers them as they are appended,
// PostgreSQL after the commit, pg/pg_events.cc). The flows' files are named
// beside the aggregates they implement.
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

  // TenantStore (sql/tenants.cc)
  Result<Tenant> create_tenant(const Tenant& tenant) override;
  Result<Tenant> get_tenant(std::string_view name) override;
  Result<std::vector<Tenant>> list_tenants() override;
  Result<Tenant> replace_tenant(const Tenant& tenant, int64_t expected_version) override;
  Status delete_tenant(std::string_view name) override;
  Result<TenantUsage> tenant_usage(std::string_view name) override;
  Result<std::map<std::string, TenantUsage>> usage_by_tenant() override;

  // ConductorStore (sql/conductors.cc)
  Result<ConductorRecord> register_conductor(const ConductorRecord& c) override;
  Result<ConductorRecord> heartbeat_conductor(std::string_view id) override;
  Status stop_conductor(std::string_view id) override;
  Result<std::vector<ConductorRecord>> list_conductors() override;

  // NodeRepo (sql/nodes.cc; the node row layout in sql/node_rows.h)
  Result<Node> create_node(const Node& node, const EventDraft& event) override;
  Result<Node> get_node(std::string_view id_or_name) override;
  Result<std::vector<Node>> list_nodes(const NodeFilter& filter, const ListOptions& opts) override;
  Result<Node> update_node_if(std::string_view id_or_name, const NodeCondition& cond,
                              const std::function<Status(Node&)>& mutate,
                              const std::vector<EventDraft>& events) override;
  Status delete_node_if(std::string_view id_or_name, const NodeCondition& cond, const EventDraft& event) override;
  Result<std::vector<Node>> nodes_past_deadline(int64_t now_ms, int limit) override;
  Result<std::optional<int64_t>> next_deadline(int64_t from_ms) override;
  Result<std::vector<PowerSyncNode>> power_sync_nodes(const std::vector<RingRange>& ranges, const RingCursor& after,
                                                      int limit) override;
  Result<RingCounts> count_nodes_on_ring(const std::vector<RingArc>& arcs) override;
  Result<std::vector<Node>> nodes_in_flight() override;
  Result<std::vector<HeldNode>> nodes_held_by_prefix(const std::string& prefix) override;
  Result<std::map<std::string, int64_t>> count_nodes_by_state() override;
  Result<std::map<std::pair<std::string, NodeKind>, int64_t>> count_free_nodes() override;
  Result<Port> create_port(const Port& port, const EventDraft& event) override;
  Result<Port> get_port(std::string_view id) override;
  Result<Port> find_port_by_address(std::string_view mac) override;
  Result<std::vector<Port>> list_ports(std::optional<std::string> node_id, int limit,
                                       std::string_view marker) override;
  Status delete_port(std::string_view id, const EventDraft& event) override;

  // EventLog (sql/events.cc; set_event_listener is the engine's)
  Result<std::vector<EventRecord>> list_events(int64_t since_seq, int limit, std::optional<std::string> node_id,
                                               std::optional<std::string> tenant) override;
  Result<int64_t> last_event_seq() override;
  Status append_events(const std::vector<EventDraft>& events) override;
  Status append_audit(const AuditRecord& record) override;
  Result<std::vector<AuditRecord>> list_audit(int64_t since_id, int limit) override;

  // CatalogueStore (sql/images.cc, sql/profiles.cc)
  Result<Image> create_image(const Image& image) override;
  Result<Image> get_image(std::string_view id_or_name) override;
  Result<std::vector<Image>> list_images() override;
  Status delete_image(std::string_view id_or_name) override;
  Result<Image> update_image(const Image& image) override;
  Result<Image> set_image_public(std::string_view id_or_name, bool is_public) override;
  Result<Profile> create_profile(const Profile& profile) override;
  Result<Profile> get_profile(std::string_view name) override;
  Result<std::vector<Profile>> list_profiles() override;
  Result<Profile> replace_profile(const Profile& profile, std::optional<int64_t> expected_version) override;
  Status delete_profile(std::string_view name) override;
  Result<std::vector<std::string>> seed_profiles(const std::vector<Profile>& defaults) override;

  // ValidationStore (sql/validations.cc)
  Result<ValidationRecord> record_validation(const ValidationRecord& record,
                                             const std::vector<EventDraft>& events) override;
  Result<ValidationRecord> get_validation(std::string_view id, std::string_view tenant) override;
  Result<std::vector<ValidationRecord>> list_validations(std::string_view node_id, std::string_view tenant, int limit,
                                                         std::string_view marker) override;
  Result<std::vector<ValidationRecord>> recent_passing_validations(std::string_view profile, NodeKind kind,
                                                                   int limit) override;

  // AgentStore (sql/agent.cc; append_events is EventLog's)
  Status set_agent_boot_token(std::string_view node_id, std::string_view token_hash,
                              std::string_view token_sealed) override;
  Result<std::optional<std::string>> agent_boot_token_sealed(std::string_view node_id) override;
  Status clear_agent_boot_token(std::string_view node_id) override;
  Result<AgentOsSecret> put_agent_os_secret(const AgentOsSecret& secret) override;
  Result<std::optional<AgentOsSecret>> get_agent_os_secret(std::string_view node_id) override;
  Status delete_agent_os_secret(std::string_view node_id) override;
  Status open_agent_session(const AgentSession& session, std::string_view boot_token_hash,
                            const std::vector<EventDraft>& events) override;
  Result<AgentSession> find_agent_session(std::string_view token_hash) override;
  Result<std::vector<AgentSession>> agent_sessions_of(std::string_view node_id) override;
  Status delete_agent_sessions(std::string_view node_id) override;
  Status put_agent_command(const AgentCommandRecord& command) override;
  Result<std::optional<AgentCommandRecord>> get_agent_command(std::string_view node_id) override;
  Result<std::optional<AgentCommandHandout>> deliver_agent_command(std::string_view node_id,
                                                                   int64_t now_ms) override;
  Result<AgentCommandRecord> record_agent_result(std::string_view node_id, std::string_view command_id,
                                                 std::string_view status, const nlohmann::json& result,
                                                 std::string_view error) override;
  Status clear_agent_command(std::string_view node_id, std::string_view command_id) override;

  // HostStore (sql/hosts.cc; rows and booking in sql/host_rows.h)
  Result<Host> create_host(const Host& host) override;
  Result<Host> get_host(std::string_view id_or_name) override;
  Result<std::vector<Host>> list_hosts() override;
  Status set_host_status(std::string_view id, std::string_view status, std::string_view reason,
                         const std::optional<HostCapacity>& capacity) override;
  Status delete_host(std::string_view id_or_name) override;
  Result<std::vector<HostReservation>> host_reservations(std::string_view host_id) override;
  Result<VirtualMachine> place_virtual_node(const VirtualMachine& vm, std::string_view host,
                                            const PlacementPlanner& planner) override;
  Result<VirtualMachine> get_virtual_machine(std::string_view node_id) override;
  Result<std::vector<VirtualMachine>> list_virtual_machines(std::string_view host_id) override;
  Status update_virtual_machine(const VirtualMachine& vm) override;
  Status release_virtual_machine(std::string_view node_id) override;

  // AllocationStore (sql/allocations.cc: reads and updates;
  // sql/allocation_claims.cc: the claim on nodes and members leaving;
  // sql/allocations_in_flight.cc: the engine's reads; sql/allocation_rows.h:
  // the row layout; sql/usage.cc: the usage ledger)
  Result<Allocation> create_allocation(const Allocation& allocation, const std::vector<EventDraft>& events,
                                       const VirtualNodeMaker* vms) override;
  Result<Allocation> get_allocation(std::string_view id_or_name, std::string_view tenant) override;
  Result<AllocationWithNodes> get_allocation_with_nodes(std::string_view id_or_name,
                                                        std::string_view tenant) override;
  Result<std::vector<Allocation>> list_allocations(const AllocationFilter& filter) override;
  Result<std::vector<Node>> member_nodes(std::span<const Allocation> allocations) override;
  Result<std::vector<Allocation>> allocations_in_flight() override;
  Result<AllocationsWithNodes> in_flight_with_nodes(const std::optional<AllocationScope>& scope) override;
  Result<Allocation> update_allocation_if(std::string_view id, std::optional<int64_t> expected_version,
                                          const std::function<Status(Allocation&)>& mutate,
                                          const std::vector<EventDraft>& events) override;
  Result<Allocation> update_allocation_with_usage(std::string_view id,
                                                  const std::function<Status(Allocation&, LedgerWrites&)>& mutate,
                                                  const std::vector<EventDraft>& events) override;
  Result<Allocation> leave_member(std::string_view id, std::string_view node_id, MemberStatus status,
                                  const std::string& reason, bool replace, const std::vector<EventDraft>& events,
                                  const VirtualNodeMaker* vms) override;
  Result<MembersLeft> leave_members(std::string_view id, const std::vector<MemberLeave>& leaves) override;
  Result<std::map<std::string, int64_t>> count_allocations_by_state() override;
  Status open_usage(const std::vector<UsageRecord>& rows) override;
  Status close_usage(std::string_view allocation, std::string_view node_id, int64_t at_ms) override;
  Result<std::vector<UsageRecord>> list_usage(const UsageFilter& filter) override;

 protected:
  // One write transaction's connection, whether it appended events, and the
  // highest event sequence it appended where the engine numbers them in the
  // transaction (SQLite; 0 on PostgreSQL, which numbers them after the
  // commit). The engine announces them to the listener after the commit.
  struct Tx {
    db::Conn& conn;
    bool appended_events = false;
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
  // Appends `events` inside the caller's write transaction; returns the
  // highest sequence written, 0 for none or where the engine numbers events
  // only after the commit (PostgreSQL). Node events get the node's id and
  // tenant (`fallback_tenant` when the node has none any more) where the draft
  // leaves them empty.
  virtual Result<int64_t> insert_events(db::Conn& conn, const std::vector<EventDraft>& events, const Node* node,
                                        const std::string& fallback_tenant) = 0;
  virtual int64_t now_ms() const = 0;

  // Stores the ring position of every node that has none (rows written before
  // 025_ring_position, or by a kilnd from before it), a batch per write
  // transaction, each only while the node's allocation is still the one read.
  // The engines' migrate() runs it after the migrations.
  Status place_nodes_on_ring();

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

  // Where insert_event_rows writes: the log itself, each row numbered by the
  // engine as it goes in (SQLite's AUTOINCREMENT), or PostgreSQL's
  // event_queue, numbered when published after the commit.
  enum class EventRows { kLog, kQueue };
  // The rows of insert_events (sql/events.cc), for the engines' hooks, with a
  // node event's id and tenant filled as insert_events says. Returns the
  // highest sequence written (0 for none, and always for kQueue).
  Result<int64_t> insert_event_rows(db::Conn& conn, EventRows rows, const std::vector<EventDraft>& events,
                                    const Node* node, const std::string& fallback_tenant);

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
