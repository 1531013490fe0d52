#pragma once
// AllocationStore: allocations, their members, and the usage ledger
// (controller/model/allocation.h, docs/tenancy.md).
//
// Claiming. A node belongs to an allocation while its `allocation` and
// `tenant` columns name it; the claim is written in the same transaction that
// checks the node is eligible (available, not in maintenance, no fault, not
// reserved, unclaimed, the profile and kind, every trait), so two requests
// racing for the same nodes cannot both get one: every claim here is all or
// nothing. A tenant's quota is checked against what its nodes count in that
// same transaction, so concurrent requests cannot overrun it either.
//
// Detaching gives a node back: its `tenant` and `allocation` are cleared (when
// they still name this allocation), and its member row records why. Detaching
// never moves a node's provision state: the allocation engine undeploys
// (cleans) a node before or while it leaves, so nothing returns to the pool
// uncleaned.
//
// Virtual allocations. Every virtual guest needs host capacity, so for an
// allocation of the virtual kind that capacity is booked in the claim's own
// transaction: a claimed libvirt node without a machine is placed on a host
// there and then, and when the free pool is short, new virtual nodes are made
// (inserted available, claimed and placed) for the rest. Either every node of
// the request has its capacity booked, or nothing is written and kConflict
// names /count with each host's shortage. Deploy later finds the booking
// (place_virtual_node returns it); undeploy destroys the guest and frees the
// capacity, and the node stays in the pool as an empty slot the next
// allocation reuses. A member that leaves without ever being deployed gives
// its booking back at once.
//
// The ledger is append-only: a usage row is inserted when a member is handed
// over and only its `ended_at` is written later, once.
//
// Threading and errors as NodeStore (controller/store/store.h): every method
// is safe from any thread and blocks on disk I/O.

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "controller/model/allocation.h"
#include "controller/model/host.h"
#include "controller/model/node.h"
#include "controller/store/event_log.h"

namespace kiln {

struct AllocationFilter {
  std::optional<std::string> tenant;
  std::optional<AllocationState> state;
};

// One row of the usage ledger.
struct UsageRecord {
  int64_t id = 0;
  std::string allocation;
  std::string node_id;
  std::string tenant;
  std::string profile;
  NodeKind kind = NodeKind::kBaremetal;
  int64_t started_at = 0;           // ms epoch
  std::optional<int64_t> ended_at;  // ms epoch; nullopt while billed
  int64_t price_micros_per_second = 0;
};

struct UsageFilter {
  std::optional<std::string> tenant;
  std::optional<std::string> allocation;
  int64_t from_ms = 0;  // rows that overlap [from_ms, to_ms)
  int64_t to_ms = 0;    // 0 = no upper bound
};

// How the virtual guests of an allocation are made and placed (see above);
// built from the profile's `virtual` flavour (controller/hosts/
// virtual_maker.h). Called on the store's writer thread, inside the claim's
// transaction: pure functions only.
struct VirtualNodeMaker {
  // A new virtual node for `allocation` (the store fills id, timestamps and
  // the claim).
  std::function<Node(const Allocation& allocation)> make;
  // The guest of `node_id` on `host` given what is booked there; kConflict
  // naming what is short.
  std::function<Result<PlacementPlan>(const Host& host, const std::vector<HostReservation>& booked,
                                      const std::string& node_id)>
      plan;
};

// Which allocations in_flight_with_nodes reads (the allocation engine's
// batch of those whose events it has seen).
struct AllocationScope {
  std::vector<std::string> ids;       // these allocations,
  std::vector<std::string> node_ids;  // and those with one of these nodes as a member that has not left
};

// In-flight allocations and the nodes of their members, read together.
struct AllocationsWithNodes {
  std::vector<Allocation> allocations;  // as allocations_in_flight: members filled, oldest first
  // The nodes of those allocations' members that have not left; a node that
  // was deleted is absent.
  std::vector<Node> nodes;
};

// An allocation and its current members' nodes, read together.
struct AllocationWithNodes {
  Allocation allocation;  // as get_allocation: members filled
  // The nodes of its members that have not left; a node that was deleted is
  // absent.
  std::vector<Node> nodes;
};

// One member's departure, for leave_members.
struct MemberLeave {
  std::string node_id;
  MemberStatus status = MemberStatus::kLeaving;  // leaving or left
  std::string reason;
};
// What leave_members wrote.
struct MembersLeft {
  Allocation allocation;    // as written, members filled
  std::vector<bool> moved;  // per MemberLeave: whether that member moved
};

// What update_allocation_with_usage writes to the usage ledger in the
// allocation's own transaction; filled by its `mutate` from the allocation as
// read there.
struct LedgerWrites {
  std::vector<UsageRecord> open;    // opened as open_usage opens them
  std::optional<int64_t> close_at;  // when set, every open row of the allocation closes then, as close_usage
};

class AllocationStore {
 public:
  virtual ~AllocationStore() = default;

  // Inserts `allocation` (id, name, tenant, request fields, state pending)
  // and claims `count` eligible nodes for it, with `events` and a
  // node.claimed event per node, all in one transaction. Errors, with nothing
  // written: kPermissionDenied naming "/count" when the tenant's quota for
  // the profile and kind would be exceeded ("quota for P K is 2, 2 in use");
  // kConflict naming "/count" when fewer nodes are eligible ("3 requested, 1
  // available"); kConflict naming "/name" when a live allocation of the
  // tenant has the name. `vms`: how virtual guests are placed and made
  // (null: existing nodes are claimed as they are).
  virtual Result<Allocation> create_allocation(const Allocation& allocation, const std::vector<EventDraft>& events,
                                               const VirtualNodeMaker* vms) = 0;
  // By id, or by name among `tenant`'s allocations (any tenant's when
  // `tenant` is empty; the live one first, else the newest). Members are
  // filled. kNotFound.
  virtual Result<Allocation> get_allocation(std::string_view id_or_name, std::string_view tenant) = 0;
  // get_allocation and its current members' nodes in one read snapshot (what
  // a poller of the allocation reads, in a few queries instead of one read
  // per member). Errors as get_allocation's.
  virtual Result<AllocationWithNodes> get_allocation_with_nodes(std::string_view id_or_name,
                                                                std::string_view tenant) = 0;
  virtual Result<std::vector<Allocation>> list_allocations(const AllocationFilter& filter) = 0;
  // The nodes of `allocations`' members that have not left (a deleted node is
  // absent), in one read snapshot and a few queries however many there are:
  // what an answer naming the allocations shows of their nodes, instead of
  // one read per member.
  virtual Result<std::vector<Node>> member_nodes(std::span<const Allocation> allocations) = 0;
  // Allocations the engine still has work on: every state but released, and
  // failed ones only while a member has not left.
  virtual Result<std::vector<Allocation>> allocations_in_flight() = 0;
  // The in-flight allocations (as allocations_in_flight) in `scope`, or every
  // one when `scope` is nullopt, and their members' nodes, in one read
  // snapshot and a few queries however many there are (the engine's one
  // store call per batch, instead of one per allocation and one per node).
  virtual Result<AllocationsWithNodes> in_flight_with_nodes(const std::optional<AllocationScope>& scope) = 0;
  // Reads the allocation, checks `expected_version` (kPreconditionFailed) when
  // given, runs `mutate` (an Error aborts with nothing written), writes it
  // with version+1 and appends `events`, in one transaction.
  virtual Result<Allocation> update_allocation_if(std::string_view id, std::optional<int64_t> expected_version,
                                                  const std::function<Status(Allocation&)>& mutate,
                                                  const std::vector<EventDraft>& events) = 0;
  // As update_allocation_if without a version, and the ledger writes `mutate`
  // asks for in the same transaction: an allocation's move to ready and the
  // opening of its members' usage rows (or a release and their closing)
  // commit together or not at all, so a kilnd killed in between never leaves
  // a ready allocation unbilled. Errors as update_allocation_if's.
  virtual Result<Allocation> update_allocation_with_usage(
      std::string_view id, const std::function<Status(Allocation&, LedgerWrites&)>& mutate,
      const std::vector<EventDraft>& events) = 0;
  // Member `node_id` of allocation `id` leaves: its row becomes `status`
  // (leaving or left) with `reason`, and when `status` is left the node is
  // detached (tenant and allocation cleared if they still name this
  // allocation). Then, when `replace` is set, one eligible node that was
  // never this allocation's member is claimed in its place and the
  // allocation's replacement count is bumped; kConflict (with nothing
  // written) when none is eligible or the allocation has used its `count`
  // replacements. Returns the allocation as written. `vms` as
  // for create_allocation, for the replacement. A member moves forward only
  // (member_may_move, allocation_states.h) and only one still `member` is
  // replaced: kPreconditionFailed, with nothing written, when its row has
  // moved since the caller read it (left already, or leaving when `status`
  // is leaving or `replace` is set), so a departure judged from an old read
  // is not made, nor replaced, twice. kNotFound when the allocation does not
  // exist or `node_id` is not its member.
  virtual Result<Allocation> leave_member(std::string_view id, std::string_view node_id, MemberStatus status,
                                          const std::string& reason, bool replace,
                                          const std::vector<EventDraft>& events, const VirtualNodeMaker* vms) = 0;

  // Members of allocation `id` leave, each as leave_member without
  // `replace` (and without events of the caller's) makes it leave, all in one
  // transaction: the release of an allocation's members is one write, not
  // one per member. A member refused as leave_member would refuse it (moved
  // since the caller read it, or not a member) is left as it is, with
  // `moved` false, and the others still move. kNotFound when the allocation
  // does not exist.
  virtual Result<MembersLeft> leave_members(std::string_view id, const std::vector<MemberLeave>& leaves) = 0;

  // Allocations by state name (for /metrics); states without any are absent.
  virtual Result<std::map<std::string, int64_t>> count_allocations_by_state() = 0;

  // Usage ledger. Opens a row per (allocation, node) not already open.
  virtual Status open_usage(const std::vector<UsageRecord>& rows) = 0;
  // Closes the open rows of `allocation` (of `node_id` only, when not empty)
  // at `at_ms`.
  virtual Status close_usage(std::string_view allocation, std::string_view node_id, int64_t at_ms) = 0;
  // Rows overlapping the filter's window, oldest first.
  virtual Result<std::vector<UsageRecord>> list_usage(const UsageFilter& filter) = 0;
};

}  // namespace kiln
