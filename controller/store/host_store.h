#pragma once
// HostStore: hypervisor hosts and the virtual machines placed on them, with
// the reservation rows that book their capacity (sql/hosts.cc).
//
// Threading and errors as NodeStore (controller/store/store.h): every method
// is safe from any thread and blocks on disk I/O.

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "controller/model/host.h"

namespace kiln {

class HostStore {
 public:
  virtual ~HostStore() = default;

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
  // When the node already has a VirtualMachine it is returned as it is (a
  // resumed deploy does not book twice); one booked by an allocation's claim
  // (no domain yet) takes `vm`'s domain and mac. kInvalidArgument naming
  // /host for an unknown host (the caller's input is wrong); kConflict "no
  // hypervisor host is registered", or joining every host's shortage when
  // none fits.
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

}  // namespace kiln
