// The agent loop against a scripted fake kilnd: lookup, heartbeats, commands
// run once on a worker while heartbeats report busy, results posted (409
// dropped, 5xx retried), 401 sending the os-phase agent back to lookup and
// the ramdisk agent into a slow retry; the token and session never logged.
#include <catch2/catch.hpp>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "agent/runtime/agent_config.h"
#include "agent/runtime/agent_loop.h"
#include "agent/runtime/commands.h"
#include "tests/unit/agent_checks/temp_tree.h"
#include "tests/unit/agent_deploy/scripted_http_server.h"
#include "tests/support/wait_until.h"

using nlohmann::json;
using kiln::test::ScriptedRequest;
using kiln::test::ScriptedResponse;
using kiln::test::TempTree;

namespace {

class CapturingSink : public kiln::LogSink {
 public:
  void write(std::string_view line) override {
    std::lock_guard<std::mutex> lock(mu_);
    text_.append(line);
  }
  std::string text() {
    std::lock_guard<std::mutex> lock(mu_);
    return text_;
  }

 private:
  std::mutex mu_;
  std::string text_;
};

// Runs commands by name from a table; `gate` lets a test hold a command open.
class ScriptedRunner : public kiln::agent::CommandRunner {
 public:
  kiln::agent::CommandOutcome run(const std::string& name, const json& args, const std::string& session) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      calls.push_back(name);
      sessions.push_back(session);
      last_args = args;
    }
    if (hold) {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return released; });
    }
    kiln::agent::CommandOutcome o;
    if (name == "fail") {
      o.ok = false;
      o.error = "it broke";
    } else {
      o.result = {{"ran", name}};
    }
    if (name == "reboot") o.after_post = [this] { rebooted = true; };
    return o;
  }
  void release() {
    std::lock_guard<std::mutex> lock(mu_);
    released = true;
    cv_.notify_all();
  }
  std::vector<std::string> call_names() {
    std::lock_guard<std::mutex> lock(mu_);
    return calls;
  }

  std::atomic<bool> hold{false};
  std::atomic<bool> rebooted{false};
  std::vector<std::string> sessions;
  json last_args;

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool released = false;
  std::vector<std::string> calls;
};

// A fake kilnd. Each session issued is "session-N". The test scripts the
// command to hand out and the status codes to answer with.
struct FakeKilnd {
  std::mutex mu;
  json command = nullptr;           // handed out until a result for its id arrives
  std::vector<int> heartbeat_codes;  // consumed in order, then 200
  std::vector<int> result_codes;     // consumed in order, then 204
  std::vector<int> lookup_codes;     // consumed in order, then 200
  int sessions = 0;
  std::vector<json> results;         // accepted results
  std::vector<json> heartbeats;

  ScriptedResponse handle(const ScriptedRequest& req) {
    std::lock_guard<std::mutex> lock(mu);
    ScriptedResponse r;
    r.headers.emplace_back("Content-Type", "application/json");
    auto next = [](std::vector<int>& codes, int fallback) {
      if (codes.empty()) return fallback;
      const int c = codes.front();
      codes.erase(codes.begin());
      return c;
    };
    const json body = json::parse(req.body, nullptr, false);
    if (req.target == "/v1/agent/lookup") {
      r.status = next(lookup_codes, 200);
      if (r.status == 200)
        r.body = json{{"node", {{"id", "node-uuid-1"}, {"name", "n1"}, {"provision_state", "inspecting"}, {"provision_step", ""}}},
                      {"session", "session-" + std::to_string(++sessions)},
                      {"heartbeat_interval_s", 0.02}}.dump();
      else
        r.body = json{{"title", "nope"}, {"detail", "token already used"}}.dump();
      return r;
    }
    const std::string want = "Bearer session-" + std::to_string(sessions);
    if (req.target == "/v1/agent/heartbeat") {
      heartbeats.push_back(body);
      r.status = req.header("Authorization") == want ? next(heartbeat_codes, 200) : 401;
      if (r.status == 200) r.body = json{{"command", command}, {"heartbeat_interval_s", 0.02}}.dump();
      return r;
    }
    if (req.target == "/v1/agent/results") {
      r.status = req.header("Authorization") == want ? next(result_codes, 204) : 401;
      if (r.status == 204) {
        results.push_back(body);
        if (command.is_object() && body["command_id"] == command["id"]) command = nullptr;
      }
      return r;
    }
    r.status = 404;
    return r;
  }
  template <typename F>
  auto locked(F f) {
    std::lock_guard<std::mutex> lock(mu);
    return f();
  }
};

// Waits up to 10 s for `pred`.
template <typename P>
bool eventually(P pred) {
  return kiln::testing::wait_until(pred, std::chrono::seconds(10));
}

void write_nic(const TempTree& t, const std::string& name, const std::string& mac) {
  t.write("sys/class/net/" + name + "/address", mac + "\n");
  t.mkdir("sys/class/net/" + name + "/device");
}

kiln::agent::AgentConfig test_config(const TempTree& t, const std::string& api) {
  kiln::agent::AgentConfig c;
  c.api_url = api + "/";
  c.root = t.root();
  c.phase = kiln::agent::AgentPhase::kOs;
  c.version = "test";
  c.backoff_initial = std::chrono::milliseconds(10);
  c.backoff_max = std::chrono::milliseconds(40);
  c.unauthorized_retry = std::chrono::milliseconds(50);
  return c;
}

// Runs the loop on a thread for the life of the object.
struct Running {
  kiln::agent::AgentLoop loop;
  std::thread thread;
  Running(kiln::agent::AgentConfig c, kiln::agent::CommandRunner& r, kiln::Logger log)
      : loop(std::move(c), r, std::move(log)), thread([this] { loop.run(); }) {}
  ~Running() {
    loop.stop();
    thread.join();
  }
};

}  // namespace

TEST_CASE("lookup, heartbeat hands out inspect, the result is posted once", "[agent_loop]") {
  TempTree t;
  write_nic(t, "eno1", "3C:EC:EF:00:00:03");
  write_nic(t, "eno2", "3c:ec:ef:00:00:04");
  t.write("sys/class/net/virbr0/address", "52:54:00:aa:bb:cc\n");  // virtual: no device
  FakeKilnd kilnd;
  kilnd.command = {{"id", "cmd-1"}, {"name", "inspect"}, {"args", json::object()}};
  kiln::test::ScriptedHttpServer server([&](const ScriptedRequest& r) { return kilnd.handle(r); });
  ScriptedRunner runner;
  auto sink = std::make_shared<CapturingSink>();
  {
    Running agent(test_config(t, server.url()), runner, kiln::Logger(sink, kiln::LogLevel::kDebug));
    REQUIRE(eventually([&] { return kilnd.locked([&] { return kilnd.results.size() == 1 && kilnd.heartbeats.size() >= 4; }); }));
  }
  CHECK(runner.call_names() == std::vector<std::string>{"inspect"});
  CHECK(runner.sessions[0] == "session-1");
  const auto reqs = server.requests();
  REQUIRE(!reqs.empty());
  CHECK(reqs[0].target == "/v1/agent/lookup");
  const json lookup = json::parse(reqs[0].body);
  CHECK(lookup["macs"] == json({"3c:ec:ef:00:00:03", "3c:ec:ef:00:00:04"}));
  CHECK(lookup["phase"] == "os");
  CHECK(lookup["version"] == "test");
  CHECK_FALSE(lookup.contains("token"));
  const json& result = kilnd.results[0];
  CHECK(result["node"] == "node-uuid-1");
  CHECK(result["command_id"] == "cmd-1");
  CHECK(result["status"] == "ok");
  CHECK(result["result"]["ran"] == "inspect");
  CHECK(kilnd.heartbeats[0]["node"] == "node-uuid-1");
  // Exactly one lookup: the session stayed good.
  int lookups = 0;
  for (const auto& r : reqs) lookups += r.target == "/v1/agent/lookup";
  CHECK(lookups == 1);
  CHECK(sink->text().find("session-1") == std::string::npos);
}

TEST_CASE("heartbeats continue and report busy while a command runs", "[agent_loop]") {
  TempTree t;
  write_nic(t, "eth0", "52:54:00:00:00:01");
  FakeKilnd kilnd;
  kilnd.command = {{"id", "cmd-w"}, {"name", "write_image"}, {"args", {{"url", "http://x/y"}}}};
  kiln::test::ScriptedHttpServer server([&](const ScriptedRequest& r) { return kilnd.handle(r); });
  ScriptedRunner runner;
  runner.hold = true;
  Running agent(test_config(t, server.url()), runner, kiln::Logger(kiln::LogLevel::kOff));
  REQUIRE(eventually([&] {
    return kilnd.locked([&] {
      int busy = 0;
      for (const auto& h : kilnd.heartbeats) busy += h["busy"] == "cmd-w";
      return busy >= 3;
    });
  }));
  CHECK(runner.call_names().size() == 1);  // handed out on every heartbeat, run once
  CHECK(kilnd.locked([&] { return kilnd.results.empty(); }));
  runner.release();
  REQUIRE(eventually([&] { return kilnd.locked([&] { return kilnd.results.size() == 1; }); }));
  CHECK(runner.last_args["url"] == "http://x/y");
  REQUIRE(eventually([&] { return kilnd.locked([&] { return kilnd.heartbeats.back()["busy"] == ""; }); }));
}

TEST_CASE("a 409 on the result drops it, a 503 is retried", "[agent_loop]") {
  TempTree t;
  write_nic(t, "eth0", "52:54:00:00:00:01");
  ScriptedRunner runner;
  SECTION("409: dropped, never re-posted, the command is not run again") {
    FakeKilnd kilnd;
    kilnd.command = {{"id", "cmd-stale"}, {"name", "reboot"}, {"args", json::object()}};
    kilnd.result_codes = {409};
    kiln::test::ScriptedHttpServer server([&](const ScriptedRequest& r) { return kilnd.handle(r); });
    auto sink = std::make_shared<CapturingSink>();
    {
      Running agent(test_config(t, server.url()), runner, kiln::Logger(sink, kiln::LogLevel::kInfo));
      REQUIRE(eventually([&] { return sink->text().find("result dropped") != std::string::npos; }));
      // Heartbeats go on (the fake still hands out the command) without a re-run or re-post.
      const std::size_t seen = kilnd.locked([&] { return kilnd.heartbeats.size(); });
      REQUIRE(eventually([&] { return kilnd.locked([&] { return kilnd.heartbeats.size() >= seen + 5; }); }));
    }
    int posts = 0;
    for (const auto& r : server.requests()) posts += r.target == "/v1/agent/results";
    CHECK(posts == 1);
    CHECK(runner.call_names().size() == 1);
    CHECK_FALSE(runner.rebooted);  // a dropped reboot result does not reboot
  }
  SECTION("503 then 204: posted on the retry, then after_post runs") {
    FakeKilnd kilnd;
    kilnd.command = {{"id", "cmd-r"}, {"name", "reboot"}, {"args", json::object()}};
    kilnd.result_codes = {503, 503};
    kiln::test::ScriptedHttpServer server([&](const ScriptedRequest& r) { return kilnd.handle(r); });
    Running agent(test_config(t, server.url()), runner, kiln::Logger(kiln::LogLevel::kOff));
    REQUIRE(eventually([&] { return runner.rebooted.load(); }));
    CHECK(kilnd.locked([&] { return kilnd.results.size(); }) == 1);
    int posts = 0;
    for (const auto& r : server.requests()) posts += r.target == "/v1/agent/results";
    CHECK(posts == 3);
  }
}

TEST_CASE("a failed command is posted as status error with its message", "[agent_loop]") {
  TempTree t;
  write_nic(t, "eth0", "52:54:00:00:00:01");
  FakeKilnd kilnd;
  kilnd.command = {{"id", "cmd-f"}, {"name", "fail"}, {"args", json::object()}};
  kiln::test::ScriptedHttpServer server([&](const ScriptedRequest& r) { return kilnd.handle(r); });
  ScriptedRunner runner;
  Running agent(test_config(t, server.url()), runner, kiln::Logger(kiln::LogLevel::kOff));
  REQUIRE(eventually([&] { return kilnd.locked([&] { return kilnd.results.size() == 1; }); }));
  CHECK(kilnd.results[0]["status"] == "error");
  CHECK(kilnd.results[0]["error"] == "it broke");
}

TEST_CASE("401 on heartbeat in the os phase goes back to lookup", "[agent_loop]") {
  TempTree t;
  write_nic(t, "eth0", "52:54:00:00:00:01");
  FakeKilnd kilnd;
  kilnd.heartbeat_codes = {200, 401};
  kiln::test::ScriptedHttpServer server([&](const ScriptedRequest& r) { return kilnd.handle(r); });
  ScriptedRunner runner;
  Running agent(test_config(t, server.url()), runner, kiln::Logger(kiln::LogLevel::kOff));
  REQUIRE(eventually([&] { return kilnd.locked([&] { return kilnd.sessions == 2 && kilnd.heartbeats.size() >= 4; }); }));
  // The heartbeats after the second lookup carry the new session (the fake checks it).
  const auto reqs = server.requests();
  CHECK(reqs.back().header("Authorization") == "Bearer session-2");
}

TEST_CASE("ramdisk phase: token sent once, after a 401 the spent token is retried slowly and never logged",
          "[agent_loop]") {
  TempTree t;
  write_nic(t, "eth0", "52:54:00:00:00:01");
  FakeKilnd kilnd;
  kilnd.heartbeat_codes = {401};
  kilnd.lookup_codes = {200, 401, 401, 401, 401, 401, 401, 401, 401, 401};
  kiln::test::ScriptedHttpServer server([&](const ScriptedRequest& r) { return kilnd.handle(r); });
  ScriptedRunner runner;
  auto sink = std::make_shared<CapturingSink>();
  auto c = test_config(t, server.url());
  c.phase = kiln::agent::AgentPhase::kRamdisk;
  c.boot_token = "one-time-secret-token";
  c.node_id = "node-uuid-1";
  c.unauthorized_retry = std::chrono::milliseconds(150);
  const auto started = std::chrono::steady_clock::now();
  {
    Running agent(c, runner, kiln::Logger(sink, kiln::LogLevel::kDebug));
    REQUIRE(eventually([&] {
      int lookups = 0;
      for (const auto& r : server.requests()) lookups += r.target == "/v1/agent/lookup";
      return lookups >= 4;
    }));
  }
  const auto elapsed = std::chrono::steady_clock::now() - started;
  CHECK(elapsed >= std::chrono::milliseconds(300));  // two slow waits at least between the 401s
  const auto reqs = server.requests();
  const json first = json::parse(reqs[0].body);
  CHECK(first["token"] == "one-time-secret-token");
  CHECK(first["phase"] == "ramdisk");
  CHECK(first["node"] == "node-uuid-1");
  const std::string logs = sink->text();
  CHECK(logs.find("boot token rejected") != std::string::npos);
  CHECK(logs.find("one-time-secret-token") == std::string::npos);
  CHECK(logs.find("session-1") == std::string::npos);
}

TEST_CASE("kilnd down: the agent keeps retrying with backoff and recovers", "[agent_loop]") {
  TempTree t;
  write_nic(t, "eth0", "52:54:00:00:00:01");
  FakeKilnd kilnd;
  kilnd.lookup_codes = {503, 503, 503};
  kiln::test::ScriptedHttpServer server([&](const ScriptedRequest& r) { return kilnd.handle(r); });
  ScriptedRunner runner;
  auto c = test_config(t, server.url());
  c.phase = kiln::agent::AgentPhase::kRamdisk;
  c.boot_token = "tok";
  Running agent(c, runner, kiln::Logger(kiln::LogLevel::kOff));
  REQUIRE(eventually([&] { return kilnd.locked([&] { return kilnd.heartbeats.size() >= 2; }); }));
}

TEST_CASE("no kilnd listening at all: the loop retries and stops promptly on stop()", "[agent_loop]") {
  TempTree t;
  write_nic(t, "eth0", "52:54:00:00:00:01");
  ScriptedRunner runner;
  int port;
  {
    kiln::test::ScriptedHttpServer gone([](const ScriptedRequest&) { return ScriptedResponse{}; });
    port = gone.port();
  }
  auto sink = std::make_shared<CapturingSink>();
  auto c = test_config(t, "http://127.0.0.1:" + std::to_string(port));
  const auto t0 = std::chrono::steady_clock::now();
  {
    Running agent(c, runner, kiln::Logger(sink, kiln::LogLevel::kInfo));
    REQUIRE(eventually([&] { return sink->text().find("request to kilnd failed") != std::string::npos; }));
  }
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(5));
}

TEST_CASE("kernel command line: ramdisk arguments, defaults and missing values", "[agent_config]") {
  kiln::agent::AgentConfig c;
  REQUIRE(kiln::agent::apply_kernel_cmdline(
      "BOOT_IMAGE=/vmlinuz console=ttyS0,115200 kiln.api=http://10.77.0.1:8080 kiln.node=abc-123 "
      "kiln.token=T0K kiln.phase=ramdisk quiet\n",
      &c));
  CHECK(c.api_url == "http://10.77.0.1:8080");
  CHECK(c.node_id == "abc-123");
  CHECK(c.boot_token == "T0K");
  CHECK(c.phase == kiln::agent::AgentPhase::kRamdisk);

  kiln::agent::AgentConfig missing_token;
  auto s = kiln::agent::apply_kernel_cmdline("kiln.api=http://x kiln.phase=ramdisk", &missing_token);
  REQUIRE_FALSE(s);
  CHECK(s.error().message.find("kiln.token") != std::string::npos);
  kiln::agent::AgentConfig missing_api;
  CHECK_FALSE(kiln::agent::apply_kernel_cmdline("kiln.token=x", &missing_api));
  kiln::agent::AgentConfig bad_phase;
  CHECK_FALSE(kiln::agent::apply_kernel_cmdline("kiln.api=http://x kiln.phase=maybe", &bad_phase));
}

TEST_CASE("os phase: once served, a 409 on lookup (node handed over) stops the agent", "[agent_loop]") {
  TempTree t;
  write_nic(t, "eth0", "52:54:00:00:00:01");
  FakeKilnd kilnd;
  kilnd.heartbeat_codes = {200, 401};
  kilnd.lookup_codes = {200, 409};
  kiln::test::ScriptedHttpServer server([&](const ScriptedRequest& r) { return kilnd.handle(r); });
  ScriptedRunner runner;
  kiln::agent::AgentLoop loop(test_config(t, server.url()), runner, kiln::Logger(kiln::LogLevel::kOff));
  std::atomic<bool> returned{false};
  std::thread th([&] {
    loop.run();
    returned = true;
  });
  const bool stopped = eventually([&] { return returned.load(); });
  if (!stopped) loop.stop();
  th.join();
  CHECK(stopped);  // run() returned by itself, without stop()
  int lookups = 0;
  for (const auto& r : server.requests()) lookups += r.target == "/v1/agent/lookup";
  CHECK(lookups == 2);
}

TEST_CASE("os phase: a 409 before any session is retried (the OS may boot before kilnd waits for it)",
          "[agent_loop]") {
  TempTree t;
  write_nic(t, "eth0", "52:54:00:00:00:01");
  FakeKilnd kilnd;
  kilnd.lookup_codes = {409, 409};
  kiln::test::ScriptedHttpServer server([&](const ScriptedRequest& r) { return kilnd.handle(r); });
  ScriptedRunner runner;
  Running agent(test_config(t, server.url()), runner, kiln::Logger(kiln::LogLevel::kOff));
  REQUIRE(eventually([&] { return kilnd.locked([&] { return kilnd.sessions == 1; }); }));
}
