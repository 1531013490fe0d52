#pragma once
// Runs a shell command line and captures its stdout and exit status; used by
// tests that run Kiln's binaries or check its output with independent tools
// (blkid, sfdisk, isoinfo).

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <string>

#include <catch2/catch.hpp>

namespace kiln::test {

struct CommandRun {
  int status = -1;
  std::string out;
};

inline CommandRun run_command(const std::string& cmd) {
  CommandRun r;
  FILE* p = popen(cmd.c_str(), "r");
  REQUIRE(p != nullptr);
  std::array<char, 4096> buf{};
  std::size_t n = 0;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
  const int st = pclose(p);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

// Whether `tool` is on PATH or in /usr/sbin (a test skips without it).
inline bool have_tool(const std::string& tool) {
  return run_command("command -v '" + tool + "' >/dev/null 2>&1 || test -x '/usr/sbin/" + tool + "'").status == 0;
}

}  // namespace kiln::test
