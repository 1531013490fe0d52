// The agent routes (controller/api/agent_routes.cc) as an agent reaches
// them: Api::handle() in front of a real AgentBroker on a real SQLite store,
// and for the body limit a real HttpServer on port 0. What a machine says is
// hostile input: a body with any field out of its rule is refused whole with
// a 400 naming the JSON pointer, told to the node as a
// node.agent_input_refused event, and nothing of it is stored.
#include <utility>  // before Asio

#include <future>
#include <string>
#include <vector>

#include "common/http/server.h"
#include "controller/api/agent_input.h"
#include "controller/api/api.h"
#include "controller/conductor/conductor.h"
#include "tests/support/http_test_client.h"
#include "tests/unit/agent_broker/broker_harness.h"  // the broker on a real store

using namespace kiln;
using namespace kiln::testing;
using nlohmann::json;
namespace bhttp = boost::beast::http;

namespace {

struct Reply {
  int status = 0;
  json body;
};

// An Api with only what the agent routes need, over the broker harness.
class AgentApi {
 public:
  explicit AgentApi(Harness& h)
      : h_(h),
        conductor_(h.io(), h.store(), h.db(), drivers_, box_, clock_, ConductorOptions{}, Logger(LogLevel::kOff)),
        api_(deps()) {
    api_.set_ready(true);
  }
  ~AgentApi() { api_.shutdown(); }

  Api& api() { return api_; }

  Reply post(const std::string& target, const std::string& body, const std::string& bearer = "") {
    http::Request req{bhttp::verb::post, target, 11};
    req.set(bhttp::field::host, "kiln.test:8080");
    req.set(bhttp::field::content_type, "application/json");
    if (!bearer.empty()) req.set(bhttp::field::authorization, "Bearer " + bearer);
    req.body() = body;
    req.prepare_payload();
    http::RequestInfo info{"req-agent", "127.0.0.1:1", false};
    http::Reply r = h_.sync(api_.handle(req, info));
    Reply out;
    out.status = static_cast<int>(r.response.result_int());
    out.body = json::parse(r.response.body(), nullptr, false);
    return out;
  }

 private:
  ApiDeps deps() {
    ApiDeps d{h_.store(), h_.db(), conductor_, box_, clock_, Logger(LogLevel::kOff), [] { return std::size_t{0}; }};
    d.agent_broker = &h_.broker();
    return d;
  }

  Harness& h_;
  SecretBox box_{SecretBox::Key{7, 7, 7}};
  SystemClock clock_;
  DriverRegistry drivers_;
  Conductor conductor_;
  Api api_;
};

bool names_field(const Reply& r, const std::string& field) {
  if (!r.body.is_object() || !r.body.contains("errors")) return false;
  for (const auto& e : r.body["errors"])
    if (e["field"] == field) return true;
  return false;
}

// The node.agent_input_refused events of a node, oldest first.
std::vector<json> refusals(Harness& h, const std::string& node_id) {
  auto evs = h.store().list_events(0, 1000, node_id, std::nullopt);
  REQUIRE(evs);
  std::vector<json> out;
  for (const auto& e : *evs)
    if (e.type == "node.agent_input_refused") out.push_back(e.detail);
  return out;
}

// A deploying node waiting for its OS, whose os-phase agent looked up with
// `addresses`: returns {node id, session}.
std::pair<std::string, std::string> booted_os(Harness& h, AgentApi& a, const std::string& mac,
                                              const std::vector<std::string>& addresses) {
  Image img;
  img.name = "cloud-os-" + mac.substr(mac.size() - 2);
  img.kind = "os";
  img.format = "raw";
  img.sha256 = std::string(64, 'a');
  img.size = 1;
  img.source = img.path = "/nonexistent";
  img.state = "ready";
  img.ssh_user = "ubuntu";
  REQUIRE(h.store().create_image(img));
  Node n = h.node("os-" + mac.substr(mac.size() - 2), mac, S::kDeploying, "wait_boot");
  REQUIRE(h.store().update_node_if(n.id, NodeCondition{}, [&](Node& m) { m.image = img.name; return ok_status(); }, {}));
  std::string secret = h.os_secret(n);
  json body = {{"macs", {mac}}, {"phase", "os"}, {"secret", secret}, {"version", "test"}, {"addresses", addresses}};
  Reply r = a.post("/v1/agent/lookup", body.dump());
  INFO(r.body.dump());
  REQUIRE(r.status == 200);
  return {n.id, r.body["session"].get<std::string>()};
}

}  // namespace

TEST_CASE("agent routes: a heartbeat with a hostile address is a 400 naming /addresses/N, an event, and stores nothing") {
  Harness h;
  AgentApi a(h);
  auto [id, session] = booted_os(h, a, "52:54:00:00:02:01", {"10.1.2.3", "2001:db8::7"});
  Node before = *h.store().get_node(id);
  REQUIRE(before.addresses == std::vector<std::string>{"10.1.2.3", "2001:db8::7"});
  REQUIRE(before.ssh == "ubuntu@10.1.2.3");

  const std::string hostile = "fe80::1%eth0\nProxyCommand touch /tmp/pwn";
  json hb = {{"node", id}, {"addresses", {"192.0.2.9", hostile}}};
  Reply r = a.post("/v1/agent/heartbeat", hb.dump(), session);
  INFO(r.body.dump());
  CHECK(r.status == 400);
  CHECK(names_field(r, "/addresses/1"));
  CHECK(r.body.dump().find("ProxyCommand") == std::string::npos);  // the reason, never the value

  // Nothing of the body was stored: not even the good address before it.
  Node after = *h.store().get_node(id);
  CHECK(after.addresses == before.addresses);
  CHECK(after.ssh == before.ssh);
  CHECK(after.version == before.version);
  std::vector<json> refused = refusals(h, id);
  REQUIRE(refused.size() == 1);
  CHECK(refused[0]["route"] == "/v1/agent/heartbeat");
  CHECK(refused[0]["errors"][0]["field"] == "/addresses/1");
  CHECK(refused[0].dump().find("ProxyCommand") == std::string::npos);

  // Every hostile form is refused the same way.
  for (const std::string& bad : {std::string("fe80::1%eth0"), std::string("10.0.0.1 "), std::string("010.1.1.1"),
                                 std::string("1.2.3"), std::string("::ffff:10.0.0.1"), std::string("10.0.0.1#"),
                                 std::string("\"10.0.0.1\""), std::string("10.0.0.1\0", 9), std::string(1 << 16, '1')}) {
    json body = {{"node", id}, {"addresses", {bad}}};
    Reply again = a.post("/v1/agent/heartbeat", body.dump(-1, ' ', false, json::error_handler_t::replace), session);
    CHECK(again.status == 400);
    CHECK(names_field(again, "/addresses/0"));
  }
  // 33 addresses: the list is bounded.
  json many = {{"node", id}, {"addresses", json::array()}};
  for (int i = 0; i < 33; ++i) many["addresses"].push_back("10.9.0." + std::to_string(i + 1));
  Reply over = a.post("/v1/agent/heartbeat", many.dump(), session);
  CHECK(over.status == 400);
  CHECK(names_field(over, "/addresses"));
  CHECK(h.store().get_node(id)->addresses == before.addresses);
  CHECK(refusals(h, id).size() == 11);

  // A good heartbeat is stored canonical, loopback and link-local dropped.
  json good = {{"node", id}, {"addresses", {"2001:DB8:0:0::8", "127.0.0.1", "fe80::1", "192.0.2.9", "192.0.2.9"}}};
  Reply ok = a.post("/v1/agent/heartbeat", good.dump(), session);
  INFO(ok.body.dump());
  CHECK(ok.status == 200);
  Node now = *h.store().get_node(id);
  CHECK(now.addresses == std::vector<std::string>{"2001:db8::8", "192.0.2.9"});
  CHECK(now.ssh == "ubuntu@192.0.2.9");
}

TEST_CASE("agent routes: other heartbeat and result fields are bounded and clean") {
  Harness h;
  AgentApi a(h);
  auto [id, session] = booted_os(h, a, "52:54:00:00:02:02", {"10.1.2.3"});
  Reply busy = a.post("/v1/agent/heartbeat", json({{"node", id}, {"busy", "abc\ndef"}}).dump(), session);
  CHECK(busy.status == 400);
  CHECK(names_field(busy, "/busy"));
  Reply node = a.post("/v1/agent/heartbeat", json({{"node", std::string(300, 'n')}}).dump(), session);
  CHECK(node.status == 400);
  CHECK(names_field(node, "/node"));
  Reply cmd = a.post("/v1/agent/results",
                     json({{"node", id}, {"command_id", "x\x1b[2J"}, {"status", "ok"}}).dump(), session);
  CHECK(cmd.status == 400);
  CHECK(names_field(cmd, "/command_id"));
  std::vector<json> refused = refusals(h, id);
  REQUIRE(refused.size() == 3);
  CHECK(refused[2]["route"] == "/v1/agent/results");

  // Malformed and too deeply nested bodies: a 400, an event, no crash.
  std::string deep = "{\"node\":\"" + id + "\",\"x\":" + std::string(10000, '[') + std::string(10000, ']') + "}";
  Reply nested = a.post("/v1/agent/heartbeat", deep, session);
  CHECK(nested.status == 400);
  Reply nested_result = a.post("/v1/agent/results", std::string(10000, '['), session);
  CHECK(nested_result.status == 400);
  Reply broken = a.post("/v1/agent/heartbeat", "{\"node\":", session);
  CHECK(broken.status == 400);
  CHECK(refusals(h, id).size() == 6);

  // The result's error is free text: cleaned and cut, not refused.
  AgentBroker& b = h.broker();
  auto run = h.spawn(b.run_command(id, "noop", json::object(), nullptr));
  std::string command_id;
  for (int i = 0; i < 200 && command_id.empty(); ++i) {
    Reply hb = a.post("/v1/agent/heartbeat", json({{"node", id}}).dump(), session);
    REQUIRE(hb.status == 200);
    if (hb.body["command"].is_object()) command_id = hb.body["command"]["id"];
    else std::this_thread::sleep_for(5ms);
  }
  REQUIRE_FALSE(command_id.empty());
  std::string error = "disk gone\nProxyCommand x\x1b[0m" + std::string(10000, 'e');
  Reply res = a.post("/v1/agent/results",
                     json({{"node", id}, {"command_id", command_id}, {"status", "error"}, {"error", error}}).dump(),
                     session);
  INFO(res.body.dump());
  CHECK(res.status == 204);
  Result<json> done = run.get();
  REQUIRE_FALSE(done);
  const std::string& why = done.error().message;
  CHECK(why.find('\n') == std::string::npos);
  CHECK(why.find('\x1b') == std::string::npos);
  CHECK(why.find("disk gone ProxyCommand x[0m") != std::string::npos);
  CHECK(why.size() <= api::kMaxAgentError + 64);
}

TEST_CASE("agent routes: a refused lookup is an event only for a caller holding the node's credential") {
  Harness h;
  AgentApi a(h);
  Node n = h.node("lk", "52:54:00:00:02:03", S::kDeploying, "wait_boot");
  std::string secret = h.os_secret(n);
  json bad = {{"macs", {"52:54:00:00:02:03"}}, {"phase", "os"}, {"addresses", {"fe80::1%eth0\nx"}}};
  // A stranger (no secret): 400 for the body, and nothing on the node.
  Reply stranger = a.post("/v1/agent/lookup", bad.dump());
  CHECK(stranger.status == 400);
  CHECK(names_field(stranger, "/addresses/0"));
  CHECK(refusals(h, n.id).empty());
  // The node's own agent: 400, and the node is told.
  bad["secret"] = secret;
  Reply own = a.post("/v1/agent/lookup", bad.dump());
  CHECK(own.status == 400);
  CHECK(names_field(own, "/addresses/0"));
  std::vector<json> refused = refusals(h, n.id);
  REQUIRE(refused.size() == 1);
  CHECK(refused[0]["route"] == "/v1/agent/lookup");
  // No session was opened by either.
  auto sessions = h.store().agent_sessions_of(n.id);
  REQUIRE(sessions);
  CHECK(sessions->empty());
  Reply version = a.post("/v1/agent/lookup",
                         json({{"macs", {"52:54:00:00:02:03"}}, {"phase", "os"}, {"secret", secret},
                               {"version", "1.0\n\x1b[31mred"}}).dump());
  CHECK(version.status == 400);
  CHECK(names_field(version, "/version"));
}

TEST_CASE("agent routes: a body over kilnd's limit is a 413 before any route reads it") {
  Harness h;
  AgentApi a(h);
  auto [id, session] = booted_os(h, a, "52:54:00:00:02:04", {"10.1.2.3"});
  http::ServerOptions opt;
  opt.host = "127.0.0.1";
  opt.port = 0;
  // kilnd's default (controller/config.h max_body_bytes) is the server's.
  REQUIRE(opt.body_limit == 4 * 1024 * 1024);
  Api& api = a.api();
  http::HttpServer server(
      h.io(), opt, [&api](http::Request& req, const http::RequestInfo& info) { return api.handle(req, info); },
      [&api](int status, std::string_view detail) { return api.error_response(status, detail); },
      Logger(LogLevel::kOff));
  REQUIRE(server.start());
  // The server answers as soon as it reads a Content-Length over the limit
  // (it may close before a client finishes sending), so only the header goes.
  HttpTestClient c("127.0.0.1", server.port());
  c.send_raw("POST /v1/agent/heartbeat HTTP/1.1\r\nHost: kiln.test\r\nContent-Type: application/json\r\n"
             "Authorization: Bearer " + session + "\r\nContent-Length: " + std::to_string(opt.body_limit + 1) +
             "\r\n\r\n");
  TestResponse r = c.read_response();
  CHECK(r.status == 413);
  CHECK(refusals(h, id).empty());  // no route read it
  HttpTestClient c2("127.0.0.1", server.port());
  TestResponse fine = c2.request("POST", "/v1/agent/heartbeat", json({{"node", id}}).dump(),
                                 {{"Authorization", "Bearer " + session}});
  CHECK(fine.status == 200);
  server.stop();
}
