// The agent protocol across kilnd instances sharing one database: two
// AgentBroker objects over two store handles of the same SQLite file (what
// two kilnd have; nothing shared in memory). The agent booted by one instance
// heartbeats to the other, gets the command the first one's workflow sent,
// and posts its result there; the waiting run_command on the first instance
// completes. Lookups, forget() and restarts are seen across instances too.
#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>

#include "controller/agent/agent_broker.h"
#include "tests/unit/agent_broker/broker_harness.h"

using namespace kiln;
using namespace std::chrono_literals;
using S = ProvisionState;
using nlohmann::json;
using namespace kiln::testing;

namespace {

Result<AgentHeartbeatReply> beat(Harness& h, AgentBroker& via, const std::string& session, const std::string& node) {
  return h.sync(via.heartbeat(session, node, "", std::nullopt));
}

Status post(Harness& h, AgentBroker& via, const std::string& session, const std::string& node,
            const std::string& id, const std::string& status, json result = json::object(),
            const std::string& error = "") {
  AgentResultPost p;
  p.node = node;
  p.command_id = id;
  p.status = status;
  p.result = std::move(result);
  p.error = error;
  return h.sync(via.post_result(session, p));
}

// Heartbeats through `via` until a command is handed out (or 200 tries).
std::optional<AgentCommand> await_command(Harness& h, AgentBroker& via, const std::string& session,
                                          const std::string& node) {
  for (int i = 0; i < 200; ++i) {
    auto hb = beat(h, via, session, node);
    REQUIRE(hb);
    if (hb->command) return hb->command;
    std::this_thread::sleep_for(5ms);
  }
  return std::nullopt;
}

size_t count(const std::vector<std::string>& v, const std::string& s) {
  return static_cast<size_t>(std::count(v.begin(), v.end(), s));
}

}  // namespace

TEST_CASE("an agent that heartbeats to another instance than the one that booted it gets its command and "
          "completes the first instance's wait") {
  Harness h;
  AgentBroker& one = h.broker();
  AgentBroker& two = h.second_broker();
  Node n = h.node("x", "52:54:00:00:05:01", S::kDeploying, "write_image");
  // Booted by instance one: its boot token, its lookup.
  auto r = h.lookup("52:54:00:00:05:01", h.mint(n), "ramdisk");
  REQUIRE(r);
  auto held = std::make_shared<std::atomic<bool>>(true);

  auto pending = h.spawn(one.run_command(n.id, "inspect", json{{"deep", true}}, flag_check(held)));
  // The agent's heartbeats now reach instance two.
  auto cmd = await_command(h, two, r->session, n.id);
  REQUIRE(cmd);
  CHECK(cmd->name == "inspect");
  CHECK(cmd->args == json{{"deep", true}});
  CHECK(two.last_heartbeat_ms(n.id).has_value());
  // Either instance hands out the same command until its result.
  auto via_one = beat(h, one, r->session, n.id);
  REQUIRE(via_one);
  REQUIRE(via_one->command);
  CHECK(via_one->command->id == cmd->id);
  CHECK(count(h.event_types(n.id), "agent.command_sent") == 1);  // the first delivery only

  // A stale id is 409 on instance two as well; the right one is taken there.
  Status stale = post(h, two, r->session, n.id, "some-other-id", "ok");
  REQUIRE_FALSE(stale);
  CHECK(stale.error().code == Code::kConflict);
  CHECK(pending.wait_for(50ms) == std::future_status::timeout);
  REQUIRE(post(h, two, r->session, n.id, cmd->id, "ok", json{{"cpu", 8}}));
  // The wait on instance one sees it (within a poll).
  REQUIRE(pending.wait_for(2s) == std::future_status::ready);
  auto result = pending.get();
  REQUIRE(result);
  CHECK((*result)["cpu"] == 8);
  // Answered once: a repeat on instance one is stale, nothing is handed out.
  Status twice = post(h, one, r->session, n.id, cmd->id, "ok");
  REQUIRE_FALSE(twice);
  CHECK(twice.error().code == Code::kConflict);
  CHECK_FALSE(beat(h, two, r->session, n.id)->command);
  CHECK_FALSE(beat(h, one, r->session, n.id)->command);
  CHECK(count(h.event_types(n.id), "agent.result") == 1);

  // An error posted to instance one fails a command instance two sent.
  auto failing = h.spawn(two.run_command(n.id, "write_image", json::object(), flag_check(held)));
  auto wi = await_command(h, one, r->session, n.id);
  REQUIRE(wi);
  CHECK(wi->name == "write_image");
  REQUIRE(post(h, one, r->session, n.id, wi->id, "error", json::object(), "sha256 mismatch: expected aa, got bb"));
  REQUIRE(failing.wait_for(2s) == std::future_status::ready);
  auto failed = failing.get();
  REQUIRE_FALSE(failed);
  CHECK(failed.error().code == Code::kDriverError);
  CHECK(failed.error().message == "write_image failed: sha256 mismatch: expected aa, got bb");
}

TEST_CASE("instances see each other's lookups, forget() and replaced commands") {
  Harness h;
  AgentBroker& one = h.broker();
  AgentBroker& two = h.second_broker();
  Node n = h.node("y", "52:54:00:00:05:02", S::kDeploying, "wait_agent");
  auto held = std::make_shared<std::atomic<bool>>(true);

  // Instance one waits for the ramdisk; the agent looks up through instance two.
  auto waiting = h.spawn(one.wait_for_agent(n.id, AgentPhase::kRamdisk, flag_check(held)));
  CHECK(waiting.wait_for(100ms) == std::future_status::timeout);
  Result<std::string> token = h.sync(two.boot_token(n));
  REQUIRE(token);
  CHECK(*token == h.mint(n));  // one boot attempt, one token, whichever instance serves the script
  AgentLookup l;
  l.macs = {"52:54:00:00:05:02"};
  l.token = *token;
  l.phase = "ramdisk";
  l.version = "test";
  auto r = h.sync(two.lookup(l));
  REQUIRE(r);
  REQUIRE(waiting.wait_for(2s) == std::future_status::ready);
  CHECK(waiting.get());

  // A command instance two replaces ends instance one's wait for its own.
  h.move(n.id, S::kDeploying, "write_image");
  auto first = h.spawn(one.run_command(n.id, "inspect", json::object(), flag_check(held)));
  auto c1 = await_command(h, two, r->session, n.id);
  REQUIRE(c1);
  auto second = h.spawn(two.run_command(n.id, "wipe", json::object(), flag_check(held)));
  REQUIRE(first.wait_for(2s) == std::future_status::ready);
  auto dropped = first.get();
  REQUIRE_FALSE(dropped);
  CHECK(dropped.error().code == Code::kConflict);
  // The old command's result is stale now; the new one is handed out.
  auto c2 = await_command(h, one, r->session, n.id);
  REQUIRE(c2);
  CHECK(c2->name == "wipe");
  CHECK(post(h, one, r->session, n.id, c1->id, "ok").error().code == Code::kConflict);

  // forget() on instance one (a new boot attempt) drops instance two's command.
  REQUIRE(h.sync(one.forget(n.id)));
  REQUIRE(second.wait_for(2s) == std::future_status::ready);
  CHECK(second.get().error().code == Code::kConflict);
  CHECK(h.column("SELECT count(*) FROM agent_commands") == std::vector<std::string>{"0"});
}

TEST_CASE("after a restart the resumed workflow's new command replaces the stored one, whose result is stale") {
  Harness h;
  Node n = h.node("z", "52:54:00:00:05:03", S::kDeploying, "write_image");
  auto r = h.lookup("52:54:00:00:05:03", h.mint(n), "ramdisk");
  REQUIRE(r);
  auto held = std::make_shared<std::atomic<bool>>(true);
  auto before = h.spawn(h.broker().run_command(n.id, "write_image", json{{"try", 1}}, flag_check(held)));
  auto old = await_command(h, h.broker(), r->session, n.id);
  REQUIRE(old);
  // kilnd stops: the wait ends, the stored command stays for now.
  h.broker().shutdown();
  REQUIRE(before.wait_for(2s) == std::future_status::ready);
  CHECK(before.get().error().code == Code::kUnavailable);
  CHECK(h.column("SELECT command_id FROM agent_commands") == std::vector<std::string>{old->id});

  // The restarted kilnd resumes the step and sends the command again.
  h.restart_broker();
  auto after = h.spawn(h.broker().run_command(n.id, "write_image", json{{"try", 2}}, flag_check(held)));
  std::optional<AgentCommand> fresh;
  for (int i = 0; i < 200 && (!fresh || fresh->id == old->id); ++i) {
    fresh = beat(h, h.broker(), r->session, n.id)->command;
    std::this_thread::sleep_for(5ms);
  }
  REQUIRE(fresh);
  REQUIRE(fresh->id != old->id);
  CHECK(fresh->args == json{{"try", 2}});
  CHECK(post(h, h.broker(), r->session, n.id, old->id, "ok").error().code == Code::kConflict);
  REQUIRE(post(h, h.broker(), r->session, n.id, fresh->id, "ok", json{{"written", true}}));
  REQUIRE(after.wait_for(2s) == std::future_status::ready);
  auto done = after.get();
  REQUIRE(done);
  CHECK((*done)["written"] == true);
}
