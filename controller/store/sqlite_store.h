#pragma once
// SqliteStore: the NodeStore on one SQLite file (WAL).
//
// Connections. One writer connection, guarded by writer_mu_, performs every
// write: each public mutation is one BEGIN IMMEDIATE transaction that reads
// what it must check, writes the rows and appends the events, then commits;
// the event listener is called after the commit while the mutex is still held,
// so listeners see sequence numbers in increasing order (and must be quick: a
// listener should only wake whoever streams events). A small pool of
// reader connections (query_only) serves reads; WAL lets them read a committed
// snapshot while the writer works. Readers that need more than one query
// (a node and its ports, a page and the page's ports) run them inside one read
// transaction, so they never see a node without the ports committed with it.
//
// The per-node lock (Node::reservation) is just a column: taking it is an
// update_node_if with NodeCondition{.reservation = ""}, which, running under
// BEGIN IMMEDIATE on the single writer, is atomic against every other writer
// of this file, in this process or another.
//
// Statements are prepared once per connection and cached by SQL text (the
// list query's text depends only on which filters are set and the sort, never
// on their values, so the cache stays small).
//
// Re-entrancy: `mutate` in update_node_if and the event listener run with the
// writer held; calling a writing method of the same store from inside them
// would deadlock, so that is refused with kInternal (set_event_listener, which
// returns nothing, must not be called from there). Reads use the reader pool
// and work.
//
// Clarifications of the NodeStore contract as implemented here:
// - create_node/create_port: created_at is kept when set (else now), version is
//   kept when > 0 (else 1); updated_at = now. Port ids and created_at are
//   filled when empty.
// - Ports read back in (created_at, insertion order), so a node's ports keep the
//   order they were created in.
// - Events: node_id is filled with the node's id when empty, tenant with the
//   node's tenant after the change (before it, when the change cleared it) so a
//   release is still shown to the tenant that was released.
// - count_nodes_by_state has every provision state as a key, 0 when empty.
// - has_token_with_role counts only tokens that have not expired.
// - list_* limits must be > 0 (kInvalidArgument, field "limit").

#include <atomic>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "controller/store/sql/sql_store.h"
#include "controller/store/sqlite.h"

namespace kiln {

class SqliteStore final : public SqlStore {
 public:
  // Use open_sqlite_store(); this is public for tests that need the concrete type.
  static Result<std::unique_ptr<SqliteStore>> open(const SqliteStoreOptions& options);
  ~SqliteStore() override;

  Status migrate() override;
  Result<std::vector<std::string>> applied_migrations() override;

  Result<Node> create_node(const Node& node, const EventDraft& event) override;
  Result<Node> get_node(std::string_view id_or_name) override;
  Result<std::vector<Node>> list_nodes(const NodeFilter& filter, const ListOptions& opts) override;
  Result<Node> update_node_if(std::string_view id_or_name, const NodeCondition& cond,
                              const std::function<Status(Node&)>& mutate,
                              const std::vector<EventDraft>& events) override;
  Status delete_node_if(std::string_view id_or_name, const NodeCondition& cond,
                        const EventDraft& event) override;
  Result<std::vector<Node>> nodes_past_deadline(int64_t now_ms, int limit) override;
  Result<std::vector<Node>> nodes_in_flight() override;
  Result<std::vector<HeldNode>> nodes_held_by_prefix(const std::string& prefix) override;
  Result<std::map<std::string, int64_t>> count_nodes_by_state() override;

  Result<Port> create_port(const Port& port, const EventDraft& event) override;
  Result<Port> get_port(std::string_view id) override;
  Result<Port> find_port_by_address(std::string_view mac) override;
  Result<std::vector<Port>> list_ports(std::optional<std::string> node_id, int limit,
                                       std::string_view marker) override;
  Status delete_port(std::string_view id, const EventDraft& event) override;

  Result<std::vector<EventRecord>> list_events(int64_t since_seq, int limit,
                                               std::optional<std::string> node_id,
                                               std::optional<std::string> tenant) override;
  Result<int64_t> last_event_seq() override;
  void set_event_listener(std::function<void(int64_t)> listener) override;
  Status append_audit(const AuditRecord& record) override;
  Result<std::vector<AuditRecord>> list_audit(int64_t since_id, int limit) override;

  // sqlite_images.cc
  Result<Image> create_image(const Image& image) override;
  Result<Image> get_image(std::string_view id_or_name) override;
  Result<std::vector<Image>> list_images() override;
  Status delete_image(std::string_view id_or_name) override;
  Result<Image> update_image(const Image& image) override;
  Result<Image> set_image_public(std::string_view id_or_name, bool is_public) override;

  // sqlite_agent.cc
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
  Status append_events(const std::vector<EventDraft>& events) override;

  // sqlite_profiles.cc
  Result<Profile> create_profile(const Profile& profile) override;
  Result<Profile> get_profile(std::string_view name) override;
  Result<std::vector<Profile>> list_profiles() override;
  Result<Profile> replace_profile(const Profile& profile, std::optional<int64_t> expected_version) override;
  Status delete_profile(std::string_view name) override;
  Result<std::vector<std::string>> seed_profiles(const std::vector<Profile>& defaults) override;
  Result<ValidationRecord> record_validation(const ValidationRecord& record,
                                             const std::vector<EventDraft>& events) override;
  Result<ValidationRecord> get_validation(std::string_view id, std::string_view tenant) override;
  Result<std::vector<ValidationRecord>> list_validations(std::string_view node_id, std::string_view tenant, int limit,
                                                         std::string_view marker) override;
  Result<std::vector<ValidationRecord>> recent_passing_validations(std::string_view profile, std::string_view kind,
                                                                   int limit) override;
  Result<std::map<std::pair<std::string, std::string>, int64_t>> count_free_nodes() override;

  // sqlite_hosts.cc
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

  Result<Tenant> create_tenant(const Tenant& tenant) override;
  Result<Tenant> get_tenant(std::string_view name) override;
  Result<std::vector<Tenant>> list_tenants() override;
  Result<Tenant> replace_tenant(const Tenant& tenant, int64_t expected_version) override;
  Status delete_tenant(std::string_view name) override;
  Result<TenantUsage> tenant_usage(std::string_view name) override;
  Result<std::map<std::string, TenantUsage>> usage_by_tenant() override;

  // sqlite_allocations.cc
  Result<Allocation> create_allocation(const Allocation& allocation, const std::vector<EventDraft>& events,
                                       const VirtualNodeMaker* vms) override;
  Result<Allocation> get_allocation(std::string_view id_or_name, std::string_view tenant) override;
  Result<std::vector<Allocation>> list_allocations(const AllocationFilter& filter) override;
  Result<std::vector<Allocation>> allocations_in_flight() override;
  Result<Allocation> update_allocation_if(std::string_view id, std::optional<int64_t> expected_version,
                                          const std::function<Status(Allocation&)>& mutate,
                                          const std::vector<EventDraft>& events) override;
  Result<Allocation> leave_member(std::string_view id, std::string_view node_id, MemberStatus status,
                                  const std::string& reason, bool replace,
                                  const std::vector<EventDraft>& events, const VirtualNodeMaker* vms) override;
  Result<std::map<std::string, int64_t>> count_allocations_by_state() override;
  Status open_usage(const std::vector<UsageRecord>& rows) override;
  Status close_usage(std::string_view allocation, std::string_view node_id, int64_t at_ms) override;
  Result<std::vector<UsageRecord>> list_usage(const UsageFilter& filter) override;

  // sqlite_conductors.cc
  Result<ConductorRecord> register_conductor(const ConductorRecord& c) override;
  Result<ConductorRecord> heartbeat_conductor(std::string_view id) override;
  Status stop_conductor(std::string_view id) override;
  Result<std::vector<ConductorRecord>> list_conductors() override;

 private:
  // Exclusive use of the writer connection for one call.
  class WriterLock;
  // Exclusive use of one reader connection for one call; returned on scope exit.
  class ReaderLease;

  SqliteStore(const SqliteStoreOptions& options, std::unique_ptr<sql::Database> writer,
              std::vector<std::unique_ptr<sql::Database>> readers);

  // SqlStore's engine hooks: the writer connection under BEGIN IMMEDIATE,
  // the reader pool, AUTOINCREMENT event numbers announced while the writer
  // is still held (so listeners see them in order).
  Status write(const std::function<Status(Tx&)>& f) override;
  Status autocommit(const std::function<Status(db::Conn&)>& f) override;
  Status read(const std::function<Status(db::Conn&)>& f) override;
  Status snapshot(const std::function<Status(db::Conn&)>& f) override;
  Result<int64_t> insert_events(db::Conn& conn, const std::vector<EventDraft>& events, const Node* node,
                                const std::string& fallback_tenant) override;
  int64_t now_ms() const override { return clock_->now_ms(); }
  // Runs `f` on the writer / on a pooled reader with the same rules as
  // WriterLock / ReaderLease (for sqlite_images.cc, which cannot see those).
  Status on_writer(const std::function<Status(sql::Database&)>& f);
  Status on_reader(const std::function<Status(sql::Database&)>& f);
  Result<WriterLock> lock_writer();
  ReaderLease lease_reader();
  // Appends `events` on the writer (inside the caller's transaction); returns the
  // highest seq written, or 0 when `events` is empty.
  Result<int64_t> insert_events(const std::vector<EventDraft>& events, const Node* node,
                                const std::string& fallback_tenant);
  void notify(int64_t seq);

  const SqliteStoreOptions options_;
  SystemClock system_clock_;
  const Clock* clock_;

  std::mutex writer_mu_;
  std::atomic<std::thread::id> writer_owner_{};
  std::unique_ptr<sql::Database> writer_;
  std::function<void(int64_t)> listener_;  // guarded by writer_mu_

  std::mutex readers_mu_;
  std::condition_variable reader_free_;
  std::vector<std::unique_ptr<sql::Database>> readers_;
  std::vector<sql::Database*> free_readers_;  // guarded by readers_mu_
};

}  // namespace kiln
