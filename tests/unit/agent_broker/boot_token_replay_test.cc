// Replaying a ramdisk-phase boot token (docs/agent-protocol.md, "Trust"):
// the token is the credential of one boot attempt and a lookup consumes it.
// Each case is an attack: the same token again (in turn and all at once),
// a token of an attempt the node has moved on from, a token with another
// node's MACs, a boot token where the os phase or a session wants something
// else, and a token across a kilnd restart or on another instance. A broker
// that only checked the token without consuming it, consumed it outside the
// session's transaction, or matched it to a node by anything but its own
// MACs fails one of them.
#include <catch2/catch.hpp>

#include <future>
#include <vector>

#include "common/crypto.h"
#include "tests/unit/agent_broker/broker_harness.h"

using namespace kiln;
using namespace kiln::testing;
using S = ProvisionState;

namespace {

Result<AgentLookupReply> lookup_with(Harness& h, AgentBroker& broker, std::vector<std::string> macs,
                                     const std::string& token, const std::string& phase = "ramdisk",
                                     const std::string& node = "") {
  AgentLookup l;
  l.macs = std::move(macs);
  l.node = node;
  l.token = token;
  l.phase = phase;
  l.version = "replay";
  return h.sync(broker.lookup(l));
}

void check_unauthenticated(const Result<AgentLookupReply>& r) {
  REQUIRE_FALSE(r);
  CHECK(r.error().code == Code::kUnauthenticated);
}

}  // namespace

TEST_CASE("boot token replay: a used token opens no second session and the first one stays live") {
  Harness h;
  Node n = h.node("r1", "52:54:00:00:10:01", S::kInspecting, "wait_agent");
  const std::string token = h.mint(n);
  auto first = h.lookup("52:54:00:00:10:01", token, "ramdisk");
  REQUIRE(first);

  // The same token again, as it was, with the node named, and after the
  // script was fetched again (which mints the next one: the replay is still
  // the used one).
  check_unauthenticated(h.lookup("52:54:00:00:10:01", token, "ramdisk"));
  check_unauthenticated(lookup_with(h, h.broker(), {"52:54:00:00:10:01"}, token, "ramdisk", n.id));
  const std::string next = h.mint(n);
  CHECK(next != token);
  check_unauthenticated(h.lookup("52:54:00:00:10:01", token, "ramdisk"));

  // A refused replay takes nothing away: the first session is the node's
  // only one and still works.
  CHECK(h.column("SELECT token_hash FROM agent_sessions") == std::vector<std::string>{sha256_hex(first->session)});
  CHECK(h.heartbeat(first->session, n.id));
}

TEST_CASE("boot token replay: of lookups racing with one token, exactly one gets a session") {
  Harness h;
  Node n = h.node("race", "52:54:00:00:10:02", S::kCleaning, "wait_agent");
  const std::string token = h.mint(n);
  constexpr int kRacers = 12;
  std::vector<std::future<Result<AgentLookupReply>>> racing;
  for (int i = 0; i < kRacers; ++i) {
    AgentLookup l;
    l.macs = {"52:54:00:00:10:02"};
    l.token = token;
    l.phase = "ramdisk";
    // Half through a second instance on the same database.
    AgentBroker& b = i % 2 == 0 ? h.broker() : h.second_broker();
    racing.push_back(h.spawn(b.lookup(l)));
  }
  int won = 0;
  std::string session;
  for (auto& f : racing) {
    Result<AgentLookupReply> r = f.get();
    if (r) {
      ++won;
      session = r->session;
    } else {
      CHECK(r.error().code == Code::kUnauthenticated);
    }
  }
  CHECK(won == 1);
  CHECK(h.column("SELECT token_hash FROM agent_sessions") == std::vector<std::string>{sha256_hex(session)});
  CHECK(h.column("SELECT count(*) FROM agent_boot_tokens") == std::vector<std::string>{"0"});
}

TEST_CASE("boot token replay: a token of an attempt the node moved on from is worthless") {
  Harness h;
  const std::string mac = "52:54:00:00:10:03";
  Node n = h.node("moved", mac, S::kDeploying, "wait_agent");
  // Attempt 1 (a deploy): used.
  const std::string used = h.mint(n);
  REQUIRE(h.lookup(mac, used, "ramdisk"));
  // Attempt 1's script fetched again after the lookup (the node rebooted in
  // the ramdisk): a token nobody used yet.
  const std::string unused = h.mint(n);

  // The node moves on: each next attempt starts with boot_ramdisk, which
  // forgets the node's agent state (controller/conductor/workflow.cc).
  struct Next {
    S state;
    const char* step;
    const char* why;
  };
  for (Next next : {Next{S::kDeploying, "wait_agent", "a new deploy"},
                    Next{S::kCleaning, "wait_agent", "an undeploy's cleaning"},
                    Next{S::kInspecting, "wait_agent", "a reboot into inspection"}}) {
    INFO(next.why);
    REQUIRE(h.sync(h.broker().forget(n.id)));
    h.move(n.id, next.state, next.step);
    const std::string current = h.mint(n);
    CHECK(current != used);
    CHECK(current != unused);
    check_unauthenticated(h.lookup(mac, used, "ramdisk"));
    check_unauthenticated(h.lookup(mac, unused, "ramdisk"));
    auto r = h.lookup(mac, current, "ramdisk");
    REQUIRE(r);
    CHECK(r->node.provision_state == next.state);
  }
  // Resting (manageable): nothing boots the ramdisk, so even the current
  // token of a script fetched now opens nothing, and is not spent by trying.
  REQUIRE(h.sync(h.broker().forget(n.id)));
  h.move(n.id, S::kManageable);
  const std::string idle = h.mint(n);
  auto resting = h.lookup(mac, idle, "ramdisk");
  REQUIRE_FALSE(resting);
  CHECK(resting.error().code == Code::kConflict);
  REQUIRE(h.sync(h.broker().forget(n.id)));
  check_unauthenticated(h.lookup(mac, idle, "ramdisk"));
}

TEST_CASE("boot token replay: node A's token with node B's MACs, first or alone, opens nothing and is not spent") {
  Harness h;
  Node a = h.node("tok-a", "52:54:00:00:10:0a", S::kInspecting, "wait_agent");
  Node b = h.node("tok-b", "52:54:00:00:10:0b", S::kInspecting, "wait_agent");
  const std::string ta = h.mint(a);
  const std::string tb = h.mint(b);
  check_unauthenticated(lookup_with(h, h.broker(), {"52:54:00:00:10:0b"}, ta));
  // B's MAC first: the token is checked against B, whose token it is not.
  check_unauthenticated(lookup_with(h, h.broker(), {"52:54:00:00:10:0b", "52:54:00:00:10:0a"}, ta));
  // Naming A while sending only B's MAC: not A's agent.
  auto named = lookup_with(h, h.broker(), {"52:54:00:00:10:0b"}, ta, "ramdisk", a.id);
  REQUIRE_FALSE(named);
  CHECK(named.error().code == Code::kNotFound);
  CHECK(h.column("SELECT count(*) FROM agent_sessions") == std::vector<std::string>{"0"});
  // Neither token was spent by those tries; each opens its own node only.
  auto ra = lookup_with(h, h.broker(), {"52:54:00:00:10:0a"}, ta);
  REQUIRE(ra);
  CHECK(ra->node.id == a.id);
  auto rb = lookup_with(h, h.broker(), {"52:54:00:00:10:0b"}, tb);
  REQUIRE(rb);
  CHECK(rb->node.id == b.id);
}

TEST_CASE("boot token replay: a boot token is no os secret and no session, and is not spent as either") {
  Harness h;
  const std::string mac = "52:54:00:00:10:05";
  Node n = h.node("os", mac, S::kDeploying, "wait_boot");
  const std::string secret = h.os_secret(n);
  const std::string token = h.mint(n);
  // In the os phase: as the secret, or in the token field with no secret.
  check_unauthenticated(h.lookup(mac, token, "os"));
  check_unauthenticated(lookup_with(h, h.broker(), {mac}, token, "os"));
  // As an agent session.
  auto hb = h.heartbeat(token, n.id);
  REQUIRE_FALSE(hb);
  CHECK(hb.error().code == Code::kUnauthenticated);
  Result<Node> who = h.sync(h.broker().session_node(token));
  REQUIRE_FALSE(who);
  CHECK(who.error().code == Code::kUnauthenticated);
  // The os secret in the ramdisk phase is no boot token either.
  check_unauthenticated(h.lookup(mac, secret, "ramdisk"));
  CHECK(h.column("SELECT count(*) FROM agent_sessions") == std::vector<std::string>{"0"});
  // The token still stands for its attempt (nothing above consumed it).
  CHECK(h.column("SELECT token_hash FROM agent_boot_tokens") == std::vector<std::string>{sha256_hex(token)});
}

TEST_CASE("boot token replay: across a kilnd restart and on another instance, the token is still one-time") {
  Harness h;
  const std::string mac = "52:54:00:00:10:06";
  Node n = h.node("restart", mac, S::kCleaning, "wait_agent");
  const std::string token = h.mint(n);
  // The same attempt after a restart: the script shows the same token (the
  // node may be booting with it right now), and it works once.
  h.restart_broker();
  CHECK(h.mint(n) == token);
  auto r = h.lookup(mac, token, "ramdisk");
  REQUIRE(r);
  h.restart_broker();
  check_unauthenticated(h.lookup(mac, token, "ramdisk"));
  check_unauthenticated(lookup_with(h, h.second_broker(), {mac}, token));
  CHECK(h.heartbeat(r->session, n.id));
}
