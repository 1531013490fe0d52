#pragma once
// The process's descriptor limit (RLIMIT_NOFILE).
//
// A controller of thousands of BMCs holds a descriptor per IPMI BMC and per
// kept Redfish connection, far past the soft limit of 1,024 most service
// managers start it with. raise_fd_limit() lifts the soft limit to the hard
// one, as Go's runtime and nginx's worker_rlimit_nofile do; children started
// through ChildProcess get the original soft limit back (programs that use
// select(2) break above 1,024).
//
// Threading: raise_fd_limit() once, at start, before threads; the rest may
// be called anywhere (restore_fd_limit_in_child is async-signal-safe).

#include <cstddef>

namespace kiln {

// Raises the soft limit to the hard limit; returns the soft limit now in
// force (unchanged when raising failed).
std::size_t raise_fd_limit();

// The soft limit now in force.
std::size_t fd_limit();

// In a forked child before exec: the soft limit from before raise_fd_limit(),
// if it raised it.
void restore_fd_limit_in_child();

}  // namespace kiln
