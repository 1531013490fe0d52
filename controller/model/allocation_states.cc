#include "controller/model/allocation_states.h"

namespace kiln {
namespace {

using S = AllocationState;
using E = AllocationEvent;

constexpr AllocationTransition kRows[] = {
    {S::kPending, E::kStart, S::kProvisioning},
    {S::kProvisioning, E::kReady, S::kReady},
    {S::kReady, E::kDegrade, S::kProvisioning},
    {S::kPending, E::kFail, S::kFailed},
    {S::kProvisioning, E::kFail, S::kFailed},
    {S::kPending, E::kRelease, S::kReleasing},
    {S::kProvisioning, E::kRelease, S::kReleasing},
    {S::kReady, E::kRelease, S::kReleasing},
    {S::kFailed, E::kRelease, S::kReleasing},
    {S::kReleasing, E::kReleased, S::kReleased},
};

}  // namespace

std::string_view to_string(AllocationState s) {
  switch (s) {
    case S::kPending: return "pending";
    case S::kProvisioning: return "provisioning";
    case S::kReady: return "ready";
    case S::kFailed: return "failed";
    case S::kReleasing: return "releasing";
    case S::kReleased: return "released";
  }
  return "?";
}

std::optional<AllocationState> parse_allocation_state(std::string_view s) {
  for (S st : kAllAllocationStates)
    if (to_string(st) == s) return st;
  return std::nullopt;
}

std::string_view to_string(AllocationEvent e) {
  switch (e) {
    case E::kStart: return "start";
    case E::kReady: return "ready";
    case E::kDegrade: return "degrade";
    case E::kFail: return "fail";
    case E::kRelease: return "release";
    case E::kReleased: return "released";
  }
  return "?";
}

std::string_view to_string(MemberStatus s) {
  switch (s) {
    case MemberStatus::kMember: return "member";
    case MemberStatus::kLeaving: return "leaving";
    case MemberStatus::kLeft: return "left";
  }
  return "?";
}

std::optional<MemberStatus> parse_member_status(std::string_view s) {
  for (MemberStatus m : {MemberStatus::kMember, MemberStatus::kLeaving, MemberStatus::kLeft})
    if (to_string(m) == s) return m;
  return std::nullopt;
}

bool member_may_move(MemberStatus from, MemberStatus to) {
  auto rank = [](MemberStatus m) {
    switch (m) {
      case MemberStatus::kMember: return 0;
      case MemberStatus::kLeaving: return 1;
      case MemberStatus::kLeft: return 2;
    }
    return 2;
  };
  return rank(to) > rank(from);
}

std::span<const AllocationTransition> allocation_transitions() { return kRows; }

std::optional<AllocationState> next_allocation_state(AllocationState from, AllocationEvent event) {
  for (const AllocationTransition& t : kRows)
    if (t.from == from && t.event == event) return t.to;
  return std::nullopt;
}

bool allocation_live(AllocationState s) { return s != S::kReleased; }

bool allocation_giving_back(AllocationState s) { return s == S::kFailed || s == S::kReleasing; }

}  // namespace kiln
