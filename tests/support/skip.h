#pragma once
// KILN_SKIP(message << parts): ends the running test case as *skipped*, not
// passed, when something it needs is absent (../shared fixtures, ipmitool,
// root for network namespaces). It prints "SKIPPED: <message>" on stderr and
// exits the process with kSkipExitCode, which CTest reports as "Skipped"
// (every suite is registered by kiln_discover_tests() in tests/CMakeLists.txt,
// which sets SKIP_RETURN_CODE), and lists under "The following tests did not
// run" in its summary.
//
// CTest runs each test case in its own process, so ending the process ends
// only that case. Run by hand (`suite_test` with no filter) the binary stops
// at the first skip: run one case at a time to see past it. The exit is
// _exit(): nothing else runs, so a half-built fixture cannot fail the case
// after it was declared skipped.

#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <sstream>

namespace kiln::testing {

constexpr int kSkipExitCode = 77;

[[noreturn]] inline void skip_test(const std::string& why) {
  std::cerr << "SKIPPED: " << why << std::endl;
  std::fflush(nullptr);
  ::_exit(kSkipExitCode);
}

}  // namespace kiln::testing

#define KILN_SKIP(msg)                                   \
  do {                                                   \
    std::ostringstream kiln_skip_os_;                    \
    kiln_skip_os_ << msg;                                \
    ::kiln::testing::skip_test(kiln_skip_os_.str());     \
  } while (false)
