#pragma once
// A count kept by Membership for tests, apart from membership.h so that
// reading it does not touch the header most of the controller includes.
//
// Thread-safe (a relaxed atomic). Process-wide: a test reads it before and
// after the refreshes it drives and compares the two, with no other
// Membership refreshing meanwhile.

#include <cstdint>

namespace kiln {

// How many hash rings every Membership in this process has built (at start,
// and at each refresh that saw the set of live conductors change). A
// heartbeat that sees the same live conductors reuses the ring it had: the
// points of every member hashed and sorted again would give the same ring.
uint64_t membership_ring_builds();

}  // namespace kiln
