// Three kilnd on one PostgreSQL through database outages, with operations in
// flight: the server stopped (pg_ctl stop -m fast, then -m immediate), kept
// down KILN_PG_OUTAGE_S seconds (30 by default), started again; and every
// backend terminated while writes run (a connection lost mid-transaction).
//
// While the database is down each kilnd stays up, answers every write with
// 503 problem+json carrying Retry-After, serves a read or answers it 503
// (never 500, never a hang: every request has a deadline), says in /readyz
// that the database is unreachable, and spends little CPU (no busy reconnect
// loop: utime+stime from /proc/<pid>/stat over the outage). Afterwards every
// instance is ready again by itself (pool and LISTEN connections re-opened),
// the ring lists three live conductors, a write succeeds on every instance at
// the first try, every operation started before the outage ends (a final
// state, or failed with last_error) and ran once (one power result per
// power.requested op; one activation per deploy), the event log read by
// since= is gap-free, and an event committed after recovery reaches the other
// instances' streams.
#include <catch2/catch.hpp>

#include <libpq-fe.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/integration/kilnd/kilnd_process.h"
#include "tests/support/http_test_client.h"
#include "tests/support/postgres_server.h"
#include "tests/support/skip.h"
#include "tests/support/wait_until.h"

using namespace kiln::testing;
using nlohmann::json;
using namespace std::chrono_literals;
using SteadyClock = std::chrono::steady_clock;

namespace {

const std::string kToken = "kiln_pg_outage_admin_token_0001";
const std::string kKey = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGx0c2VjdXJlZGtleWZvcnRlc3Rpbmd0aGlzMTIzNDU2 ci@test";

Headers auth(const std::string& content_type = "application/json") {
  return {{"Authorization", "Bearer " + kToken}, {"Content-Type", content_type}};
}
std::string text(const json& v) { return v.is_string() ? v.get<std::string>() : std::string(); }

// How long each outage lasts: KILN_PG_OUTAGE_S, 30 s by default.
std::chrono::seconds outage_length() {
  const char* v = std::getenv("KILN_PG_OUTAGE_S");
  int s = v != nullptr ? std::atoi(v) : 0;
  return std::chrono::seconds(s > 0 ? s : 30);
}

// utime + stime of `pid`, in clock ticks, from /proc/<pid>/stat; -1 when the
// process is gone or a zombie (it crashed).
int64_t cpu_ticks(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::size_t close = all.rfind(')');
  if (close == std::string::npos) return -1;
  std::istringstream rest(all.substr(close + 2));
  std::string field;
  std::vector<std::string> f;
  while (rest >> field) f.push_back(field);
  // After "pid (comm) ": state is field 3 of stat(5), utime 14, stime 15.
  if (f.size() < 13 || f[0] == "Z" || f[0] == "X") return -1;
  return std::stoll(f[11]) + std::stoll(f[12]);
}

bool alive(pid_t pid) { return pid > 0 && ::kill(pid, 0) == 0 && cpu_ticks(pid) >= 0; }

// A statement as the superuser on the test's server (outside kilnd).
std::string psql_scalar(const std::string& conninfo, const std::string& sql) {
  PGconn* c = PQconnectdb(conninfo.c_str());
  std::string out = "error: ";
  if (PQstatus(c) == CONNECTION_OK) {
    PGresult* r = PQexec(c, sql.c_str());
    if (PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) > 0) out = PQgetvalue(r, 0, 0);
    else out += PQresultErrorMessage(r);
    PQclear(r);
  } else {
    out += PQerrorMessage(c);
  }
  PQfinish(c);
  return out;
}

// A failure seen from a worker thread or a loop, checked on the test's
// thread at the end of a phase (Catch's macros are not thread-safe, and one
// summary beats a thousand lines).
struct Findings {
  std::vector<std::string> items;
  void add(std::string s) { items.push_back(std::move(s)); }
  void check(const std::string& what) const {
    INFO(what << ": " << items.size() << " failures; the first ones:\n"
              << [&] {
                   std::string s;
                   for (std::size_t i = 0; i < items.size() && i < 8; ++i) s += "  " + items[i] + "\n";
                   return s;
                 }());
    CHECK(items.empty());
  }
};

class Cluster {
 public:
  explicit Cluster(PostgresServer& pg) : pg_(pg) {
    pg_.create_database("outage");
    url_ = pg_.url("outage");
    const std::string key = shared_.path() + "/kiln.key";
    const std::string images = shared_.path() + "/img";
    std::filesystem::create_directories(images);
    { std::ofstream(images + "/demo.img") << std::string(4096, '\0'); }
    image_file_ = images + "/demo.img";
    std::vector<std::string> flags = {"--bootstrap-token", kToken, "--database", url_, "--key-file", key,
                                      "--image-dir", images, "--heartbeat-interval-ms", "300",
                                      "--conductor-timeout-ms", "2000", "--step-timeout", "600",
                                      "--allocation-interval-ms", "200"};
    for (int i = 0; i < 3; ++i) {
      dirs_.push_back(std::make_unique<TempDir>());
      k_.push_back(std::make_unique<KilndProcess>(dirs_.back()->path(), flags));
      k_.back()->start(true, 60s);
      c_.push_back(client(i));
    }
  }

  std::string conninfo() const { return pg_.conninfo("outage"); }
  KilndProcess& kilnd(int i) { return *k_[i]; }
  HttpTestClient& c(int i) { return *c_[i]; }
  // A fresh client of instance i with a 5 s deadline per request: a request
  // that hangs fails the test instead of hanging it.
  std::unique_ptr<HttpTestClient> client(int i) const {
    return std::make_unique<HttpTestClient>("127.0.0.1", k_[i]->port(), false, 5s);
  }
  const std::string& image_file() const { return image_file_; }
  std::string logs() const {
    std::string s;
    for (const auto& k : k_) {
      std::string l = k->log();
      s += "--- kilnd :" + std::to_string(k->port()) + "\n" + (l.size() > 4000 ? l.substr(l.size() - 4000) : l);
    }
    return s;
  }
  // Every log line of every instance that contains `needle` (an operation
  // id), each prefixed with its instance: what a failure about one operation
  // needs, which the tails above may have lost.
  std::string log_lines_with(const std::string& needle) const {
    std::string s;
    for (std::size_t i = 0; i < k_.size(); ++i) {
      std::istringstream in(k_[i]->log());
      for (std::string line; std::getline(in, line);)
        if (line.find(needle) != std::string::npos) s += "    [" + std::to_string(i) + "] " + line + "\n";
    }
    return s;
  }

 private:
  PostgresServer& pg_;
  TempDir shared_;
  std::string url_;
  std::string image_file_;
  std::vector<std::unique_ptr<TempDir>> dirs_;
  std::vector<std::unique_ptr<KilndProcess>> k_;
  std::vector<std::unique_ptr<HttpTestClient>> c_;
};

json call(HttpTestClient& c, const std::string& method, const std::string& target, const json& body, int expect,
          const std::string& content_type = "application/json") {
  auto r = c.request(method, target, body.is_null() ? "" : body.dump(), auth(content_type));
  INFO(method << " " << target << " -> " << r.status << " " << r.body);
  REQUIRE(r.status == expect);
  return r.body.empty() ? json() : json::parse(r.body);
}
json get(HttpTestClient& c, const std::string& target) { return call(c, "GET", target, json(), 200); }

json all_nodes(HttpTestClient& c) { return kiln::testing::all_nodes(c, auth()); }

// Every event from seq 1, paged by since=.
json all_events(HttpTestClient& c) {
  json out = json::array();
  int64_t since = 0;
  for (;;) {
    json page = get(c, "/v1/events?limit=1000&since=" + std::to_string(since));
    for (auto& e : page["events"]) out.push_back(e);
    if (page["events"].empty() || page["next"].is_null()) return out;
    since = out.back()["seq"].get<int64_t>();
  }
}

bool transient(const std::string& s) {
  static const std::set<std::string> t = {"verifying", "inspecting", "cleaning", "burning_in", "deploying", "validating"};
  return t.count(s) != 0;
}
bool failed(const std::string& s) { return s.size() > 7 && s.substr(s.size() - 7) == "_failed"; }

// Whether the problem+json reply `r` is a 503 with Retry-After.
std::string check_unavailable(const TestResponse& r) {
  if (r.status != 503) return "status " + std::to_string(r.status) + " " + r.body.substr(0, 200);
  if (r.header("content-type").find("application/problem+json") != 0) return "503 as " + r.header("content-type");
  const std::string ra = r.header("retry-after");
  if (ra.empty() || ra.find_first_not_of("0123456789") != std::string::npos)
    return "503 without a Retry-After in seconds (\"" + ra + "\"): " + r.body.substr(0, 200);
  return "";
}

// The operations put in flight just before an outage: power actions, deploys
// and an allocation, spread over the three instances.
struct InFlight {
  std::vector<std::string> power_nodes, deploy_nodes;
  std::string allocation;
};

// One outage: stop the server with `mode`, hold it down, check what each
// instance answers and what it spends, start it again.
void outage(Cluster& cl, PostgresServer& pg, const std::string& mode) {
  const auto length = outage_length();
  std::vector<std::unique_ptr<HttpTestClient>> cs;
  std::vector<int64_t> ticks_before;
  for (int i = 0; i < 3; ++i) cs.push_back(cl.client(i));
  pg.stop(mode);
  const auto down_at = SteadyClock::now();
  for (int i = 0; i < 3; ++i) ticks_before.push_back(cpu_ticks(cl.kilnd(i).pid()));
  Findings writes, reads, ready, hangs;
  int n = 0, reads_served = 0;
  while (SteadyClock::now() - down_at < length) {
    for (int i = 0; i < 3; ++i) {
      HttpTestClient& c = *cs[i];
      const std::string where = "instance " + std::to_string(i) + " (" + mode + "): ";
      try {
        auto w = c.request("POST", "/v1/nodes",
                           json{{"name", "down-" + mode + "-" + std::to_string(n) + "-" + std::to_string(i)},
                                {"bmc", {{"driver", "fake"}, {"address", "bmc"}}}}
                               .dump(),
                           auth());
        if (std::string why = check_unavailable(w); !why.empty()) writes.add(where + "POST /v1/nodes: " + why);
        auto v = c.request("PUT", "/v1/nodes/n0/states/power", json{{"target", "off"}}.dump(), auth());
        if (std::string why = check_unavailable(v); !why.empty()) writes.add(where + "PUT power: " + why);
        auto r = c.request("GET", "/v1/nodes?limit=5", "", auth());
        if (r.status == 200) ++reads_served;
        else if (std::string why = check_unavailable(r); !why.empty()) reads.add(where + "GET /v1/nodes: " + why);
        auto z = c.request("GET", "/readyz");
        if (z.status != 503 || z.body.find("database") == std::string::npos)
          ready.add(where + "/readyz " + std::to_string(z.status) + " " + z.body.substr(0, 200));
      } catch (const std::exception& e) {
        hangs.add(where + e.what());
        c.reconnect();
      }
    }
    ++n;
    std::this_thread::sleep_for(1s);
  }
  const double down_s = std::chrono::duration<double>(SteadyClock::now() - down_at).count();
  std::vector<double> cpu_share;
  for (int i = 0; i < 3; ++i) {
    const int64_t after = cpu_ticks(cl.kilnd(i).pid());
    INFO("instance " << i << " is gone after the " << mode << " outage:\n" << cl.logs());
    REQUIRE(after >= 0);
    REQUIRE(alive(cl.kilnd(i).pid()));
    cpu_share.push_back(static_cast<double>(after - ticks_before[i]) / static_cast<double>(::sysconf(_SC_CLK_TCK)) /
                        down_s);
  }
  pg.start();
  WARN("outage (" << mode << ", " << down_s << " s, " << n << " rounds): CPU per instance " << cpu_share[0] << ", "
                  << cpu_share[1] << ", " << cpu_share[2] << " of a core; reads served " << reads_served);
  writes.check("writes during the " + mode + " outage must be 503 problem+json with Retry-After");
  reads.check("reads during the " + mode + " outage are served or 503 problem+json");
  ready.check("/readyz during the " + mode + " outage is 503 naming the database");
  hangs.check("requests during the " + mode + " outage are answered within 5 s");
  // The requests above cost a little; a reconnect loop without a pause costs
  // a whole core. ASan builds are slow, hence a fifth of a core.
  for (double share : cpu_share) CHECK(share < 0.2);
}

// After an outage: every instance ready, the ring whole, writes on every
// instance, LISTEN connections back, events delivered across instances.
void recovered(Cluster& cl, const std::string& conninfo, const std::string& tag) {
  const auto up_at = SteadyClock::now();
  for (int i = 0; i < 3; ++i) {
    auto c = cl.client(i);
    bool ok = wait_until([&] {
      try {
        return c->request("GET", "/readyz").status == 200;
      } catch (const std::exception&) {
        c->reconnect();
        return false;
      }
    }, 30s, 100ms);
    INFO("instance " << i << " not ready 30 s after the server came back:\n" << cl.logs());
    REQUIRE(ok);
  }
  const double ready_s = std::chrono::duration<double>(SteadyClock::now() - up_at).count();
  // Writes on each instance succeed at the first try: no pooled connection
  // that died with the server is handed to one. Eight at once per instance,
  // so that every connection of each pool is borrowed.
  Findings refused;
  std::mutex refused_mu;
  std::vector<std::thread> writers;
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 8; ++j)
      writers.emplace_back([&, i, j] {
        const std::string name = "up-" + tag + "-" + std::to_string(i) + "-" + std::to_string(j);
        std::string why;
        try {
          auto r = cl.client(i)->request(
              "POST", "/v1/nodes", json{{"name", name}, {"bmc", {{"driver", "fake"}, {"address", "bmc"}}}}.dump(),
              auth());
          if (r.status != 201) why = std::to_string(r.status) + " " + r.body.substr(0, 300);
        } catch (const std::exception& e) {
          why = e.what();
        }
        std::lock_guard<std::mutex> l(refused_mu);
        if (!why.empty()) refused.add("instance " + std::to_string(i) + " " + name + ": " + why);
      });
  for (auto& t : writers) t.join();
  refused.check("writes right after the " + tag + " outage succeed");
  // The ring re-forms: every instance sees three live conductors.
  for (int i = 0; i < 3; ++i) {
    bool whole = wait_until([&] {
      int live = 0;
      const json cs = get(cl.c(i), "/v1/conductors")["conductors"];
      for (const auto& x : cs) live += x["alive"].get<bool>() ? 1 : 0;
      return live == 3;
    }, 15s, 100ms);
    INFO("instance " << i << " does not see three live conductors");
    CHECK(whole);
  }
  // Every instance LISTENs again.
  std::string listeners;
  bool listening = wait_until([&] {
    listeners = psql_scalar(conninfo,
                            "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'kiln-events-listener'");
    return listeners == "3";
  }, 15s, 100ms);
  INFO("listening connections: " << listeners);
  CHECK(listening);
  WARN("after the " << tag << " outage: every instance ready " << ready_s << " s after the server came back");
}

// An event committed through instance i reaches instance i+1's stream (its
// store's listener is woken by the LISTEN connection, or at worst by the
// listener's poll), for each i. The stream is filtered to a node made for it.
void cross_instance_events(Cluster& cl, const std::string& tag) {
  for (int i = 0; i < 3; ++i) {
    const std::string name = "sse-" + tag + "-" + std::to_string(i);
    call(cl.c(i), "POST", "/v1/nodes", {{"name", name}, {"bmc", {{"driver", "fake"}, {"address", "bmc"}}}}, 201);
    const json mine = get(cl.c(i), "/v1/events?limit=10&node=" + name)["events"];
    REQUIRE(!mine.empty());
    const int64_t since = mine.back()["seq"].get<int64_t>();
    SseResult sse;
    auto reader = cl.client((i + 1) % 3);
    std::thread t([&] {
      sse = reader->read_sse("/v1/events/stream?node=" + name + "&since=" + std::to_string(since), 1, 10s, auth());
    });
    std::this_thread::sleep_for(300ms);
    call(cl.c(i), "PUT", "/v1/nodes/" + name + "/states/power", {{"target", "on"}}, 202);
    t.join();
    INFO(tag << ": instance " << (i + 1) % 3 << "'s stream after a power verb on " << i);
    REQUIRE(sse.events.size() == 1u);
    CHECK(sse.events[0].find("power.requested") != std::string::npos);
    CHECK(wait_until([&] { return get(cl.c(i), "/v1/nodes/" + name)["target_power_state"].is_null(); }, 10s));
  }
}

// Puts operations in flight through the three instances: each power verb and
// deploy takes several seconds on the fake driver, so they span the stop.
InFlight start_operations(Cluster& cl, const std::vector<std::string>& power, const std::vector<std::string>& deploy,
                          bool allocate) {
  InFlight f;
  int k = 0;
  for (const std::string& n : power) {
    call(cl.c(k++ % 3), "PUT", "/v1/nodes/" + n + "/states/power", {{"target", "on"}}, 202);
    f.power_nodes.push_back(n);
  }
  for (const std::string& n : deploy) {
    call(cl.c(k++ % 3), "PUT", "/v1/nodes/" + n + "/states/provision", {{"target", "deploy"}, {"image", "demo-os"}},
         202);
    f.deploy_nodes.push_back(n);
  }
  if (allocate)
    f.allocation = call(cl.c(k++ % 3), "POST", "/v1/allocations",
                        {{"name", "job"}, {"tenant", "acme"}, {"profile", "cpu-lab"}, {"kind", "baremetal"},
                         {"count", 2}, {"image", "demo-os"}, {"ssh_keys", json::array({kKey})}},
                        202)["id"];
  std::this_thread::sleep_for(500ms);
  return f;
}

// Every operation ends: no node held or in a transient state, a failed one
// says why; the allocation ready or failed with its reason.
void operations_end(Cluster& cl, const InFlight& f, const std::string& tag) {
  json nodes;
  bool settled = wait_until([&] {
    nodes = all_nodes(cl.c(0));
    for (const auto& n : nodes) {
      if (!n["reservation"].is_null() && n["reservation"] != "") return false;
      if (transient(n["provision_state"])) return false;
      if (!n["target_power_state"].is_null()) return false;
    }
    return true;
  }, 90s, 250ms);
  {
    Findings stuck;
    for (const auto& n : nodes)
      if ((!n["reservation"].is_null() && n["reservation"] != "") || transient(n["provision_state"]) ||
          !n["target_power_state"].is_null())
        stuck.add(text(n["name"]) + " " + text(n["provision_state"]) + " held by " + text(n["reservation"]) +
                  " step " + text(n["provision_step"]) + " power target " + n["target_power_state"].dump() +
                  " last_error " + text(n["last_error"]));
    stuck.check("operations stuck 90 s after the " + tag + " outage");
    REQUIRE(settled);
  }
  Findings silent;
  for (const auto& n : nodes)
    if (failed(n["provision_state"]) && text(n["last_error"]).empty())
      silent.add(text(n["name"]) + " " + text(n["provision_state"]) + " without last_error");
  silent.check("failed nodes after the " + tag + " outage say why");
  for (const std::string& name : f.deploy_nodes) {
    json n = get(cl.c(1), "/v1/nodes/" + name);
    INFO(tag << ": " << n.dump());
    CHECK((n["provision_state"] == "active" || n["provision_state"] == "deploy_failed"));
  }
  if (!f.allocation.empty()) {
    json a;
    bool ended = wait_until([&] {
      a = get(cl.c(2), "/v1/allocations/" + f.allocation);
      return a["state"] == "ready" || a["state"] == "failed";
    }, 60s, 250ms);
    INFO(tag << ": allocation " << a.dump());
    CHECK(ended);
    if (a["state"] == "failed") CHECK(!text(a["last_error"]).empty());
  }
}

// The event log, read through every instance by since=: gap-free and
// strictly increasing, the same on all three; each power operation has one
// result; no deploy reached active twice without a deploy between.
void events_consistent(Cluster& cl) {
  json events = all_events(cl.c(0));
  Findings gaps, twice;
  int64_t prev = 0;
  std::map<std::string, int> requested, results;  // power op -> count
  std::map<std::string, int> active_since_deploy;  // node -> activations since its last deploy
  for (const auto& e : events) {
    const int64_t seq = e["seq"].get<int64_t>();
    if (seq != prev + 1) gaps.add("seq " + std::to_string(seq) + " after " + std::to_string(prev));
    prev = seq;
    const std::string type = e["type"];
    const std::string op = e["detail"].is_object() ? text(e["detail"].value("op", json())) : "";
    if (type == "power.requested") ++requested[op];
    // The runner's result, or a takeover's power.failed when another
    // instance judged the runner dead (after an outage every heartbeat is
    // stale): both name the op they end.
    if (type == "power.transition" || type == "power.failed") {
      if (!op.empty()) ++results[op];
    }
    if (type == "provision.transition") {
      const std::string node = text(e["node"]);
      if (text(e["to"]) == "deploying") active_since_deploy[node] = 0;
      if (text(e["to"]) == "active" && ++active_since_deploy[node] > 1) twice.add(node + " active twice in one deploy");
    }
  }
  // What the log says about an operation that did not run once: its events
  // (by op or previous_op) and every kilnd log line naming it.
  auto story = [&](const std::string& op) {
    std::string s;
    for (const auto& e : events)
      if (e["detail"].is_object() &&
          (text(e["detail"].value("op", json())) == op || text(e["detail"].value("previous_op", json())) == op))
        s += "\n    event " + e.dump();
    return s + "\n" + cl.log_lines_with(op);
  };
  for (const auto& [op, n] : requested) {
    if (n != 1) twice.add("power op " + op + " requested " + std::to_string(n) + " times" + story(op));
    if (results[op] != 1) twice.add("power op " + op + " has " + std::to_string(results[op]) + " results" + story(op));
  }
  gaps.check("the event log is gap-free");
  twice.check("every operation ran once");
  for (int i = 1; i < 3; ++i) {
    json other = all_events(cl.c(i));
    INFO("instance " << i << " reads another event log");
    CHECK(other.size() >= events.size());
    for (std::size_t j = 0; j < events.size() && j < other.size(); ++j)
      if (other[j]["seq"] != events[j]["seq"] || other[j]["type"] != events[j]["type"]) {
        CHECK(other[j].dump() == events[j].dump());
        break;
      }
  }
}

// Nodes made available (fake driver), then slowed down so that each power
// action and each step takes a while; a tenant with a cpu-lab quota.
void enrol(Cluster& cl, const std::vector<std::string>& names, const std::string& profile) {
  for (const std::string& name : names) {
    json body = {{"name", name}, {"bmc", {{"driver", "fake"}, {"address", "bmc-" + name}}}};
    if (!profile.empty()) body["profile"] = profile;
    call(cl.c(0), "POST", "/v1/nodes", body, 201);
    call(cl.c(1), "PUT", "/v1/nodes/" + name + "/states/provision", {{"target", "manage"}}, 202);
  }
  auto state_is = [&](const std::string& want) {
    return [&cl, &names, want] {
      for (const std::string& n : names)
        if (get(cl.c(2), "/v1/nodes/" + n)["provision_state"] != want) return false;
      return true;
    };
  };
  REQUIRE(wait_until(state_is("manageable"), 60s, 100ms));
  for (const std::string& name : names)
    call(cl.c(2), "PUT", "/v1/nodes/" + name + "/states/provision", {{"target", "provide"}}, 202);
  REQUIRE(wait_until(state_is("available"), 60s, 100ms));
  for (const std::string& name : names)
    call(cl.c(0), "PATCH", "/v1/nodes/" + name,
         {{"bmc", {{"options", {{"power_delay_ms", 2500}, {"step_delay_ms", 2500}}}}}}, 200,
         "application/merge-patch+json");
}

bool pg_missing() { return PostgresServer::missing_binaries().has_value(); }

}  // namespace

TEST_CASE("pg outage: three kilnd through a fast then an immediate stop of PostgreSQL, operations in flight") {
  if (auto missing = PostgresServer::missing_binaries()) KILN_SKIP("PostgreSQL not available: " << *missing);
  const auto started = SteadyClock::now();
  PostgresServer pg;
  Cluster cl(pg);
  call(cl.c(0), "POST", "/v1/images",
       {{"name", "demo-os"}, {"kind", "os"}, {"format", "raw"}, {"source", cl.image_file()}, {"public", true},
        {"size", 4096}, {"sha256", "ad7facb2586fc6e966c004d7d1d16b024f5805ff7cb47c7a85dabd8b48892ca7"}},
       201);
  call(cl.c(1), "POST", "/v1/tenants",
       {{"name", "acme"},
        {"quotas", json::array({{{"profile", "cpu-lab"}, {"kind", "baremetal"}, {"max_nodes", 4}}})}},
       201);
  enrol(cl, {"n0", "n1", "n2", "n3", "n4", "n5"}, "");
  enrol(cl, {"a0", "a1", "a2"}, "cpu-lab");

  InFlight first = start_operations(cl, {"n0", "n1"}, {"n2", "n3"}, true);
  outage(cl, pg, "fast");
  recovered(cl, cl.conninfo(), "fast");
  operations_end(cl, first, "fast");
  cross_instance_events(cl, "fast");
  events_consistent(cl);

  InFlight second = start_operations(cl, {"n4"}, {"n5"}, false);
  outage(cl, pg, "immediate");
  recovered(cl, cl.conninfo(), "immediate");
  operations_end(cl, second, "immediate");
  cross_instance_events(cl, "immediate");
  events_consistent(cl);
  WARN("the whole case took " << std::chrono::duration<double>(SteadyClock::now() - started).count() << " s");
}

TEST_CASE("pg outage: backends terminated while writes run, every 2xx write is there") {
  if (pg_missing()) KILN_SKIP("PostgreSQL not available: " << *PostgresServer::missing_binaries());
  PostgresServer pg;
  Cluster cl(pg);
  // Writers on every instance, each creating nodes with names of its own.
  std::atomic<bool> stop{false};
  std::vector<std::vector<std::pair<std::string, int>>> answered(3);
  std::vector<Findings> broken(3);
  std::vector<std::thread> writers;
  for (int i = 0; i < 3; ++i)
    writers.emplace_back([&, i] {
      auto c = cl.client(i);
      for (int j = 0; !stop; ++j) {
        const std::string name = "w" + std::to_string(i) + "-" + std::to_string(j);
        try {
          auto r = c->request("POST", "/v1/nodes",
                              json{{"name", name}, {"bmc", {{"driver", "fake"}, {"address", "bmc"}}}}.dump(), auth());
          answered[i].push_back({name, r.status});
          if (r.status != 201) {
            if (std::string why = check_unavailable(r); !why.empty()) broken[i].add(name + ": " + why);
          }
        } catch (const std::exception& e) {
          broken[i].add(name + ": " + e.what());
          c->reconnect();
        }
      }
    });
  // Every kilnd backend killed mid-whatever, five times over three seconds.
  int terminated = 0;
  for (int round = 0; round < 5; ++round) {
    std::this_thread::sleep_for(600ms);
    std::string n = psql_scalar(cl.conninfo(),
                                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
                                " WHERE datname = 'outage' AND pid <> pg_backend_pid()");
    INFO(n);
    REQUIRE(n.find("error") == std::string::npos);
    terminated += std::stoi(n);
  }
  std::this_thread::sleep_for(1s);
  stop = true;
  for (auto& t : writers) t.join();
  for (int i = 0; i < 3; ++i) broken[i].check("writes on instance " + std::to_string(i) + " answered 201 or 503");
  recovered(cl, cl.conninfo(), "terminate");
  cross_instance_events(cl, "terminate");
  // Every 201 is there; count what the terminations refused.
  std::set<std::string> present;
  for (const auto& n : all_nodes(cl.c(0))) present.insert(n["name"].get<std::string>());
  Findings lost;
  int created = 0, refused = 0;
  for (const auto& a : answered)
    for (const auto& [name, status] : a) {
      if (status == 201) {
        ++created;
        if (!present.count(name)) lost.add(name + " answered 201 and is not there");
      } else {
        ++refused;
      }
    }
  lost.check("every write answered 201 is committed");
  WARN("terminated " << terminated << " backends under " << created << " created and " << refused
                     << " refused writes");
  CHECK(terminated >= 15);
  events_consistent(cl);
}
