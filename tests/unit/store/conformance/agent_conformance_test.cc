// AgentStore conformance: boot tokens, os secrets and sessions on SQLite and
// PostgreSQL (backends.h), including the races two instances sharing one
// database would run: one boot token consumed once, one os secret agreed on.
#include <catch2/catch.hpp>

#include <atomic>
#include <thread>

#include "backends.h"

using namespace kiln;
using namespace kiln::test;

namespace {
AgentSession session(const std::string& node_id, const std::string& hash) {
  return AgentSession{hash, node_id, "ramdisk", "deploying", 0};
}
}  // namespace

TEMPLATE_TEST_CASE("conformance: agent boot tokens, os secrets and sessions", "[store][conformance]",
                   KILN_STORE_BACKENDS) {
  TestType b;
  AgentStore& a = b.agent();
  auto n = b.nodes().create_node(make_node("n1"), event("node.created"));
  REQUIRE(n);
  const std::string ghost = "00000000-0000-4000-8000-000000000000";

  CHECK_FALSE(a.agent_boot_token_sealed(n->id)->has_value());
  REQUIRE(a.set_agent_boot_token(n->id, std::string(64, '1'), "sealed-1"));
  REQUIRE(a.set_agent_boot_token(n->id, std::string(64, '2'), "sealed-2"));  // replaces
  CHECK(a.agent_boot_token_sealed(n->id)->value() == "sealed-2");
  CHECK(a.set_agent_boot_token(ghost, "h", "s").error().code == Code::kNotFound);

  // The replaced token no longer opens a session; the current one does, once.
  auto old = a.open_agent_session(session(n->id, "sess-a"), std::string(64, '1'), {event("agent.lookup")});
  CHECK(old.error().code == Code::kUnauthenticated);
  REQUIRE(a.open_agent_session(session(n->id, "sess-a"), std::string(64, '2'), {event("agent.lookup")}));
  CHECK_FALSE(a.agent_boot_token_sealed(n->id)->has_value());
  CHECK(a.open_agent_session(session(n->id, "sess-b"), std::string(64, '2'), {}).error().code ==
        Code::kUnauthenticated);
  auto found = a.find_agent_session("sess-a");
  REQUIRE(found);
  CHECK(found->node_id == n->id);
  CHECK(found->phase == "ramdisk");
  CHECK(found->created_at == b.clock.now_ms());
  // A session without a boot token (os phase) replaces the node's others.
  REQUIRE(a.open_agent_session(session(n->id, "sess-c"), "", {}));
  CHECK(a.find_agent_session("sess-a").error().code == Code::kNotFound);
  REQUIRE(a.agent_sessions_of(n->id)->size() == 1);
  CHECK(a.open_agent_session(session(ghost, "sess-x"), "", {}).error().code == Code::kNotFound);
  // A node that is gone has no boot token: the token is what is refused.
  CHECK(a.open_agent_session(session(ghost, "sess-y"), std::string(64, '3'), {}).error().code ==
        Code::kUnauthenticated);
  REQUIRE(a.delete_agent_sessions(n->id));
  CHECK(a.agent_sessions_of(n->id)->empty());
  // The lookup's event went in with the session, and only that one.
  auto evs = b.events().list_events(1, 10, std::nullopt, std::nullopt);
  REQUIRE(evs);
  REQUIRE(evs->size() == 1);
  CHECK(evs->at(0).type == "agent.lookup");

  CHECK_FALSE(a.get_agent_os_secret(n->id)->has_value());
  auto first = a.put_agent_os_secret(AgentOsSecret{n->id, "hash-1", "sealed-1", 0});
  REQUIRE(first);
  auto second = a.put_agent_os_secret(AgentOsSecret{n->id, "hash-2", "sealed-2", 0});
  REQUIRE(second);
  CHECK(second->secret_hash == "hash-1");  // the first one stays
  CHECK(a.get_agent_os_secret(n->id)->value().secret_sealed == "sealed-1");
  CHECK(a.put_agent_os_secret(AgentOsSecret{ghost, "h", "s", 0}).error().code == Code::kNotFound);
  REQUIRE(a.delete_agent_os_secret(n->id));
  REQUIRE(a.delete_agent_os_secret(n->id));  // idempotent
  CHECK_FALSE(a.get_agent_os_secret(n->id)->has_value());
}

TEMPLATE_TEST_CASE("conformance: racing instances consume a boot token once and agree on one os secret",
                   "[store][conformance][concurrency]", KILN_STORE_BACKENDS) {
  TestType b;
  auto second = b.open_another();
  AgentStore* handles[2] = {&b.agent(), dynamic_cast<AgentStore*>(second.get())};
  REQUIRE(handles[1] != nullptr);
  constexpr int kNodes = 10, kRacers = 6;
  std::vector<std::string> ids;
  for (int i = 0; i < kNodes; ++i) {
    auto n = b.nodes().create_node(make_node("n" + std::to_string(i)), event("node.created"));
    REQUIRE(n);
    ids.push_back(n->id);
    REQUIRE(b.agent().set_agent_boot_token(n->id, "boot-" + std::to_string(i), "sealed"));
  }
  std::vector<std::atomic<int>> sessions(kNodes);
  std::vector<std::vector<std::string>> secrets(kNodes, std::vector<std::string>(kRacers));
  std::atomic<int> other_errors{0};
  std::vector<std::thread> racers;
  for (int r = 0; r < kRacers; ++r) {
    racers.emplace_back([&, r] {
      AgentStore& a = *handles[r % 2];
      for (int i = 0; i < kNodes; ++i) {
        Status s = a.open_agent_session(session(ids[i], "sess-" + std::to_string(i) + "-" + std::to_string(r)),
                                        "boot-" + std::to_string(i), {event("agent.lookup")});
        if (s) {
          ++sessions[i];
        } else if (s.error().code != Code::kUnauthenticated) {
          ++other_errors;
        }
        auto sec = a.put_agent_os_secret(AgentOsSecret{ids[i], "hash-" + std::to_string(r), "sealed", 0});
        if (sec) {
          secrets[i][r] = sec->secret_hash;
        } else {
          ++other_errors;
        }
      }
    });
  }
  for (auto& t : racers) t.join();
  CHECK(other_errors == 0);
  for (int i = 0; i < kNodes; ++i) {
    INFO("node " << i);
    CHECK(sessions[i] == 1);
    for (int r = 1; r < kRacers; ++r) CHECK(secrets[i][r] == secrets[i][0]);
    CHECK(b.agent().get_agent_os_secret(ids[i])->value().secret_hash == secrets[i][0]);
  }
}

namespace {
AgentCommandRecord command(const std::string& node_id, const std::string& id, const std::string& name) {
  AgentCommandRecord c;
  c.node_id = node_id;
  c.id = id;
  c.name = name;
  c.args = {{"disk", "/dev/sda"}};
  return c;
}
}  // namespace

TEMPLATE_TEST_CASE("conformance: a node's outstanding agent command, its delivery and its result",
                   "[store][conformance]", KILN_STORE_BACKENDS) {
  TestType b;
  AgentStore& a = b.agent();
  auto n = b.nodes().create_node(make_node("n1"), event("node.created"));
  REQUIRE(n);
  const std::string ghost = "00000000-0000-4000-8000-000000000000";

  CHECK_FALSE(a.get_agent_command(n->id)->has_value());
  CHECK_FALSE(a.deliver_agent_command(n->id, 5)->has_value());
  CHECK(a.put_agent_command(command(ghost, "c0", "wipe")).error().code == Code::kNotFound);
  CHECK(a.record_agent_result(n->id, "c0", "ok", nlohmann::json::object(), "").error().code == Code::kConflict);

  REQUIRE(a.put_agent_command(command(n->id, "c1", "wipe")));
  auto got = a.get_agent_command(n->id);
  REQUIRE(got);
  REQUIRE(got->has_value());
  CHECK((*got)->id == "c1");
  CHECK((*got)->name == "wipe");
  CHECK((*got)->args == nlohmann::json{{"disk", "/dev/sda"}});
  CHECK((*got)->created_at == b.clock.now_ms());
  CHECK((*got)->delivered_at == 0);
  CHECK((*got)->status == "");

  // Handed out on every heartbeat; only the first is the first delivery.
  auto first = a.deliver_agent_command(n->id, 111);
  REQUIRE(first);
  REQUIRE(first->has_value());
  CHECK((*first)->first_delivery);
  CHECK((*first)->command.id == "c1");
  CHECK((*first)->command.args == nlohmann::json{{"disk", "/dev/sda"}});
  auto again = a.deliver_agent_command(n->id, 222);
  REQUIRE(again);
  REQUIRE(again->has_value());
  CHECK_FALSE((*again)->first_delivery);
  CHECK((*again)->command.delivered_at == 111);

  // A stale id changes nothing; the right one records the result, once.
  CHECK(a.record_agent_result(n->id, "c0", "ok", nlohmann::json::object(), "").error().code == Code::kConflict);
  CHECK(a.get_agent_command(n->id)->value().status == "");
  auto done = a.record_agent_result(n->id, "c1", "ok", nlohmann::json{{"cpu", 4}}, "");
  REQUIRE(done);
  CHECK(done->name == "wipe");
  CHECK(done->status == "ok");
  CHECK(done->finished_at == b.clock.now_ms());
  CHECK(a.record_agent_result(n->id, "c1", "error", nlohmann::json::object(), "late").error().code ==
        Code::kConflict);
  auto read = a.get_agent_command(n->id)->value();
  CHECK(read.status == "ok");
  CHECK(read.result == nlohmann::json{{"cpu", 4}});
  CHECK(read.error == "");
  // A command with its result is no longer handed out.
  CHECK_FALSE(a.deliver_agent_command(n->id, 333)->has_value());

  // A new command replaces the old one whole: not delivered, no result.
  REQUIRE(a.put_agent_command(command(n->id, "c2", "write_image")));
  read = a.get_agent_command(n->id)->value();
  CHECK(read.id == "c2");
  CHECK(read.delivered_at == 0);
  CHECK(read.status == "");
  CHECK(read.result == nlohmann::json::object());
  CHECK(a.deliver_agent_command(n->id, 444)->value().first_delivery);
  REQUIRE(a.record_agent_result(n->id, "c2", "error", nlohmann::json::object(), "sha256 mismatch"));
  CHECK(a.get_agent_command(n->id)->value().error == "sha256 mismatch");

  // Clearing by another id keeps it; by its id or by none removes it.
  REQUIRE(a.clear_agent_command(n->id, "c1"));
  CHECK(a.get_agent_command(n->id)->has_value());
  REQUIRE(a.clear_agent_command(n->id, "c2"));
  CHECK_FALSE(a.get_agent_command(n->id)->has_value());
  REQUIRE(a.clear_agent_command(n->id, "c2"));  // idempotent
  REQUIRE(a.put_agent_command(command(n->id, "c3", "inspect")));
  REQUIRE(a.clear_agent_command(n->id, ""));
  CHECK_FALSE(a.get_agent_command(n->id)->has_value());

  // Deleting the node takes its command along.
  REQUIRE(a.put_agent_command(command(n->id, "c4", "inspect")));
  REQUIRE(b.nodes().delete_node_if(n->id, NodeCondition{}, event("node.deleted")));
  CHECK_FALSE(a.get_agent_command(n->id)->has_value());
}

TEMPLATE_TEST_CASE("conformance: racing instances deliver a command first once and record one result",
                   "[store][conformance][concurrency]", KILN_STORE_BACKENDS) {
  TestType b;
  auto second = b.open_another();
  AgentStore* handles[2] = {&b.agent(), dynamic_cast<AgentStore*>(second.get())};
  REQUIRE(handles[1] != nullptr);
  auto n = b.nodes().create_node(make_node("n1"), event("node.created"));
  REQUIRE(n);
  constexpr int kRounds = 10, kRacers = 6;
  for (int round = 0; round < kRounds; ++round) {
    INFO("round " << round);
    const std::string id = "cmd-" + std::to_string(round);
    // Put by one instance ...
    REQUIRE(handles[round % 2]->put_agent_command(command(n->id, id, "inspect")));
    std::atomic<int> firsts{0}, handed{0}, results{0}, conflicts{0}, other_errors{0};
    std::vector<std::thread> racers;
    for (int r = 0; r < kRacers; ++r) {
      racers.emplace_back([&, r] {
        AgentStore& a = *handles[r % 2];
        // ... handed out and answered through both, at once.
        auto h = a.deliver_agent_command(n->id, 1000 + r);
        if (!h) {
          ++other_errors;
        } else if (*h) {
          ++handed;
          if ((*h)->first_delivery) ++firsts;
        }
        auto res = a.record_agent_result(n->id, id, "ok", nlohmann::json{{"racer", r}}, "");
        if (res) {
          ++results;
        } else if (res.error().code == Code::kConflict) {
          ++conflicts;
        } else {
          ++other_errors;
        }
      });
    }
    for (auto& t : racers) t.join();
    CHECK(other_errors == 0);
    // The earliest delivery precedes every result (each racer delivers
    // before it answers), so exactly one racer sees the first delivery.
    CHECK(firsts == 1);
    CHECK(handed >= 1);
    CHECK(results == 1);
    CHECK(conflicts == kRacers - 1);
    auto read = handles[(round + 1) % 2]->get_agent_command(n->id);
    REQUIRE(read);
    REQUIRE(read->has_value());
    CHECK((*read)->status == "ok");
  }
}

TEMPLATE_TEST_CASE("conformance: agent rows written while their node is deleted go with the node",
                   "[store][conformance][concurrency]", KILN_STORE_BACKENDS) {
  TestType b;
  auto second = b.open_another();
  AgentStore& writer = *dynamic_cast<AgentStore*>(second.get());
  constexpr int kNodes = 10;
  std::vector<std::string> ids;
  for (int i = 0; i < kNodes; ++i) {
    auto n = b.nodes().create_node(make_node("n" + std::to_string(i)), event("node.created"));
    REQUIRE(n);
    ids.push_back(n->id);
  }
  // Each write ends ok (and the delete then removes it) or finds no node;
  // never a foreign key failure, never a row that outlives its node.
  std::atomic<int> other_errors{0};
  auto tally = [&](const Status& s) {
    if (!s && s.error().code != Code::kNotFound) ++other_errors;
  };
  std::thread writes([&] {
    for (const std::string& id : ids) {
      for (int k = 0; k < 3; ++k) {
        tally(writer.set_agent_boot_token(id, "boot-" + std::to_string(k), "sealed"));
        auto sec = writer.put_agent_os_secret(AgentOsSecret{id, "hash", "sealed", 0});
        if (!sec && sec.error().code != Code::kNotFound) ++other_errors;
        tally(writer.open_agent_session(session(id, "sess-" + id + "-" + std::to_string(k)), "", {}));
        tally(writer.put_agent_command(command(id, "c" + std::to_string(k), "inspect")));
      }
    }
  });
  for (const std::string& id : ids) REQUIRE(b.nodes().delete_node_if(id, NodeCondition{}, event("node.deleted")));
  writes.join();
  CHECK(other_errors == 0);
  AgentStore& a = b.agent();
  for (const std::string& id : ids) {
    CHECK_FALSE(a.agent_boot_token_sealed(id)->has_value());
    CHECK_FALSE(a.get_agent_os_secret(id)->has_value());
    CHECK(a.agent_sessions_of(id)->empty());
    CHECK_FALSE(a.get_agent_command(id)->has_value());
  }
}
