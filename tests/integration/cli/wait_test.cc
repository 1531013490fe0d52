// --wait over the event stream: a stream cut mid-wait is resumed from the
// last event seen (Last-Event-ID) and the wait still ends right; progress is
// bars on a terminal (checked under a pseudo-terminal made by `script`) and
// plain lines in a pipe.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "cli_lab.h"
#include "stream_proxy.h"
#include "tests/support/cli_run.h"
#include "tests/support/skip.h"
#include "tests/support/wait_until.h"
#include "tests/support/read_file.h"

using namespace kiln::testing;
using nlohmann::json;
using namespace std::chrono_literals;

using kiln::testing::read_file;

namespace {

const std::string kCreate = std::string("alloc create --name job --profile cpu-lab --kind baremetal --count 2 --image demo-os ") +
                            "--ssh-key '" + CliLab::kKey + "' --wait --timeout 90s";

}  // namespace

TEST_CASE("wait: the event stream dropped mid-wait is resumed from the last event and the wait ends ready") {
  CliLab lab({.nodes = 2, .quota = 2, .step_delay_ms = 2500});  // a deploy takes seconds
  StreamProxy proxy(lab.kilnd.port());
  const std::string proxied = "http://127.0.0.1:" + std::to_string(proxy.port());
  const std::string rc_file = lab.dir.path() + "/rc";
  const std::string err_file = lab.dir.path() + "/err";
  kiln::test::run_command("(" + lab.kiln_command(kCreate + " -o json", "", proxied) + " >/dev/null 2>" + err_file +
                          "; echo $? > " + rc_file + ") >/dev/null 2>&1 &");  // detached: popen returns at once
  // Cut the stream once it has carried events of this allocation: the CLI
  // prints "deploying" from its first GET too, before any event arrived, so
  // the proxy counts the events it relayed.
  REQUIRE(wait_until([&] { return read_file(err_file).find("deploying") != std::string::npos; }, 30s, 20ms));
  REQUIRE(wait_until([&] { return proxy.stream_events() > 0; }, 30s, 20ms));
  REQUIRE(proxy.drop_streams() == 1);
  REQUIRE(wait_until([&] { return !read_file(rc_file).empty(); }, 90s, 100ms));
  const std::string err = read_file(err_file);
  INFO(err);
  CHECK(read_file(rc_file) == "0\n");
  CHECK(err.find("event stream dropped: ") != std::string::npos);
  CHECK(err.find("resuming after event ") != std::string::npos);
  const auto requests = proxy.stream_requests();
  REQUIRE(requests.size() >= 2);
  CHECK(requests[0].find("Last-Event-ID") == std::string::npos);  // the first asked for events from now
  CHECK(requests[1].find("Last-Event-ID: ") != std::string::npos);  // the second resumed where the first stopped
  CHECK(lab.get("/v1/allocations/job")["state"] == "ready");
}

TEST_CASE("wait: plain lines in a pipe and progress bars redrawn in place on a terminal") {
  CliLab lab({.nodes = 2, .quota = 2, .step_delay_ms = 300});
  KilnRun piped = lab.kiln(kCreate);
  INFO(piped.err);
  REQUIRE(piped.status == 0);
  CHECK(piped.err.find('\x1b') == std::string::npos);
  CHECK(piped.err.find("] allocation job: ready\n") != std::string::npos);
  CHECK(piped.err.find("] job/a0: deploying") != std::string::npos);
  CHECK(piped.err.find("] job/a0: active\n") != std::string::npos);
  REQUIRE(lab.kiln("alloc release job --wait --timeout 60s").status == 0);
  lab.wait_nodes("available", 60);

  if (!kiln::test::have_tool("script")) KILN_SKIP("script (util-linux) is not installed: no pseudo-terminal to test under");
  const std::string log = lab.dir.path() + "/tty.log";
  // script gives the CLI a pseudo-terminal for stdin/stdout/stderr and copies what it wrote.
  std::string inner = lab.kiln_command(kCreate);
  for (std::size_t i = 0; (i = inner.find('\'', i)) != std::string::npos; i += 4) inner.replace(i, 1, "'\\''");
  auto r = kiln::test::run_command("script -qefc '" + inner + "' " + log + " >/dev/null 2>&1");
  const std::string tty = read_file(log);
  INFO(tty);
  CHECK(r.status == 0);
  CHECK(tty.find("\x1b[2K") != std::string::npos);  // lines erased and redrawn
  CHECK(tty.find("\x1b[3A") != std::string::npos);  // back up over the allocation row and two nodes
  CHECK(tty.find("[####################] active") != std::string::npos);
  CHECK(tty.find("] job/a0: deploying") == std::string::npos);  // no plain lines on a terminal
}
