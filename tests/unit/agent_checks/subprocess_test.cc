// BackgroundProcess: what a long-running child printed so far, whether it is
// still running, and stdout/stderr kept apart on request.
#include <catch2/catch.hpp>

#include <chrono>
#include <thread>

#include "agent/validate/checks/subprocess.h"
#include "tests/unit/agent_checks/temp_tree.h"

using kiln::agent::BackgroundOutput;
using kiln::agent::BackgroundProcess;
using kiln::agent::ProcessSpec;
using namespace std::chrono_literals;

TEST_CASE("a background child's first line can be read while it keeps running", "[subprocess]") {
  kiln::test::TempTree t;
  ProcessSpec spec;
  // Prints a line, then waits for the test to create `go`.
  spec.argv = {"/bin/sh", "-c",
               "echo ready; echo noise >&2; while [ ! -e '" + t.path("go") + "' ]; do sleep 0.01; done; echo done"};
  auto p = BackgroundProcess::start(spec, BackgroundOutput::kSeparate);
  REQUIRE(p);
  BackgroundProcess& proc = **p;
  const auto give_up = std::chrono::steady_clock::now() + 5s;
  while (proc.output_so_far() != "ready\n" && std::chrono::steady_clock::now() < give_up)
    std::this_thread::sleep_for(5ms);
  CHECK(proc.output_so_far() == "ready\n");  // stderr is not in it
  CHECK(proc.running());
  t.write("go", "");
  const auto out = proc.finish(5s);
  CHECK(out.exit_code == 0);
  CHECK(out.out == "ready\ndone\n");
  CHECK(out.err == "noise\n");
  CHECK_FALSE(proc.running());
}

TEST_CASE("a background child that already exited is reaped once and reports its status", "[subprocess]") {
  ProcessSpec spec;
  spec.argv = {"/bin/sh", "-c", "echo out; echo err >&2; exit 3"};
  auto p = BackgroundProcess::start(spec);  // combined output, as before
  REQUIRE(p);
  const auto give_up = std::chrono::steady_clock::now() + 5s;
  while ((*p)->running() && std::chrono::steady_clock::now() < give_up) std::this_thread::sleep_for(5ms);
  CHECK_FALSE((*p)->running());
  const auto out = (*p)->finish(0ms);
  CHECK(out.exit_code == 3);
  CHECK(out.out == "out\nerr\n");
  CHECK(out.err.empty());
}

TEST_CASE("finish kills a background child that overstays", "[subprocess]") {
  ProcessSpec spec;
  spec.argv = {"/bin/sh", "-c", "echo started; exec sleep 30"};
  auto p = BackgroundProcess::start(spec);
  REQUIRE(p);
  const auto t0 = std::chrono::steady_clock::now();
  const auto out = (*p)->finish(200ms);
  CHECK(std::chrono::steady_clock::now() - t0 < 5s);
  CHECK(out.signal == 9);
}
