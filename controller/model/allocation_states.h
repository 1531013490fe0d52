#pragma once
// The allocation state machine, as data (like the node's, state_machine.h).
//
//   pending --start--> provisioning --ready--> ready
//   ready --degrade--> provisioning      a member was lost and is replaced
//   pending | provisioning --fail--> failed
//                                    no replacement left; members are released
//   pending | provisioning | ready | failed --release--> releasing
//                                    DELETE, or the lease ran out
//   releasing --released--> released every member has left
//
// `released` is final. `failed` is final for the request, but its members
// are still undeployed by the engine, and a DELETE moves it through
// releasing to released like any other allocation.
//
// Members have their own small life (MemberStatus): member -> leaving (an
// undeploy was asked) -> left (the node is clean or out of the pool), or
// member -> left directly when the node never got the tenant's image.

#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "controller/model/allocation.h"

namespace kiln {

enum class AllocationEvent { kStart, kReady, kDegrade, kFail, kRelease, kReleased };

struct AllocationTransition {
  AllocationState from;
  AllocationEvent event;
  AllocationState to;
};

inline constexpr AllocationState kAllAllocationStates[] = {
    AllocationState::kPending, AllocationState::kProvisioning, AllocationState::kReady,
    AllocationState::kFailed,  AllocationState::kReleasing,    AllocationState::kReleased,
};
inline constexpr AllocationEvent kAllAllocationEvents[] = {
    AllocationEvent::kStart, AllocationEvent::kReady,   AllocationEvent::kDegrade,
    AllocationEvent::kFail,  AllocationEvent::kRelease, AllocationEvent::kReleased,
};

std::string_view to_string(AllocationState s);
std::optional<AllocationState> parse_allocation_state(std::string_view s);
std::string_view to_string(AllocationEvent e);
std::string_view to_string(MemberStatus s);
std::optional<MemberStatus> parse_member_status(std::string_view s);

std::span<const AllocationTransition> allocation_transitions();
// Where `event` takes an allocation in `from`; nullopt when no row allows it.
std::optional<AllocationState> next_allocation_state(AllocationState from, AllocationEvent event);

// Whether the engine still drives it: every state but released (a failed
// allocation is driven while members remain; the store decides that).
bool allocation_live(AllocationState s);
// States in which the allocation's members are being given back.
bool allocation_giving_back(AllocationState s);

// Whether a member whose row is `from` may move to `to`: forward only
// (member -> leaving -> left, or member -> left); left is final. A move
// asked from an older read of the row (a second departure of a member that
// has left) is refused, so it cannot be acted on twice.
bool member_may_move(MemberStatus from, MemberStatus to);

}  // namespace kiln
