// The read cache (controller/api/read_cache.h) and conditional GET
// (conditional_get.h): repeated GETs are answered from memory until the
// store's next write, never across callers, never stale after a write whose
// call returned, and pollers get 304 while nothing changed. The cases that
// run the API run on SQLite and again on PostgreSQL (its generation is the
// database's snapshot), where two harnesses on one database are two kilnd
// sharing it: what one writes, the other's next request sees.
#include <catch2/catch.hpp>

#include <memory>
#include <set>
#include <string>
#include <vector>

#include "controller/api/conditional_get.h"
#include "controller/api/read_cache.h"
#include "tests/support/postgres_server.h"
#include "tests/support/skip.h"
#include "tests/unit/api/api_harness.h"

using namespace kiln;
using namespace kiln::test;
using nlohmann::json;
using V = http::bhttp::verb;

namespace {

http::Request get_request(const std::string& target, const std::string& host = "kiln.example") {
  http::Request req{V::get, target, 11};
  req.set(http::bhttp::field::host, host);
  return req;
}

http::Response answer(const std::string& body) {
  http::Response r{http::bhttp::status::ok, 11};
  r.body() = body;
  r.prepare_payload();
  return r;
}

// The read cache's counters, as /metrics shows them.
int64_t metric(ApiHarness& h, const std::string& name) {
  Resp m = h.call(V::get, "/metrics", "");
  REQUIRE(m.status == 200);
  std::size_t at = m.body.find("\n" + name + " ");
  REQUIRE(at != std::string::npos);
  return std::stoll(m.body.substr(at + name.size() + 2));
}

void set_tenant(ApiHarness& h, const std::string& id, const std::string& tenant) {
  REQUIRE(h.store().update_node_if(id, NodeCondition{}, [&](Node& n) {
    n.tenant = tenant;
    return ok_status();
  }, {}));
}

std::set<std::string> listed_ids(const Resp& r) {
  std::set<std::string> ids;
  for (const json& n : r.json["nodes"]) ids.insert(n["id"].get<std::string>());
  return ids;
}

WriteGeneration gen(uint64_t n) { return WriteGeneration{n, {}}; }

// A fresh, empty database on a PostgreSQL server this process starts on
// first use and stops at exit, as a URL; skipped where there is none.
std::string postgres_database() {
  if (auto missing = testing::PostgresServer::missing_binaries()) KILN_SKIP("PostgreSQL not available: " << *missing);
  static testing::PostgresServer server;
  static int next = 0;
  const std::string name = "read_cache_" + std::to_string(next++);
  server.create_database(name);
  return server.url(name);
}

// A harness on `database` (a fresh one by default), as a kilnd on PostgreSQL.
std::unique_ptr<ApiHarness> on_postgres(const std::string& database = postgres_database()) {
  auto h = std::make_unique<ApiHarness>(std::chrono::seconds(15), HostRegistryOptions(), nullptr, database);
  REQUIRE_FALSE(h->store().write_generation());  // others may write: no counter in memory answers for them
  REQUIRE(h->store().has_database_generation());
  return h;
}

// GETs `target` on `h` until the second of two asks in a row is answered
// from memory (a conductor heartbeat between them, a commit on PostgreSQL,
// ends what was kept: a few tries), and returns that answer.
Resp kept_answer(ApiHarness& h, const std::string& target, const std::string& token) {
  for (int tries = 0; tries < 5; ++tries) {
    Resp first = h.call(V::get, target, token);
    REQUIRE(first.status == 200);
    const int64_t hits = metric(h, "kiln_api_read_cache_hits_total");
    Resp again = h.call(V::get, target, token);
    REQUIRE(again.status == 200);
    if (metric(h, "kiln_api_read_cache_hits_total") == hits + 1) {
      CHECK(again.body == first.body);
      return again;
    }
  }
  FAIL("no answer to GET " << target << " was served from the read cache in 5 tries");
  return {};
}

}  // namespace

TEST_CASE("read cache: an answer is served only at the generation and ring it was read at", "[read_cache]") {
  api::ReadCache cache;
  const http::RequestInfo info{};
  api::Principal admin{"t1", "admin", api::Role::kAdmin, ""};
  const std::string key = api::ReadCache::key(get_request("/v1/nodes"), info, admin);
  cache.put(key, gen(7), nullptr, answer("{\"a\":1}"));
  REQUIRE(cache.find(key, gen(7), nullptr));
  CHECK(*cache.find(key, gen(7), nullptr)->body == "{\"a\":1}");
  CHECK(cache.find(key, gen(7), nullptr)->head->body().empty());
  CHECK(cache.find(key, gen(7), nullptr)->head->at(http::bhttp::field::content_length) == "7");
  CHECK_FALSE(cache.find(key, gen(8), nullptr));  // written since: dropped
  CHECK_FALSE(cache.find(key, gen(7), nullptr));  // and gone
  CHECK(cache.counts().entries == 0);
  CHECK(cache.counts().bytes == 0);

  // An older read never replaces a newer one.
  cache.put(key, gen(9), nullptr, answer("new"));
  cache.put(key, gen(8), nullptr, answer("old"));
  REQUIRE(cache.find(key, gen(9), nullptr));
  CHECK(*cache.find(key, gen(9), nullptr)->body == "new");

  // PostgreSQL's generations: the snapshot decides, the order only ranks. A
  // transaction that was running at the read and committed since leaves xmax
  // where it was and the xip list shorter: not the same generation.
  const WriteGeneration running{105, "101:105:101,103"};
  cache.put(key, running, nullptr, answer("read while 103 ran"));
  REQUIRE(cache.find(key, running, nullptr));
  CHECK_FALSE(cache.find(key, WriteGeneration{105, "101:105:101"}, nullptr));
  cache.put(key, running, nullptr, answer("read while 103 ran"));
  CHECK_FALSE(cache.find(key, WriteGeneration{105, "105:105:"}, nullptr));
}

TEST_CASE("read cache: the key separates role, tenant, target, host and TLS", "[read_cache]") {
  const http::RequestInfo plain{};
  http::RequestInfo tls{};
  tls.tls = true;
  api::Principal admin{"t1", "a", api::Role::kAdmin, ""};
  api::Principal op{"t2", "o", api::Role::kOperator, ""};
  api::Principal acme{"t3", "x", api::Role::kTenant, "acme"};
  api::Principal globex{"t4", "y", api::Role::kTenant, "globex"};
  std::set<std::string> keys;
  for (const api::Principal* who : {&admin, &op, &acme, &globex})
    for (const char* target : {"/v1/nodes", "/v1/nodes?limit=1"})
      for (const char* host : {"a.example", "b.example"})
        for (const http::RequestInfo* info : {&plain, static_cast<const http::RequestInfo*>(&tls)})
          keys.insert(api::ReadCache::key(get_request(target, host), *info, *who));
  CHECK(keys.size() == 4 * 2 * 2 * 2);
  // Two tokens of one tenant share answers; a tenant cannot be spelled into
  // the target's place (length-prefixed fields).
  api::Principal acme2{"t5", "z", api::Role::kTenant, "acme"};
  CHECK(api::ReadCache::key(get_request("/v1/nodes"), plain, acme) ==
        api::ReadCache::key(get_request("/v1/nodes"), plain, acme2));
  api::Principal odd{"t6", "w", api::Role::kTenant, "acme5:a.example"};
  CHECK(api::ReadCache::key(get_request("/v1/nodes"), plain, odd) !=
        api::ReadCache::key(get_request("/v1/nodes"), plain, acme));
}

TEST_CASE("read cache: bounded by entries and bytes", "[read_cache]") {
  api::ReadCache cache;
  const http::RequestInfo info{};
  api::Principal admin{"t1", "admin", api::Role::kAdmin, ""};
  for (std::size_t i = 0; i < api::ReadCache::kMaxEntries + 10; ++i)
    cache.put(api::ReadCache::key(get_request("/v1/nodes?marker=" + std::to_string(i)), info, admin), gen(1),
              nullptr, answer("x"));
  CHECK(cache.counts().entries <= api::ReadCache::kMaxEntries);
  const std::string big(api::ReadCache::kMaxBytes / 8, 'b');
  for (int i = 0; i < 20; ++i)
    cache.put(api::ReadCache::key(get_request("/big/" + std::to_string(i)), info, admin), gen(1), nullptr,
              answer(big));
  CHECK(cache.counts().bytes <= api::ReadCache::kMaxBytes);
  // One answer larger than a quarter of the cache is not kept at all.
  cache.put("huge", gen(1), nullptr, answer(std::string(api::ReadCache::kMaxBytes / 2, 'h')));
  CHECK_FALSE(cache.find("huge", gen(1), nullptr));
}

TEST_CASE("conditional GET: If-None-Match lists, weak tags and the star", "[read_cache]") {
  const std::string tag = api::body_etag("{\"a\":1}");
  CHECK(tag.size() == 19);
  CHECK(tag == api::body_etag("{\"a\":1}"));
  CHECK(tag != api::body_etag("{\"a\":2}"));
  CHECK(api::none_match(tag, tag));
  CHECK(api::none_match("W/" + tag, tag));
  CHECK(api::none_match("\"x\", " + tag + " ,\"y\"", tag));
  CHECK(api::none_match("*", tag));
  CHECK_FALSE(api::none_match("\"x\"", tag));
  CHECK_FALSE(api::none_match("", tag));
  CHECK_FALSE(api::none_match(tag.substr(1), tag));

  http::Request req = get_request("/v1/nodes");
  http::Reply reply;
  reply.response = answer("{\"a\":1}");
  api::answer_conditionally(req, reply);
  const http::Response& r = reply.response;
  CHECK(r.result() == http::bhttp::status::ok);
  CHECK(r[http::bhttp::field::etag] == tag);
  req.set(http::bhttp::field::if_none_match, tag);
  reply.shared_body = std::make_shared<const std::string>(r.body());
  api::answer_conditionally(req, reply);
  CHECK(r.result() == http::bhttp::status::not_modified);
  CHECK(r.body().empty());
  CHECK(reply.shared_body == nullptr);
  CHECK(r.find(http::bhttp::field::content_length) == r.end());
  CHECK(r[http::bhttp::field::etag] == tag);
}

static void repeated_get_case(ApiHarness& h) {
  json a = h.enroll("cache-a");
  json b = h.enroll("cache-b");
  const std::string id = a["id"];

  for (const std::string& target : std::vector<std::string>{"/v1/nodes?limit=10", "/v1/nodes/" + id}) {
    INFO(target);
    Resp first = h.call(V::get, target, h.admin());
    REQUIRE(first.status == 200);
    const int64_t hits = metric(h, "kiln_api_read_cache_hits_total");
    Resp again = h.call(V::get, target, h.admin());
    REQUIRE(again.status == 200);
    CHECK(again.body == first.body);
    CHECK(again.header("etag") == first.header("etag"));
    CHECK(metric(h, "kiln_api_read_cache_hits_total") == hits + 1);

    // A write through the API, then the next read shows it.
    Resp patched = h.call_json(V::patch, "/v1/nodes/" + id, h.admin(), {{"traits", {"CUSTOM_" + std::to_string(hits)}}},
                               {{}, "application/merge-patch+json"});
    REQUIRE(patched.status == 200);
    Resp after = h.call(V::get, target, h.admin());
    REQUIRE(after.status == 200);
    CHECK(after.body != first.body);
    CHECK(after.body.find("CUSTOM_" + std::to_string(hits)) != std::string::npos);
    CHECK(after.header("etag") != first.header("etag"));
  }

  // A write straight to the store (a conductor's, the allocation engine's)
  // ends it too.
  REQUIRE(h.store().update_node_if(id, NodeCondition{}, [](Node& n) {
    n.last_error = "seen by the next read";
    return ok_status();
  }, {}));
  CHECK(h.call(V::get, "/v1/nodes/" + id, h.admin()).json["last_error"] == "seen by the next read");
  CHECK(h.call(V::delete_, "/v1/nodes/" + b["id"].get<std::string>(), h.admin()).status == 204);
  Resp listed = h.call(V::get, "/v1/nodes?limit=10", h.admin());
  CHECK(listed_ids(listed) == std::set<std::string>{id});
}

TEST_CASE("read cache: conductor heartbeats leave kept answers alone, other writes end them", "[read_cache]") {
  ApiHarness h;
  const uint64_t before = *h.store().write_generation();
  REQUIRE(h.store().heartbeat_conductor(h.membership().id()));
  CHECK(*h.store().write_generation() == before);
  h.enroll("moves-it");
  CHECK(*h.store().write_generation() > before);
}

static void callers_matrix_case(ApiHarness& h) {
  json acme_node = h.enroll("acme-node");
  json globex_node = h.enroll("globex-node");
  json free_node = h.enroll("provider-node");
  set_tenant(h, acme_node["id"], "acme");
  set_tenant(h, globex_node["id"], "globex");
  struct Caller {
    std::string name, token, own;  // own: the node id it may see ("" = all)
  };
  const std::vector<Caller> callers = {
      {"admin", h.admin(), ""},
      {"operator", h.make_token("operator"), ""},
      {"acme", h.make_token("tenant", "acme", "acme"), acme_node["id"]},
      {"globex", h.make_token("tenant", "globex", "globex"), globex_node["id"]},
  };
  const std::vector<std::string> targets = {
      "/v1/nodes", "/v1/nodes?limit=2", "/v1/nodes/" + acme_node["id"].get<std::string>(),
      "/v1/nodes/" + globex_node["id"].get<std::string>(), "/v1/nodes/" + free_node["id"].get<std::string>(),
      "/v1/nodes/acme-node"};
  const std::set<std::string> all = {acme_node["id"], globex_node["id"], free_node["id"]};
  // Every caller asks every read twice, in every order of first asker: the
  // second ask of each is a kept answer, and must be what that caller may see.
  for (std::size_t first = 0; first < callers.size(); ++first) {
    REQUIRE(h.store().update_node_if(free_node["id"].get<std::string>(), NodeCondition{}, [&](Node& n) {
      n.last_error = "round " + std::to_string(first);  // a write: nothing kept survives into this round
      return ok_status();
    }, {}));
    for (int pass = 0; pass < 2; ++pass) {
      for (std::size_t k = 0; k < callers.size(); ++k) {
        const Caller& c = callers[(first + k) % callers.size()];
        for (const std::string& target : targets) {
          INFO(c.name << " " << target << " pass " << pass << " first " << callers[first].name);
          Resp r = h.call(V::get, target, c.token);
          const bool list = target.starts_with("/v1/nodes?") || target == "/v1/nodes";
          if (list) {
            REQUIRE(r.status == 200);
            std::set<std::string> ids = listed_ids(r);
            if (c.own.empty()) {
              for (const std::string& i : ids) CHECK(all.contains(i));
              if (target == "/v1/nodes") CHECK(ids == all);
            } else {
              CHECK(ids == std::set<std::string>{c.own});
            }
            CHECK((r.body.find("\"bmc\"") != std::string::npos) == c.own.empty());
            continue;
          }
          std::string asked = target.substr(std::string("/v1/nodes/").size());
          std::string resolved = asked == "acme-node" ? acme_node["id"].get<std::string>() : asked;
          const bool visible = c.own.empty() || c.own == resolved;
          CHECK(r.status == (visible ? 200 : 404));
          // A 404 names what was asked, and nothing of the node.
          if (visible) CHECK(r.json["id"] == resolved);
          else CHECK(r.body.find("provision_state") == std::string::npos);
        }
      }
    }
  }
}

static void deleted_token_case(ApiHarness& h) {
  Resp made = h.call_json(V::post, "/v1/tokens", h.admin(), {{"name", "short-lived"}, {"role", "operator"}});
  REQUIRE(made.status == 201);
  const std::string secret = made.json["token"];
  const std::string token_id = made.json["id"];
  REQUIRE(h.call(V::get, "/v1/nodes", secret).status == 200);
  REQUIRE(h.call(V::get, "/v1/nodes", secret).status == 200);  // the token and the answer are kept now
  REQUIRE(h.call(V::delete_, "/v1/tokens/" + token_id, h.admin()).status == 204);
  CHECK(h.call(V::get, "/v1/nodes", secret).status == 401);
}

static void poller_case(ApiHarness& h) {
  json n = h.enroll("polled");
  const std::string id = n["id"];
  for (const std::string& target : std::vector<std::string>{"/v1/nodes?limit=5", "/v1/nodes/" + id}) {
    INFO(target);
    Resp first = h.call(V::get, target, h.admin());
    REQUIRE(first.status == 200);
    const std::string etag = first.header("etag");
    REQUIRE_FALSE(etag.empty());
    Options conditional;
    conditional.headers["If-None-Match"] = etag;
    Resp same = h.call(V::get, target, h.admin(), "", conditional);
    CHECK(same.status == 304);
    CHECK(same.body.empty());
    CHECK(same.header("etag") == etag);
    REQUIRE(h.store().update_node_if(id, NodeCondition{}, [&](Node& m) {
      m.last_error = "changed for " + target;
      return ok_status();
    }, {}));
    Resp changed = h.call(V::get, target, h.admin(), "", conditional);
    CHECK(changed.status == 200);
    CHECK(changed.header("etag") != etag);
  }
}

// Each case above on SQLite (the names docs/security.md cites) and on
// PostgreSQL.

TEST_CASE("read cache: a repeated GET is served from memory, and a write ends it before its call returns", "[read_cache]") {
  ApiHarness h;
  REQUIRE(h.store().write_generation().has_value());  // SQLite: one kilnd sees every write
  repeated_get_case(h);
  CHECK(metric(h, "kiln_api_generation_reads_total") == 0);  // its counter costs no round trip
}

TEST_CASE("read cache on PostgreSQL: a repeated GET is served from memory, and a write ends it before its call returns",
          "[read_cache][postgresql]") {
  std::unique_ptr<ApiHarness> h = on_postgres();
  repeated_get_case(*h);
  // Each of those GETs read the database's generation (generation_reads.h);
  // asked one at a time, none shared a statement with another.
  const int64_t reads = metric(*h, "kiln_api_generation_reads_total");
  CHECK(reads > 0);
  CHECK(metric(*h, "kiln_api_generation_statements_total") == reads);
}

TEST_CASE("read cache: one caller's kept answer never reaches another (a matrix of callers and reads)", "[read_cache]") {
  ApiHarness h;
  callers_matrix_case(h);
}

TEST_CASE("read cache on PostgreSQL: one caller's kept answer never reaches another (a matrix of callers and reads)",
          "[read_cache][postgresql]") {
  callers_matrix_case(*on_postgres());
}

TEST_CASE("read cache: a deleted token is refused on the next request", "[read_cache]") {
  ApiHarness h;
  deleted_token_case(h);
}

TEST_CASE("read cache on PostgreSQL: a deleted token is refused on the next request", "[read_cache][postgresql]") {
  deleted_token_case(*on_postgres());
}

TEST_CASE("conditional GET: a poller gets 304 while nothing changed and 200 once something did", "[read_cache]") {
  ApiHarness h;
  poller_case(h);
}

TEST_CASE("conditional GET on PostgreSQL: a poller gets 304 while nothing changed and 200 once something did",
          "[read_cache][postgresql]") {
  poller_case(*on_postgres());
}

// Two kilnd on one PostgreSQL: A keeps answers and tokens, B writes, and A's
// next request sees the write, because A's generation is the database's
// snapshot, which B's commit moved before B's call returned.
TEST_CASE("read cache on PostgreSQL: what another kilnd writes is seen by the next GET, a token it revoked is refused at once",
          "[read_cache][postgresql]") {
  const std::string database = postgres_database();
  std::unique_ptr<ApiHarness> a = on_postgres(database);
  std::unique_ptr<ApiHarness> b = on_postgres(database);
  json n = a->enroll("shared");
  json gone = a->enroll("deleted-elsewhere");
  const std::string id = n["id"];
  Resp made = a->call_json(V::post, "/v1/tokens", a->admin(), {{"name", "kept-on-a"}, {"role", "operator"}});
  REQUIRE(made.status == 201);
  const std::string secret = made.json["token"];

  int round = 0;
  for (const std::string& target : std::vector<std::string>{"/v1/nodes/" + id, "/v1/nodes?limit=10"}) {
    INFO(target);
    const std::string trait = "CUSTOM_ELSEWHERE_" + std::to_string(round++);
    Resp kept = kept_answer(*a, target, secret);  // the answer and the token, kept on A
    CHECK(kept.body.find(trait) == std::string::npos);
    Resp patched = b->call_json(V::patch, "/v1/nodes/" + id, b->admin(), {{"traits", {trait}}},
                                {{}, "application/merge-patch+json"});
    REQUIRE(patched.status == 200);
    Resp after = a->call(V::get, target, secret);
    REQUIRE(after.status == 200);
    CHECK(after.body.find(trait) != std::string::npos);
    CHECK(after.header("etag") != kept.header("etag"));
  }

  // A node deleted through B leaves A's list and answers 404 on A.
  const std::string gone_id = gone["id"];
  kept_answer(*a, "/v1/nodes/" + gone_id, secret);
  Resp listed = kept_answer(*a, "/v1/nodes?limit=10", secret);
  CHECK(listed_ids(listed).contains(gone_id));
  REQUIRE(b->call(V::delete_, "/v1/nodes/" + gone_id, b->admin()).status == 204);
  CHECK(a->call(V::get, "/v1/nodes/" + gone_id, secret).status == 404);
  CHECK_FALSE(listed_ids(a->call(V::get, "/v1/nodes?limit=10", secret)).contains(gone_id));

  // The token, kept on A with the answer it just served, revoked through B.
  kept_answer(*a, "/v1/nodes/" + id, secret);
  REQUIRE(b->call(V::delete_, "/v1/tokens/" + made.json["id"].get<std::string>(), b->admin()).status == 204);
  CHECK(a->call(V::get, "/v1/nodes/" + id, secret).status == 401);
  CHECK(a->call(V::get, "/v1/nodes?limit=10", secret).status == 401);
}
