// kilnd as a user runs it: flags, the listening line, tokens, TLS, the event
// stream over a real socket, graceful shutdown, secrets kept out of logs and
// out of the database file in clear.
#include <catch2/catch.hpp>

#include <sys/stat.h>

#include <algorithm>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "kilnd_process.h"
#include "tests/support/http_test_client.h"
#include "tests/support/self_signed_cert.h"

using namespace kiln::testing;
using nlohmann::json;
using namespace std::chrono_literals;

namespace {
// A node no operation holds (the API renders an empty reservation as null).
bool is_free(const json& n) { return n["reservation"].is_null() || n["reservation"] == ""; }
const std::string kToken = "kiln_integration_admin_token_0001";
Headers auth(const std::string& t = kToken) { return {{"Authorization", "Bearer " + t}}; }

json create_fake_node(HttpTestClient& c, const std::string& name, json options = json::object(),
                      const std::string& password = "s3cret-bmc-password") {
  json body = {{"name", name},
               {"bmc", {{"driver", "fake"}, {"address", "bmc-" + name}, {"username", "root"},
                        {"password", password}, {"options", options}}}};
  auto r = c.request("POST", "/v1/nodes", body.dump(), auth());
  INFO(r.body);
  REQUIRE(r.status == 201);
  return json::parse(r.body);
}

json get_json(HttpTestClient& c, const std::string& target) {
  auto r = c.request("GET", target, "", auth());
  INFO(target << " -> " << r.body);
  REQUIRE(r.status == 200);
  return json::parse(r.body);
}

std::string wait_state(HttpTestClient& c, const std::string& node, const std::string& state,
                       std::chrono::milliseconds limit = 10s) {
  auto end = std::chrono::steady_clock::now() + limit;
  std::string s;
  while (std::chrono::steady_clock::now() < end) {
    json n = get_json(c, "/v1/nodes/" + node);
    s = n["provision_state"];
    if (s == state && is_free(n)) return s;
    std::this_thread::sleep_for(10ms);
  }
  return s;
}

std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}
}  // namespace

TEST_CASE("kilnd starts on port 0, prints where it listens, and serves health") {
  TempDir dir;
  KilndProcess k(dir.path(), {"--bootstrap-token", kToken});
  k.start();
  CHECK(k.port() > 0);
  HttpTestClient c("127.0.0.1", k.port());
  CHECK(c.request("GET", "/healthz").status == 200);
  CHECK(c.request("GET", "/readyz").status == 200);
  CHECK(c.request("GET", "/v1/nodes", "", auth()).status == 200);
  CHECK(c.request("GET", "/v1/nodes", "", auth("wrong-token-000000")).status == 401);
  CHECK(c.request("GET", "/v1/nodes").status == 401);
  // Data lands where --data-dir says; the key file is private.
  struct stat st {};
  REQUIRE(::stat((dir.path() + "/kiln.key").c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);
  CHECK(st.st_size == 32);
  CHECK(::stat((dir.path() + "/kiln.db").c_str(), &st) == 0);
  CHECK(k.terminate() == 0);
}

TEST_CASE("the bootstrap token is created once and only when no admin token exists") {
  TempDir dir;
  {
    KilndProcess k(dir.path(), {"--bootstrap-token", kToken});
    k.start();
    CHECK(k.terminate() == 0);
  }
  // A second start with another bootstrap token does not add a second admin.
  KilndProcess k(dir.path(), {"--bootstrap-token", "kiln_another_token_that_is_long"});
  k.start();
  HttpTestClient c("127.0.0.1", k.port());
  CHECK(c.request("GET", "/v1/nodes", "", auth()).status == 200);
  CHECK(c.request("GET", "/v1/nodes", "", auth("kiln_another_token_that_is_long")).status == 401);
}

TEST_CASE("bad flags: a one-line message naming the flag and exit status 2") {
  std::string out, err;
  CHECK(KilndProcess::run_to_exit({"--listen", "nonsense"}, &out, &err) == 2);
  CHECK_THAT(err, Catch::Contains("--listen"));
  CHECK(std::count(err.begin(), err.end(), '\n') == 1);
  CHECK(KilndProcess::run_to_exit({"--frobnicate", "1"}, &out, &err) == 2);
  CHECK_THAT(err, Catch::Contains("--frobnicate"));
  CHECK(KilndProcess::run_to_exit({"--log-level", "loud"}, &out, &err) == 2);
  CHECK(KilndProcess::run_to_exit({"--tls-cert", "/x.pem"}, &out, &err) == 2);
  CHECK_THAT(err, Catch::Contains("--tls-key"));
  // The conductor timeout must leave room for heartbeats.
  CHECK(KilndProcess::run_to_exit({"--heartbeat-interval-ms", "5000", "--conductor-timeout-ms", "4000"}, &out, &err) == 2);
  CHECK_THAT(err, Catch::Contains("--conductor-timeout-ms"));
  // Among PostgreSQL peers, so must the default 2 s heartbeat (alone on
  // SQLite it beats once a minute and the timeout judges no one).
  CHECK(KilndProcess::run_to_exit({"--database", "postgresql://127.0.0.1:1/kiln", "--conductor-timeout-ms", "1500"},
                                  &out, &err) == 2);
  CHECK_THAT(err, Catch::Contains("--conductor-timeout-ms"));
  CHECK(KilndProcess::run_to_exit({"--advertise-url", "kiln-1:8080"}, &out, &err) == 2);
  CHECK_THAT(err, Catch::Contains("--advertise-url"));
  CHECK(KilndProcess::run_to_exit({"--help"}, &out, &err) == 0);
  CHECK_THAT(out, Catch::Contains("--bootstrap-token"));
  CHECK_THAT(out, Catch::Contains("--heartbeat-interval-ms"));
}

TEST_CASE("HTTPS when --tls-cert and --tls-key are given") {
  TempDir dir;
  SelfSignedCert cert;
  KilndProcess k(dir.path(), {"--bootstrap-token", kToken, "--tls-cert", cert.cert_file(), "--tls-key",
                              cert.key_file()});
  k.start();
  HttpTestClient tls("127.0.0.1", k.port(), true);
  CHECK(tls.request("GET", "/v1/nodes", "", auth()).status == 200);
  // Plain HTTP to the TLS port gets no HTTP answer.
  HttpTestClient plain("127.0.0.1", k.port(), false, 2s);
  CHECK_THROWS(plain.request("GET", "/healthz"));
}

TEST_CASE("the event stream delivers every transition in order over the wire") {
  TempDir dir;
  KilndProcess k(dir.path(), {"--bootstrap-token", kToken});
  k.start();
  HttpTestClient c("127.0.0.1", k.port());
  json first = get_json(c, "/v1/events?limit=1000");
  int64_t since = first["events"].empty() ? 0 : first["events"].back()["seq"].get<int64_t>();

  // Drive 4 nodes through manage and provide while a stream listens.
  const int kNodes = 4;
  std::vector<std::string> ids;
  for (int i = 0; i < kNodes; ++i) ids.push_back(create_fake_node(c, "sse-" + std::to_string(i))["id"]);
  // Each node: created + 2 (manage) + 4 (provide: cleaning, burning_in, available) transitions.
  std::thread driver([&] {
    HttpTestClient d("127.0.0.1", k.port());
    for (const auto& id : ids)
      d.request("PUT", "/v1/nodes/" + id + "/states/provision", R"({"target":"manage"})", auth());
    for (const auto& id : ids) wait_state(d, id, "manageable");
    for (const auto& id : ids)
      d.request("PUT", "/v1/nodes/" + id + "/states/provision", R"({"target":"provide"})", auth());
    for (const auto& id : ids) wait_state(d, id, "available");
  });
  HttpTestClient s("127.0.0.1", k.port());
  // created(4) + manage 2x4 + provide 3x4 transitions, plus anything else the server emits.
  auto sse = s.read_sse("/v1/events/stream?since=" + std::to_string(since), 4 + 8 + 12 + 64, 15s, auth());
  driver.join();
  CHECK(sse.status == 200);
  CHECK_THAT(sse.headers["content-type"], Catch::StartsWith("text/event-stream"));

  // Parse what arrived and compare with the stored event log.
  std::vector<int64_t> seqs;
  std::vector<std::string> streamed;
  for (const auto& ev : sse.events) {
    if (ev.rfind(":", 0) == 0) continue;  // keepalive comment
    std::istringstream lines(ev);
    std::string line, data;
    int64_t id = -1;
    while (std::getline(lines, line)) {
      if (line.rfind("id: ", 0) == 0) id = std::stoll(line.substr(4));
      if (line.rfind("data: ", 0) == 0) data = line.substr(6);
    }
    REQUIRE(id > 0);
    seqs.push_back(id);
    json e = json::parse(data);
    CHECK(e["seq"] == id);
    if (e["type"] == "provision.transition") streamed.push_back(e["node"].get<std::string>() + ":" +
                                                                e["from"].get<std::string>() + ">" +
                                                                e["to"].get<std::string>());
  }
  REQUIRE(seqs.size() >= 4 + 8 + 12);
  for (size_t i = 1; i < seqs.size(); ++i) CHECK(seqs[i] == seqs[i - 1] + 1);  // none lost, in order

  std::vector<std::string> stored;
  json all = get_json(c, "/v1/events?limit=1000&since=" + std::to_string(since));
  for (const auto& e : all["events"])
    if (e["type"] == "provision.transition" && e["seq"].get<int64_t>() <= seqs.back())
      stored.push_back(e["node"].get<std::string>() + ":" + e["from"].get<std::string>() + ">" +
                       e["to"].get<std::string>());
  CHECK(streamed == stored);
  CHECK(streamed.size() == 20);
}

TEST_CASE("SIGTERM stops kilnd gracefully, ending open event streams") {
  TempDir dir;
  KilndProcess k(dir.path(), {"--bootstrap-token", kToken});
  k.start();
  std::thread stopper([&] {
    std::this_thread::sleep_for(300ms);
    CHECK(k.terminate(5s) == 0);
  });
  HttpTestClient s("127.0.0.1", k.port());
  auto sse = s.read_sse("/v1/events/stream", 1000, 10s, auth());
  stopper.join();
  CHECK(sse.ended);
  CHECK_THAT(k.log(), Catch::Contains("shutting down"));
}

TEST_CASE("BMC passwords never reach the log, the API or the database file in clear") {
  TempDir dir;
  const std::string secret = "Very-Distinct-BMC-Password-8842";
  KilndProcess k(dir.path(), {"--bootstrap-token", kToken, "--log-level", "debug"});
  k.start();
  HttpTestClient c("127.0.0.1", k.port());
  json n = create_fake_node(c, "secretive", json::object(), secret);
  CHECK(n["bmc"]["password_set"] == true);
  CHECK(n["bmc"].find("password") == n["bmc"].end());
  c.request("PATCH", "/v1/nodes/secretive", json{{"bmc", {{"password", secret + "-2"}}}}.dump(),
            {{"Authorization", "Bearer " + kToken}, {"Content-Type", "application/merge-patch+json"}});
  c.request("PUT", "/v1/nodes/secretive/states/provision", R"({"target":"manage"})", auth());
  wait_state(c, "secretive", "manageable");
  std::string everything = c.request("GET", "/v1/nodes/secretive", "", auth()).body +
                           c.request("GET", "/v1/nodes", "", auth()).body +
                           c.request("GET", "/v1/events?limit=1000", "", auth()).body +
                           c.request("GET", "/v1/audit", "", auth()).body;
  CHECK(everything.find(secret) == std::string::npos);
  CHECK(k.terminate() == 0);
  CHECK(k.log().find(secret) == std::string::npos);
  CHECK(k.log().find(kToken) == std::string::npos);
  std::string db = slurp(dir.path() + "/kiln.db") + slurp(dir.path() + "/kiln.db-wal");
  CHECK(db.find(secret) == std::string::npos);
  CHECK(db.find(kToken) == std::string::npos);
}

TEST_CASE("a kilnd whose --key-file cannot open the database's secrets stops with a message naming the file") {
  TempDir dir;
  const std::string shared_key = dir.path() + "/shared.key";
  {
    KilndProcess k(dir.path(), {"--bootstrap-token", kToken, "--key-file", shared_key});
    k.start();
    CHECK(k.terminate() == 0);
  }
  struct stat st {};
  REQUIRE(::stat(shared_key.c_str(), &st) == 0);  // made where --key-file says
  CHECK((st.st_mode & 0777) == 0600);
  CHECK(::stat((dir.path() + "/kiln.key").c_str(), &st) != 0);  // and not in the data dir
  // Another key (the data dir's default, made now) on the same database: refused.
  std::string out, err;
  CHECK(KilndProcess::run_to_exit({"--listen", "127.0.0.1:0", "--data-dir", dir.path()}, &out, &err) == 1);
  CHECK_THAT(err, Catch::Contains(dir.path() + "/kiln.key") &&
                      Catch::Contains("is not the key this database's secrets were sealed with"));
  // The shared key again: it starts.
  KilndProcess k(dir.path(), {"--key-file", shared_key});
  k.start();
  HttpTestClient c("127.0.0.1", k.port());
  CHECK(c.request("GET", "/v1/nodes", "", auth()).status == 200);
}

TEST_CASE("one kilnd per SQLite data dir: a second one, and migrate-store, refuse while the first runs") {
  TempDir dir;
  KilndProcess k(dir.path(), {"--bootstrap-token", kToken});
  k.start();
  std::string out, err;
  CHECK(KilndProcess::run_to_exit({"--listen", "127.0.0.1:0", "--data-dir", dir.path()}, &out, &err) == 1);
  CHECK_THAT(err, Catch::Contains("another kilnd (pid ") && Catch::Contains("is using " + dir.path()));
  CHECK(KilndProcess::run_to_exit({"migrate-store", "--from", "sqlite:" + dir.path(), "--to",
                                   "postgresql://kiln@127.0.0.1:1/kiln"},
                                  &out, &err) == 1);
  CHECK_THAT(err, Catch::Contains("another kilnd") && Catch::Contains("stop it first"));
  // The first one still serves, and once it is gone (even by kill -9) the lock is free.
  HttpTestClient c("127.0.0.1", k.port());
  CHECK(c.request("GET", "/v1/nodes", "", auth()).status == 200);
  k.kill9();
  KilndProcess again(dir.path(), {});
  again.start();
  HttpTestClient c2("127.0.0.1", again.port());
  CHECK(c2.request("GET", "/v1/nodes", "", auth()).status == 200);
}

TEST_CASE("migrate-store: bad arguments are one line naming the flag, exit 2") {
  TempDir dir;
  std::string out, err;
  CHECK(KilndProcess::run_to_exit({"migrate-store"}, &out, &err) == 2);
  CHECK_THAT(err, Catch::Contains("--from is required"));
  CHECK(KilndProcess::run_to_exit({"migrate-store", "--from", dir.path()}, &out, &err) == 2);
  CHECK_THAT(err, Catch::Contains("--from must be sqlite:DIR"));
  CHECK(KilndProcess::run_to_exit({"migrate-store", "--from", "sqlite:" + dir.path() + "/none", "--to",
                                   "postgresql://x"}, &out, &err) == 2);
  CHECK_THAT(err, Catch::Contains("no SQLite database at"));
  CHECK(std::count(err.begin(), err.end(), '\n') == 1);
  CHECK(KilndProcess::run_to_exit({"--database", "mysql://x"}, &out, &err) == 2);
  CHECK_THAT(err, Catch::Contains("--database") && Catch::Contains("postgresql://"));
}
