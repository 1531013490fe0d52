#pragma once
// Running a command-line tool from a test and reading what it printed, for
// tests that check Kiln's output with an independent tool (blkid, sfdisk,
// isoinfo). Header-only; blocking; test code only.

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <string>

namespace kiln::testing {

struct ShellResult {
  int status = -1;  // the exit status, -1 when it did not exit normally
  std::string out;  // stdout (stderr too when the command says 2>&1)
};

// Runs `command` with /bin/sh.
inline ShellResult shell(const std::string& command) {
  ShellResult r;
  FILE* p = popen(command.c_str(), "r");
  if (p == nullptr) return r;
  std::array<char, 4096> buf{};
  std::size_t n = 0;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
  const int st = pclose(p);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

// Whether `tool` is on PATH (or an executable path); the test skips without it.
inline bool have_tool(const std::string& tool) {
  return shell("command -v '" + tool + "' >/dev/null 2>&1 || test -x '/usr/sbin/" + tool + "'").status == 0;
}

}  // namespace kiln::testing
