// The allocation transition table, every (state, event) pair.
#include <catch2/catch.hpp>

#include <map>
#include <set>
#include <utility>

#include "controller/model/allocation_states.h"

using namespace kiln;
using S = AllocationState;
using E = AllocationEvent;

TEST_CASE("allocation states: every (state, event) pair is exactly what the table says", "[allocation_states]") {
  // The whole contract, written out: anything not listed is refused.
  const std::map<std::pair<S, E>, S> allowed = {
      {{S::kPending, E::kStart}, S::kProvisioning},      {{S::kProvisioning, E::kReady}, S::kReady},
      {{S::kReady, E::kDegrade}, S::kProvisioning},      {{S::kPending, E::kFail}, S::kFailed},
      {{S::kProvisioning, E::kFail}, S::kFailed},        {{S::kPending, E::kRelease}, S::kReleasing},
      {{S::kProvisioning, E::kRelease}, S::kReleasing},  {{S::kReady, E::kRelease}, S::kReleasing},
      {{S::kFailed, E::kRelease}, S::kReleasing},        {{S::kReleasing, E::kReleased}, S::kReleased},
  };
  int pairs = 0;
  for (S s : kAllAllocationStates)
    for (E e : kAllAllocationEvents) {
      ++pairs;
      auto it = allowed.find({s, e});
      std::optional<S> got = next_allocation_state(s, e);
      INFO(to_string(s) << " --" << to_string(e) << "-->");
      if (it == allowed.end()) CHECK_FALSE(got.has_value());
      else CHECK(got == it->second);
    }
  CHECK(pairs == 36);
  CHECK(allocation_transitions().size() == allowed.size());
}

TEST_CASE("allocation states: released is final, and every other state can be released", "[allocation_states]") {
  for (E e : kAllAllocationEvents) CHECK_FALSE(next_allocation_state(S::kReleased, e).has_value());
  for (S s : kAllAllocationStates) {
    if (s == S::kReleased || s == S::kReleasing) continue;
    CHECK(next_allocation_state(s, E::kRelease) == S::kReleasing);
  }
  // Every state is reachable from pending.
  std::set<S> seen = {S::kPending};
  for (int round = 0; round < 6; ++round)
    for (const AllocationTransition& t : allocation_transitions())
      if (seen.count(t.from)) seen.insert(t.to);
  CHECK(seen.size() == std::size(kAllAllocationStates));
}

TEST_CASE("allocation states: names round-trip", "[allocation_states]") {
  for (S s : kAllAllocationStates) CHECK(parse_allocation_state(to_string(s)) == s);
  CHECK_FALSE(parse_allocation_state("active").has_value());
  for (MemberStatus m : {MemberStatus::kMember, MemberStatus::kLeaving, MemberStatus::kLeft})
    CHECK(parse_member_status(to_string(m)) == m);
}

TEST_CASE("allocation states: a member moves forward only, and left is final", "[allocation_states]") {
  using M = MemberStatus;
  CHECK(member_may_move(M::kMember, M::kLeaving));
  CHECK(member_may_move(M::kMember, M::kLeft));
  CHECK(member_may_move(M::kLeaving, M::kLeft));
  // A second departure asked from an older read of the row.
  CHECK_FALSE(member_may_move(M::kLeaving, M::kLeaving));
  CHECK_FALSE(member_may_move(M::kLeft, M::kLeft));
  CHECK_FALSE(member_may_move(M::kLeft, M::kLeaving));
  for (M from : {M::kMember, M::kLeaving, M::kLeft}) CHECK_FALSE(member_may_move(from, M::kMember));
}
