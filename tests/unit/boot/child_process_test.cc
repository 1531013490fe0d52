#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

// common/child_process.h: the one fork/exec helper of kilnd, the tests and the benches.
#include "common/child_process.h"
#include "common/fd_limit.h"

using namespace kiln;

TEST_CASE("child process: output to a file, exit status, no leaked descriptors") {
  const std::string out = "/tmp/kiln-child-" + std::to_string(::getpid()) + ".log";
  ::unlink(out.c_str());
  ChildSpec spec;
  // Lists its open descriptors: only 0, 1, 2 (and ls's own) may be there.
  spec.argv = {"/bin/sh", "-c", "echo hello; ls /proc/self/fd | tr '\\n' ' '; exit 3"};
  spec.output_file = out;
  auto c = ChildProcess::spawn(spec);
  REQUIRE(c);
  auto st = c->wait(std::chrono::seconds(5));
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

TEST_CASE("child process: stderr apart, announced lines waited for, a program that ends early is reported") {
  const std::string dir = "/tmp/kiln-child-lines-" + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  {
    std::ofstream old(dir + "/out");
    old << "listening on old:1\n";  // an earlier run's line: skipped with `from`
  }
  const auto from = std::filesystem::file_size(dir + "/out");
  ChildSpec spec;
  spec.argv = {"/bin/sh", "-c", "echo to-err >&2; sleep 0.2; echo 'listening on 127.0.0.1:4242'; echo 'ready: yes'; sleep 30"};
  spec.output_file = dir + "/out";
  spec.error_file = dir + "/err";
  auto c = ChildProcess::spawn(spec);
  REQUIRE(c);
  auto lines = wait_for_lines(*c, spec.output_file, {"listening on ", "ready: "}, std::chrono::seconds(10), from);
  REQUIRE(lines);
  CHECK((*lines)["listening on "] == "127.0.0.1:4242");
  CHECK((*lines)["ready: "] == "yes");
  auto timed_out = wait_for_lines(*c, spec.output_file, {"never "}, std::chrono::milliseconds(100), from);
  REQUIRE_FALSE(timed_out);
  CHECK(timed_out.error().code == Code::kTimeout);
  CHECK(exit_code(*c->stop(std::chrono::seconds(2))) == 128 + SIGTERM);
  std::ifstream err(dir + "/err");
  std::string e;
  std::getline(err, e);
  CHECK(e == "to-err");

  ChildSpec quitter;
  quitter.argv = {"/bin/sh", "-c", "echo bye; exit 4"};
  quitter.output_file = dir + "/quit";
  auto q = ChildProcess::spawn(quitter);
  REQUIRE(q);
  auto none = wait_for_lines(*q, quitter.output_file, {"listening on "}, std::chrono::seconds(10));
  REQUIRE_FALSE(none);
  CHECK(none.error().code == Code::kUnavailable);
  CHECK_THAT(none.error().message, Catch::Contains("exit code 4"));
  CHECK_THAT(none.error().message, Catch::Contains("bye"));
  std::filesystem::remove_all(dir);
}

TEST_CASE("run_program captures stdout and stderr apart and kills a program past its time") {
  auto r = run_program({"/bin/sh", "-c", "echo out; echo err >&2; exit 2"}, std::chrono::seconds(10));
  REQUIRE(r);
  CHECK(r->out == "out\n");
  CHECK(r->err == "err\n");
  CHECK(exit_code(r->status) == 2);
  auto slow = run_program({"/bin/sleep", "30"}, std::chrono::milliseconds(200));
  REQUIRE_FALSE(slow);
  CHECK(slow.error().code == Code::kTimeout);
  auto missing = run_program({"/nonexistent/kiln-program"}, std::chrono::seconds(1));
  REQUIRE_FALSE(missing);
  CHECK(missing.error().code == Code::kNotFound);
}

TEST_CASE("child process: kilnd's raised descriptor limit stays its own, and a child gets the original soft limit back") {
  rlimit saved{};
  REQUIRE(::getrlimit(RLIMIT_NOFILE, &saved) == 0);
  REQUIRE(saved.rlim_max > 256);
  // Lowering the soft limit is always allowed: start where a service manager would.
  rlimit low = saved;
  low.rlim_cur = 256;
  REQUIRE(::setrlimit(RLIMIT_NOFILE, &low) == 0);

  const std::size_t raised = raise_fd_limit();
  CHECK(raised > 256);
  CHECK(fd_limit() == raised);
  auto child = run_program({"/bin/sh", "-c", "ulimit -Sn"}, std::chrono::seconds(10));
  REQUIRE(child);
  CHECK(child->out == "256\n");

  REQUIRE(::setrlimit(RLIMIT_NOFILE, &saved) == 0);
}
