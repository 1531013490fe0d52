// The Catch2 main of every suite. CTest runs each test case by name (one
// catch_discover_tests entry per case), and a name that matches no case would
// otherwise "pass" having run nothing: a ';' in a TEST_CASE name splits it in
// two CMake list items, and neither half matches. --warn NoTests makes such a
// run fail (exit code 2), so a test that cannot run cannot pass.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

int main(int argc, char* argv[]) {
  Catch::Session session;
  if (int rc = session.applyCommandLine(argc, argv); rc != 0) return rc;
  Catch::ConfigData& config = session.configData();
  config.warnings = static_cast<Catch::WarnAbout::What>(config.warnings | Catch::WarnAbout::NoTests);
  return session.run();
}
