#pragma once
// Allocation: a tenant's request for `count` proven nodes of one profile and
// kind, and the nodes that serve it (docs/tenancy.md). Plain data: the
// states and their transitions are controller/model/allocation_states.h,
// the rows are kept by AllocationStore (controller/store/allocation_store.h),
// and the engine that moves them is controller/tenancy/allocation_engine.h.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "controller/model/states.h"  // NodeKind

namespace kiln {

enum class AllocationState {
  kPending,       // reserved, no member deploying yet
  kProvisioning,  // members deploying, validating, or being replaced
  kReady,         // every member active and proven; billed from here
  kFailed,        // could not be satisfied; members are released
  kReleasing,     // members being undeployed
  kReleased,      // every member left; final
};

// One change of state, for the allocation's `history`.
struct AllocationHistoryEntry {
  int64_t at = 0;  // ms epoch
  std::string from;
  std::string to;
  std::string reason;
};

// A node's place in an allocation. A member stays a row after it leaves, so
// the allocation shows who served it and why they left.
enum class MemberStatus {
  kMember,    // serving (deploying, validating or active)
  kLeaving,   // undeploy asked; waiting for the node to be cleaned
  kLeft,      // no longer the allocation's (released, or replaced)
};

struct AllocationMember {
  std::string node_id;
  MemberStatus status = MemberStatus::kMember;
  std::string reason;   // why it left ("replaced: deploy failed: ...", "released")
  int64_t joined_at = 0;
  int64_t left_at = 0;  // 0 while a member
};

struct Allocation {
  std::string id;      // UUID
  std::string name;    // unique among the tenant's live allocations
  std::string tenant;
  std::string profile;
  NodeKind kind = NodeKind::kBaremetal;
  int64_t count = 0;
  std::string image;   // id or name of a public (or, for staff, any) os image
  std::vector<std::string> ssh_keys;  // OpenSSH public keys, checked
  std::string user_data;              // the tenant's own cloud-config, may be empty
  std::vector<std::string> traits;    // every member has all of them
  AllocationState state = AllocationState::kPending;
  std::string last_error;
  int64_t lease_seconds = 0;  // 0 = no lease
  int64_t expires_at = 0;     // ms epoch; 0 = never
  int64_t replacements = 0;   // members replaced so far (at most `count`)
  int64_t ready_at = 0;       // when it first became ready; 0 until then
  std::vector<AllocationHistoryEntry> history;
  std::vector<AllocationMember> members;  // filled by the store on reads
  int64_t created_at = 0;
  int64_t updated_at = 0;
  int64_t version = 0;
};

}  // namespace kiln
