#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/wait.h>

#include <fstream>
#include <sstream>
#include <thread>

#include "controller/boot/child_process.h"

using namespace kiln;
using namespace kiln::boot;

namespace {
std::optional<int> wait_exit(ChildProcess& c) {
  for (int i = 0; i < 500; ++i) {
    if (auto st = c.poll()) return st;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return std::nullopt;
}
}  // namespace

TEST_CASE("child process: output to a file, exit status, no leaked descriptors") {
  const std::string out = "/tmp/kiln-child-" + std::to_string(::getpid()) + ".log";
  ::unlink(out.c_str());
  ChildSpec spec;
  // Lists its open descriptors: only 0, 1, 2 (and ls's own) may be there.
  spec.argv = {"/bin/sh", "-c", "echo hello; ls /proc/self/fd | tr '\\n' ' '; exit 3"};
  spec.output_file = out;
  auto c = ChildProcess::spawn(spec);
  REQUIRE(c);
  auto st = wait_exit(*c);
  REQUIRE(st);
  CHECK(describe_wait_status(*st) == "exit code 3");
  CHECK_FALSE(c->running());
  std::ifstream f(out);
  std::stringstream ss;
  ss << f.rdbuf();
  std::string text = ss.str();
  CHECK(text.rfind("hello\n", 0) == 0);
  // sh's fds: 0 1 2, plus ls's own directory fd (3); nothing inherited from the test.
  CHECK(text.find(" 10 ") == std::string::npos);
  ::unlink(out.c_str());
}

TEST_CASE("child process: exec failure is reported by spawn, stop kills") {
  ChildSpec bad;
  bad.argv = {"/nonexistent/kiln-program"};
  auto c = ChildProcess::spawn(bad);
  REQUIRE_FALSE(c);
  CHECK(c.error().code == Code::kNotFound);

  ChildSpec sleeper;
  sleeper.argv = {"/bin/sleep", "30"};
  auto s = ChildProcess::spawn(sleeper);
  REQUIRE(s);
  CHECK(s->running());
  CHECK_FALSE(s->poll());
  auto st = s->stop(std::chrono::seconds(2));
  REQUIRE(st);
  CHECK(describe_wait_status(*st).find("killed by signal 15") == 0);
  CHECK_FALSE(s->running());
}
