#pragma once
// Placement: does a flavour fit on a host, given what is already booked there?
// A pure function (no I/O): the store calls it inside the writer transaction
// that then inserts the rows it returns, so two concurrent deploys see each
// other's bookings and can never both take the same CPU or GPU.
//
// Rules:
//  - Only hosts whose status is `ready` take new guests.
//  - Memory: capacity - reserved_memory_mib - booked >= memory_mib. Hugepage
//    guests also need memory_mib / 2 free 2 MiB pages (configured pages minus
//    booked ones); pinned guests count both in their cell too.
//  - vCPUs, unpinned: (cpus - pinned CPUs) * cpu_allocation_ratio - booked
//    unpinned vCPUs >= vcpus.
//  - numa_pin: `vcpus` free host CPUs in ONE cell, with the cell's memory
//    (and hugepages), and the GPUs local to that cell (a GPU whose NUMA node
//    is unknown counts as local to every cell). Cells are tried in id order.
//  - GPUs: free NVIDIA GPUs (not booked); a vGPU (mdev type) request needs
//    GPUs offering that type and, in this version, still books the whole GPU.
// On failure the error is kConflict, its message naming each shortage:
// "host lab-host: needs 4 vcpus, 2 free; needs 1 gpu, 0 free".

#include <string>
#include <vector>

#include "common/result.h"
#include "controller/model/host.h"

namespace kiln {

Result<PlacementPlan> plan_placement(const Host& host, const std::vector<HostReservation>& booked,
                                     const Flavour& flavour, const std::string& node_id);

// The profile document's `virtual` block as a Flavour; kInvalidArgument naming
// /profile when the profile has none.
Result<Flavour> flavour_of_profile(const nlohmann::json& profile_doc, const std::string& profile_name);

// How many more guests of `flavour` fit on `host` after `booked`, placed one
// after another as plan_placement would (at most `cap`): what a virtual
// allocation could still get there.
int64_t guests_that_fit(const Host& host, std::vector<HostReservation> booked, const Flavour& flavour, int64_t cap);

// Free capacity of `host` after `booked`, for GET /v1/hosts (same arithmetic
// as plan_placement): vcpus, memory_mib, hugepages_2m, gpus (addresses).
nlohmann::json free_capacity(const Host& host, const std::vector<HostReservation>& booked);

}  // namespace kiln
