// Events (pages and the SSE stream) and the audit log.
#include <catch2/catch.hpp>

#include <future>
#include <sstream>
#include <thread>

#include "tests/unit/api/api_harness.h"
#include "tests/unit/api/sse_capture.h"
#include "tests/support/wait_until.h"

using namespace kiln;
using namespace kiln::test;
using nlohmann::json;
using V = http::bhttp::verb;
using namespace std::chrono_literals;

namespace {

template <typename Pred>
bool eventually(Pred p, std::chrono::milliseconds limit = 10s) {
  return kiln::testing::wait_until(p, limit, 5ms);
}

}  // namespace

TEST_CASE("events: pages by seq, filter by node, RFC 3339 timestamps") {
  ApiHarness h;
  json a = h.enroll("e1");
  json b = h.enroll("e2");
  for (int i = 0; i < 3; ++i) {
    REQUIRE(h.call(V::put, "/v1/nodes/e1/maintenance", h.admin(), "").status == 200);
    REQUIRE(h.call(V::delete_, "/v1/nodes/e1/maintenance", h.admin()).status == 200);
  }
  Resp all = h.call(V::get, "/v1/events?limit=1000", h.admin());
  REQUIRE(all.status == 200);
  const json& events = all.json["events"];
  REQUIRE(events.size() == 8);
  for (std::size_t i = 1; i < events.size(); ++i) CHECK(events[i]["seq"] > events[i - 1]["seq"]);
  const json& first = events[0];
  for (const char* f : {"seq", "ts", "type", "node", "from", "to", "detail", "request_id"}) CHECK(first.contains(f));
  CHECK(first["type"] == "node.created");
  CHECK(first["node"] == a["id"]);
  CHECK(first["ts"].get<std::string>().back() == 'Z');
  CHECK(first["request_id"].is_string());
  CHECK(first["detail"]["actor"] == "bootstrap-admin");

  // Walk pages of 3 via next.
  std::vector<int64_t> seqs;
  std::string target = "/v1/events?limit=3";
  for (int pages = 0; pages < 10; ++pages) {
    Resp r = h.call(V::get, target, h.admin());
    REQUIRE(r.status == 200);
    for (const auto& e : r.json["events"]) seqs.push_back(e["seq"]);
    if (r.json["next"].is_null()) break;
    target = r.json["next"].get<std::string>().substr(std::string("http://kiln.test:8080").size());
  }
  REQUIRE(seqs.size() == 8);
  CHECK(seqs.front() == events[0]["seq"]);
  CHECK(seqs.back() == events[7]["seq"]);

  int64_t since = events[5]["seq"];
  Resp after = h.call(V::get, "/v1/events?since=" + std::to_string(since), h.admin());
  CHECK(after.json["events"].size() == 2);
  Resp node_b = h.call(V::get, "/v1/events?node=e2", h.admin());
  REQUIRE(node_b.json["events"].size() == 1);
  CHECK(node_b.json["events"][0]["node"] == b["id"]);
  CHECK(h.call(V::get, "/v1/events?since=-1", h.admin()).field() == "since");
  CHECK(h.call(V::get, "/v1/events?since=x", h.admin()).field() == "since");
  CHECK(h.call(V::get, "/v1/events?node=ghost", h.admin()).status == 404);
  CHECK(h.call(V::get, "/v1/events?type=x", h.admin()).field() == "type");
}

TEST_CASE("SSE stream delivers every event in seq order while a node is provisioned") {
  ApiHarness h(200ms);
  json n = h.enroll("s1", {{"bmc", {{"driver", "fake"}, {"address", "a"}, {"options", {{"step_delay_ms", 5}}}}}});
  std::string id = n["id"];
  auto start_seq = h.store().last_event_seq();
  REQUIRE(start_seq);

  Resp r = h.call(V::get, "/v1/events/stream", h.admin());
  REQUIRE(r.status == 200);
  CHECK(r.header("content-type") == "text/event-stream");
  CHECK(r.header("cache-control") == "no-cache");
  REQUIRE(r.reply.stream);
  CollectingWriter writer;
  auto done = asio::co_spawn(h.io(), r.reply.stream(writer), asio::use_future);

  auto verb = [&](const std::string& v) {
    Resp x = h.call_json(V::put, "/v1/nodes/s1/states/provision", h.admin(), {{"target", v}});
    INFO(x.body);
    REQUIRE(x.status == 202);
  };
  verb("manage");
  h.wait_state(id, "manageable");
  verb("inspect");
  h.wait_state(id, "manageable");
  verb("provide");
  h.wait_state(id, "available");
  verb("deploy");
  h.wait_state(id, "active");
  REQUIRE(h.call(V::put, "/v1/nodes/s1/maintenance", h.admin(), "").status == 200);

  auto expected = h.store().list_events(*start_seq, 1000, std::nullopt, std::nullopt);
  REQUIRE(expected);
  REQUIRE(expected->size() >= 8);
  int64_t last = expected->back().seq;
  REQUIRE(eventually([&] {
    auto got = parse_sse(writer.text());
    return !got.empty() && got.back().id >= last;
  }));
  // Keep-alive comments arrive while idle (interval 200 ms here).
  std::this_thread::sleep_for(500ms);
  h.api().shutdown();
  REQUIRE(done.wait_for(5s) == std::future_status::ready);
  done.get();

  int keepalives = 0;
  auto got = parse_sse(writer.text(), &keepalives);
  REQUIRE(got.size() == expected->size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    CHECK(got[i].id == (*expected)[i].seq);
    CHECK(got[i].type == (*expected)[i].type);
    CHECK(got[i].data["seq"] == got[i].id);
    CHECK(got[i].data["type"] == got[i].type);
  }
  CHECK(keepalives >= 1);
  std::vector<std::string> types;
  for (const auto& e : got) types.push_back(e.type);
  CHECK(std::find(types.begin(), types.end(), "node.maintenance_set") != types.end());

  // After shutdown a new stream ends at once.
  Resp again = h.call(V::get, "/v1/events/stream?since=0", h.admin());
  CollectingWriter w2;
  auto done2 = asio::co_spawn(h.io(), again.reply.stream(w2), asio::use_future);
  REQUIRE(done2.wait_for(5s) == std::future_status::ready);
}

TEST_CASE("SSE stream resumes after Last-Event-ID or since, filters by tenant, ends when the peer goes") {
  ApiHarness h;
  std::string acme = h.make_token("tenant", "acme");
  json mine = h.enroll("t1", {{"tenant", "acme"}});
  h.enroll("t2");
  h.enroll("t3", {{"tenant", "acme"}});
  auto all = h.store().list_events(0, 100, std::nullopt, std::nullopt);
  REQUIRE(all);
  REQUIRE(all->size() == 3);

  // Since the first event: the second and third; Last-Event-ID does the same.
  Options hdr;
  hdr.headers["Last-Event-ID"] = std::to_string((*all)[0].seq);
  for (Resp r : {h.call(V::get, "/v1/events/stream?since=" + std::to_string((*all)[0].seq), h.admin()),
                 h.call(V::get, "/v1/events/stream", h.admin(), "", hdr)}) {
    REQUIRE(r.status == 200);
    CollectingWriter w;
    auto done = asio::co_spawn(h.io(), r.reply.stream(w), asio::use_future);
    REQUIRE(eventually([&] { return parse_sse(w.text()).size() >= 2; }));
    w.go_away();
    h.enroll("poke-" + std::to_string((*all)[0].seq) + std::to_string(w.text().size()));  // wakes the stream
    REQUIRE(done.wait_for(5s) == std::future_status::ready);
    auto got = parse_sse(w.text());
    CHECK(got[0].id == (*all)[1].seq);
    CHECK(got[1].id == (*all)[2].seq);
  }
  Options bad;
  bad.headers["Last-Event-ID"] = "abc";
  CHECK(h.call(V::get, "/v1/events/stream", h.admin(), "", bad).field() == "Last-Event-ID");

  // A tenant's stream shows its own nodes' events only, and keeps up past others'.
  Resp r = h.call(V::get, "/v1/events/stream?since=0", acme);
  REQUIRE(r.status == 200);
  CollectingWriter w;
  auto done = asio::co_spawn(h.io(), r.reply.stream(w), asio::use_future);
  REQUIRE(h.call(V::put, "/v1/nodes/t2/maintenance", h.admin(), "").status == 200);
  REQUIRE(h.call(V::put, "/v1/nodes/t1/maintenance", h.admin(), "").status == 200);
  REQUIRE(eventually([&] { return parse_sse(w.text()).size() == 3; }));
  h.api().shutdown();
  REQUIRE(done.wait_for(5s) == std::future_status::ready);
  auto got = parse_sse(w.text());
  REQUIRE(got.size() == 3);
  CHECK(got[0].data["node"] == mine["id"]);
  CHECK(got[2].type == "node.maintenance_set");
  for (const auto& e : got) CHECK(e.data["node"] != json(nullptr));
}

TEST_CASE("audit records every authenticated mutating request, failed ones too, and counts anonymous refusals") {
  ApiHarness h;
  json n = h.enroll("au1");
  std::string op = h.make_token("operator", "", "ops-bot");
  REQUIRE(h.call_json(V::patch, "/v1/nodes/au1", op, {{"profile", "x"}}).status == 200);
  REQUIRE(h.call_json(V::patch, "/v1/nodes/au1", op, {{"id", "x"}}).status == 400);
  REQUIRE(h.call(V::delete_, "/v1/nodes/au1", "").status == 401);
  REQUIRE(h.call(V::get, "/v1/nodes/au1", op).status == 200);  // reads are not audited

  Resp a = h.call(V::get, "/v1/audit", h.admin());
  INFO(a.body);
  REQUIRE(a.status == 200);
  const json& recs = a.json["audit"];
  // enroll (POST), token create (POST), PATCH ok, PATCH 400. The DELETE
  // without a token is not audited (anyone could fill the table) but counted.
  REQUIRE(recs.size() == 4);
  CHECK(recs[0]["method"] == "POST");
  CHECK(recs[0]["path"] == "/v1/nodes");
  CHECK(recs[0]["status"] == 201);
  CHECK(recs[0]["node"] == n["id"]);
  CHECK(recs[0]["actor_name"] == "bootstrap-admin");
  CHECK(recs[0]["role"] == "admin");
  CHECK(recs[1]["path"] == "/v1/tokens");
  CHECK(recs[2]["method"] == "PATCH");
  CHECK(recs[2]["status"] == 200);
  CHECK(recs[2]["actor_name"] == "ops-bot");
  CHECK(recs[2]["role"] == "operator");
  CHECK(recs[2]["node"] == n["id"]);
  CHECK(recs[2]["request_id"].is_string());
  CHECK(recs[3]["status"] == 400);
  Resp metrics = h.call(V::get, "/metrics", "");
  CHECK(metrics.body.find("kiln_api_rejected_anonymous_total 1\n") != std::string::npos);

  Resp page = h.call(V::get, "/v1/audit?limit=2", h.admin());
  REQUIRE(page.json["audit"].size() == 2);
  REQUIRE(page.json["next"].is_string());
  CHECK(h.call(V::get, "/v1/audit?since=zz", h.admin()).field() == "since");
}
