// ConductorStore conformance: registration, heartbeats, clean stops, the
// previous incarnation marked stopped and old rows forgotten, on SQLite and
// PostgreSQL (backends.h).
#include <catch2/catch.hpp>

#include <algorithm>

#include "backends.h"

using namespace kiln;
using namespace kiln::test;

namespace {
const ConductorRecord* find(const std::vector<ConductorRecord>& all, const std::string& id) {
  auto it = std::find_if(all.begin(), all.end(), [&](const ConductorRecord& c) { return c.id == id; });
  return it == all.end() ? nullptr : &*it;
}
}  // namespace

TEMPLATE_TEST_CASE("conformance: conductors: register, heartbeat, stop, previous incarnation, forget",
                   "[store][conformance]", KILN_STORE_BACKENDS) {
  TestType b;
  ConductorStore& s = b.conductors();
  const int64_t t0 = b.clock.now_ms();
  auto a = s.register_conductor({"c-a", "host-1", "http://host-1:8080", 0, 0, 0});
  REQUIRE(a);
  CHECK(a->started_at == t0);
  CHECK(a->last_heartbeat_at == t0);
  CHECK(a->stopped_at == 0);
  REQUIRE(s.register_conductor({"c-b", "host-2", "http://host-2:8080", 0, 0, 0}));
  CHECK(s.register_conductor({"", "host-3", "http://host-3:8080", 0, 0, 0}).error().code == Code::kInvalidArgument);

  b.clock.advance_ms(1500);
  auto beat = s.heartbeat_conductor("c-a");
  REQUIRE(beat);
  CHECK(beat->last_heartbeat_at == t0 + 1500);
  CHECK(beat->started_at == t0);
  CHECK(s.heartbeat_conductor("nobody").error().code == Code::kNotFound);

  auto all = s.list_conductors();
  REQUIRE(all);
  REQUIRE(all->size() == 2);
  CHECK(all->at(0).id == "c-a");  // by started_at, then id
  CHECK(all->at(1).host == "host-2");
  CHECK(all->at(1).api_url == "http://host-2:8080");

  // A clean stop: kept (for the operator to see) but no longer heartbeating.
  b.clock.advance_ms(10);
  REQUIRE(s.stop_conductor("c-b"));
  b.clock.advance_ms(10);
  REQUIRE(s.stop_conductor("c-b"));  // the first stop's time is kept
  CHECK(s.stop_conductor("nobody").error().code == Code::kNotFound);
  CHECK(s.heartbeat_conductor("c-b").error().code == Code::kNotFound);
  all = s.list_conductors();
  REQUIRE(all);
  REQUIRE(find(*all, "c-b") != nullptr);
  CHECK(find(*all, "c-b")->stopped_at == t0 + 1510);

  // The same host and URL registering again is a restart: the previous
  // incarnation is stopped at once; another host's conductor is untouched.
  REQUIRE(s.register_conductor({"c-c", "host-3", "http://host-3:8080", 0, 0, 0}));
  b.clock.advance_ms(10);
  auto again = s.register_conductor({"c-a2", "host-1", "http://host-1:8080", 0, 0, 0});
  REQUIRE(again);
  all = s.list_conductors();
  REQUIRE(all);
  REQUIRE(find(*all, "c-a") != nullptr);
  CHECK(find(*all, "c-a")->stopped_at == b.clock.now_ms());
  CHECK(find(*all, "c-c")->stopped_at == 0);
  CHECK(find(*all, "c-a2")->stopped_at == 0);

  // A conductor whose row was stopped while it could not reach the store
  // registers its id again: running, fresh heartbeat, started_at kept.
  b.clock.advance_ms(10);
  auto back = s.register_conductor({"c-a", "host-1", "http://host-1:8080", 0, 0, 0});
  REQUIRE(back);
  CHECK(back->stopped_at == 0);
  CHECK(back->started_at == t0);
  CHECK(back->last_heartbeat_at == b.clock.now_ms());

  // Rows stopped or silent for over an hour go at the next registration.
  b.clock.advance_ms(kForgetConductorAfterMs - 100);
  REQUIRE(s.heartbeat_conductor("c-c"));
  b.clock.advance_ms(200);
  REQUIRE(s.register_conductor({"c-d", "host-4", "http://host-4:8080", 0, 0, 0}));
  all = s.list_conductors();
  REQUIRE(all);
  std::vector<std::string> ids;
  for (const ConductorRecord& c : *all) ids.push_back(c.id);
  std::sort(ids.begin(), ids.end());
  CHECK(ids == std::vector<std::string>{"c-c", "c-d"});
}

TEMPLATE_TEST_CASE("conformance: conductors: listed by started_at, then id in byte order", "[store][conformance]",
                   KILN_STORE_BACKENDS) {
  TestType b;
  ConductorStore& s = b.conductors();
  REQUIRE(s.register_conductor({"first", "host-0", "http://host-0:8080", 0, 0, 0}));
  b.clock.advance_ms(1);
  for (const char* id : {"c-b", "c-a", "C-z", "c-10", "c1"})
    REQUIRE(s.register_conductor({id, std::string("host-") + id, "http://h:8080", 0, 0, 0}));
  b.clock.advance_ms(1);
  REQUIRE(s.heartbeat_conductor("first"));  // a heartbeat does not move a conductor in the list
  auto all = s.list_conductors();
  REQUIRE(all);
  std::vector<std::string> ids;
  for (const ConductorRecord& c : *all) ids.push_back(c.id);
  CHECK(ids == std::vector<std::string>{"first", "C-z", "c-10", "c-a", "c-b", "c1"});
}
