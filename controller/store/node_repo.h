#pragma once
// NodeRepo: nodes and their ports, the aggregate the conductor locks. Every
// mutation is a conditional update in one transaction (update_node_if), which
// is also how the per-node lock is taken (the Ironic conductor model: a
// conditional UPDATE of a reservation column).
//
// Threading and errors as NodeStore (controller/store/store.h): every method
// is safe from any thread and blocks on disk I/O.

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/result.h"
#include "controller/model/node.h"
#include "controller/model/ring_position.h"
#include "controller/store/event_log.h"

namespace kiln {

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
// A node held by an operation, as nodes_held_by_prefix reads it.
struct HeldNode {
  std::string node_id;
  std::string reservation;
  ProvisionState provision_state = ProvisionState::kEnroll;
};

// A node as a power-sync sweep reads it (power_sync_nodes): what decides
// whether its BMC is asked, what asks it, and what judges the answer and
// guards the write. No JSON document but the BMC's options, no ports.
struct PowerSyncNode {
  std::string id;
  std::string allocation;  // with id, what places the node on the conductor ring
  // The node's stored ring position; nullopt while it is not placed yet
  // (written by a kilnd from before positions were stored).
  std::optional<int64_t> ring_position;
  ProvisionState provision_state = ProvisionState::kEnroll;
  std::string reservation;
  PowerState power_state = PowerState::kUnknown;
  std::string fault;
  int64_t version = 0;
  // Read only where power_sync_asks(): empty for the others, which a sweep
  // skips (most of an idle fleet's rows, a minute apart).
  BmcInfo bmc;
};

// Whether a power-sync sweep may ask the node's BMC: verified (out of
// enroll) and held by no operation (whose own writes record the power).
inline bool power_sync_asks(ProvisionState state, std::string_view reservation) {
  return state != ProvisionState::kEnroll && reservation.empty();
}

// Where the next power_sync_nodes page starts: after the node `id` at
// `position`. The unplaced nodes (no stored position) come first, by id,
// with position nullopt; the default value is the start.
struct RingCursor {
  std::optional<int64_t> position;
  std::string id;
  static RingCursor after(const PowerSyncNode& n) { return {n.ring_position, n.id}; }
};

// Node counts by ring member (count_nodes_on_ring).
struct RingCounts {
  std::vector<int64_t> per_member;  // indexed like RingArc::member
  // The ownership keys (ring_position.h) of the nodes not placed yet, whose
  // owner the caller decides.
  std::vector<std::string> unplaced;
};

struct NodeCondition {
  std::optional<int64_t> version;                 // else kPreconditionFailed
  std::optional<std::string> reservation;         // must equal ("" = must be free); else kConflict
  std::optional<ProvisionState> provision_state;  // must equal; else kConflict
};

class NodeRepo {
 public:
  virtual ~NodeRepo() = default;

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
  // The earliest deadline_at at or after `from_ms` among the nodes that have
  // one; nullopt when there is none. One look-up in the deadline index: the
  // conductor's timeout job sleeps until it instead of polling.
  virtual Result<std::optional<int64_t>> next_deadline(int64_t from_ms) = 0;
  // Nodes that hold a reservation or are in a transient state (start-up recovery).
  virtual Result<std::vector<Node>> nodes_in_flight() = 0;
  // The nodes whose reservation starts with `prefix` (a conductor's "<id>/":
  // the operations named for it), by node id, as only the three fields the
  // conductor's adoption pass needs: it asks on every event, so no whole
  // rows are read (the partial index on reserved nodes serves it).
  virtual Result<std::vector<HeldNode>> nodes_held_by_prefix(const std::string& prefix) = 0;
  // Up to `limit` nodes, those after `after`, as a power-sync sweep reads
  // them: the PowerSyncNode columns only, so a sweep builds no Node, parses
  // no inventory and reads no ports. Only the nodes whose stored ring
  // position lies in `ranges` (sorted, disjoint: the arcs an instance owns,
  // HashRing::ranges_of; {kWholeRing} for every node), in (position, id)
  // order, after every node not placed yet, by id: those are anyone's, and
  // the caller decides. So an instance reads its own share of the nodes
  // through the (ring_pos, id) index, not every node. kInvalidArgument
  // naming "limit" when limit <= 0.
  virtual Result<std::vector<PowerSyncNode>> power_sync_nodes(const std::vector<RingRange>& ranges,
                                                              const RingCursor& after, int limit) = 0;
  // How many placed nodes lie on each member's arcs (`arcs` as HashRing::arcs
  // gives them; per_member has one entry per member index up to the largest
  // named), counted in the (ring_pos, id) index without reading a row, and
  // the ownership keys of the unplaced ones.
  virtual Result<RingCounts> count_nodes_on_ring(const std::vector<RingArc>& arcs) = 0;
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

  // Free nodes by (profile, kind): available, not in maintenance, no fault,
  // not reserved, claimed by no allocation or tenant (the nodes a new
  // allocation may take). Pairs with no free node are absent. Virtual nodes
  // driven by libvirt are not counted: each needs a guest placed on a host,
  // so what is free of them is host capacity (controller/hosts/placement.h,
  // guests_that_fit), not rows.
  virtual Result<std::map<std::pair<std::string, NodeKind>, int64_t>> count_free_nodes() = 0;
};

}  // namespace kiln
