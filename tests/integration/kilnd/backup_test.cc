// `kilnd backup` and `kilnd restore` against the real kilnd (controller/backup.h),
// and the PostgreSQL recipe of docs/scale-out.md (pg_dump -Fc, pg_restore).
//
// The round trip: a kilnd with fake nodes (BMC passwords, ports), a Redfish
// node on kiln-vbmc whose BMC needs its password, a tenant, an allocation with
// usage, tokens and events is backed up WHILE a writer keeps creating nodes
// through the API; the backup is restored into a new directory and a new kilnd
// on it must show every record, accept the old tokens, keep the event sequence
// gap-free and consistent with the nodes (no node without its event, no event
// without its node: one snapshot), and drive the Redfish BMC with the password
// it opens with the same key file. The refusals: a non-empty target, a flipped
// byte in the database or the manifest, the wrong key, an existing --to.
#include <catch2/catch.hpp>

#include <sys/stat.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <thread>

#include <nlohmann/json.hpp>

#include "common/crypto.h"
#include "kilnd_process.h"
#include "tests/support/http_test_client.h"
#include "tests/support/postgres_server.h"
#include "tests/support/skip.h"
#include "tests/support/vbmc_child.h"
#include "tests/support/wait_until.h"

using namespace kiln::testing;
using nlohmann::json;
using namespace std::chrono_literals;

namespace {

const std::string kToken = "kiln_backup_admin_token_0000001";
const std::string kBmcUser = "admin";
const std::string kBmcPassword = "s3cret-bmc";
const char* const kSshKey = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIM6jHR8C6awzVMqmZAWuFW2u1isrYanrS/Ozu11WcKN8 ci@example";
// sha256 of 4096 zero bytes
const std::string kZeroSha = "ad7facb2586fc6e966c004d7d1d16b024f5805ff7cb47c7a85dabd8b48892ca7";

Headers bearer(const std::string& token) {
  return {{"Authorization", "Bearer " + token}, {"Content-Type", "application/json"}};
}

json call(HttpTestClient& c, const std::string& method, const std::string& target, const json& body, int expect,
          const std::string& token = kToken) {
  auto r = c.request(method, target, body.is_null() ? "" : body.dump(), bearer(token));
  INFO(method << " " << target << " -> " << r.status << " " << r.body);
  REQUIRE(r.status == expect);
  return r.body.empty() ? json() : json::parse(r.body);
}

json get(HttpTestClient& c, const std::string& target, const std::string& token = kToken) {
  return call(c, "GET", target, json(), 200, token);
}

// Every item of a paged list.
json all(HttpTestClient& c, const std::string& path, const std::string& key, const std::string& token = kToken) {
  json out = json::array();
  std::string target = path + (path.find('?') == std::string::npos ? "?" : "&") + "limit=1000";
  for (;;) {
    json page = get(c, target, token);
    for (auto& n : page[key]) out.push_back(n);
    if (!page.contains("next") || page["next"].is_null()) return out;
    std::string url = page["next"];
    target = url.substr(url.find("/v1/"));
  }
}

std::map<std::string, json> by(const json& list, const std::string& key) {
  std::map<std::string, json> out;
  for (const json& x : list) out[x[key].get<std::string>()] = x;
  return out;
}

void wait_state(HttpTestClient& c, const std::string& node, const std::string& state) {
  json n;
  bool ok = wait_until([&] {
    n = get(c, "/v1/nodes/" + node);
    return n["provision_state"] == state && (n["reservation"].is_null() || n["reservation"] == "");
  }, 30s, 30ms);
  INFO(n.dump());
  REQUIRE(ok);
}

struct Cli {
  int rc;
  std::string out, err;
};

Cli kilnd(const std::vector<std::string>& args) {
  Cli r;
  r.rc = KilndProcess::run_to_exit(args, &r.out, &r.err);
  return r;
}

// A CLI failure: non-zero, exactly one line on stderr, naming `what`.
void check_refused(const Cli& r, const std::string& what) {
  INFO("rc=" << r.rc << " out=" << r.out << " err=" << r.err);
  CHECK(r.rc == 1);
  CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  CHECK_THAT(r.err, Catch::Contains(what));
}

void flip_byte(const std::string& path, std::streamoff at) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  REQUIRE(f);
  f.seekg(at);
  char c = 0;
  f.read(&c, 1);
  c = static_cast<char>(c ^ 0x01);
  f.seekp(at);
  f.write(&c, 1);
}

std::string write_key(const std::string& path, char fill) {
  std::ofstream(path, std::ios::binary) << std::string(32, fill);
  ::chmod(path.c_str(), 0600);
  return path;
}

// The node fields a restore must keep (the rest moves with time: power sync, updated_at).
json node_record(const json& n) {
  return {{"id", n["id"]},           {"name", n["name"]},       {"ports", n["ports"]},
          {"profile", n["profile"]}, {"provision_state", n["provision_state"]},
          {"tenant", n["tenant"]},   {"allocation", n["allocation"]},
          {"bmc", n["bmc"]},         {"traits", n["traits"]}};
}

json usage_record(const json& u) {
  return {{"allocation", u["allocation"]}, {"node", u["node"]},         {"tenant", u["tenant"]},
          {"profile", u["profile"]},       {"started_at", u["started_at"]}, {"ended_at", u["ended_at"]},
          {"price_micros_per_second", u["price_micros_per_second"]}};
}

void check_events_gap_free(const json& events) {
  int64_t expect = events.empty() ? 0 : events[0]["seq"].get<int64_t>();
  for (const json& e : events) {
    INFO(e.dump());
    REQUIRE(e["seq"].get<int64_t>() == expect);
    ++expect;
  }
}

}  // namespace

TEST_CASE("backup of a running kilnd under writes restores every record, its tokens and its sealed BMC passwords") {
  VbmcChild bmc({"--mockup", std::string(KILN_REPO_REDFISH_FIXTURES) + "/nvidia-dgx-h100", "--redfish-listen",
                 "127.0.0.1:0", "--user", kBmcUser, "--password", kBmcPassword, "--log-level", "warn"},
                {"redfish listening on https://"});
  const uint16_t bmc_port = bmc.port_of("redfish listening on https://");
  TempDir root;
  const std::string images = root.path() + "/img";
  std::filesystem::create_directories(images);
  for (const char* f : {"/demo.img", "/gone.img"}) std::ofstream(images + f) << std::string(4096, '\0');
  const std::string src = root.path() + "/src";
  const std::string dst = root.path() + "/dst";
  const std::string backup = root.path() + "/kiln-backup.tar";
  const std::vector<std::string> flags = {"--bootstrap-token", kToken, "--image-dir", images,
                                          "--allocation-interval-ms", "100", "--power-sync-interval", "0"};

  std::string tenant_token, operator_token, alloc_id;
  json before_nodes, before_tenants, before_alloc, before_usage, before_tokens, before_events;
  std::set<std::string> written;  // nodes the writer created (201)
  {
    KilndProcess k(src, flags);
    k.start();
    HttpTestClient c("127.0.0.1", k.port());
    for (const char* name : {"demo-os", "gone-os"})
      call(c, "POST", "/v1/images", {{"name", name}, {"kind", "os"}, {"format", "raw"},
                                     {"source", images + (std::string(name) == "demo-os" ? "/demo.img" : "/gone.img")},
                                     {"public", true}, {"size", 4096}, {"sha256", kZeroSha}}, 201);
    call(c, "POST", "/v1/tenants", {{"name", "acme"}, {"quotas", json::array({{{"profile", "cpu-lab"},
                                                                               {"kind", "baremetal"},
                                                                               {"max_nodes", 3}}})}}, 201);
    tenant_token = call(c, "POST", "/v1/tokens", {{"name", "ci"}, {"role", "tenant"}, {"tenant", "acme"}}, 201)["token"];
    operator_token = call(c, "POST", "/v1/tokens", {{"name", "ops"}, {"role", "operator"}}, 201)["token"];
    for (int i = 0; i < 3; ++i) {
      std::string name = "f" + std::to_string(i);
      char mac[32];
      std::snprintf(mac, sizeof mac, "52:54:00:aa:bb:%02x", i);
      call(c, "POST", "/v1/nodes", {{"name", name}, {"profile", "cpu-lab"},
                                    {"ports", json::array({{{"address", mac}}})},
                                    {"bmc", {{"driver", "fake"}, {"address", "bmc-" + name},
                                             {"username", "root"}, {"password", "fake-pw-" + name}}}}, 201);
      call(c, "PUT", "/v1/nodes/" + name + "/states/provision", {{"target", "manage"}}, 202);
      wait_state(c, name, "manageable");
      call(c, "PUT", "/v1/nodes/" + name + "/states/provision", {{"target", "provide"}}, 202);
      wait_state(c, name, "available");
    }
    // The Redfish node: manage reads the BMC with the password kilnd unseals.
    call(c, "POST", "/v1/nodes", {{"name", "dgx"},
                                  {"bmc", {{"driver", "redfish"}, {"address", "https://127.0.0.1:" + std::to_string(bmc_port)},
                                           {"username", kBmcUser}, {"password", kBmcPassword}, {"verify_tls", false},
                                           {"options", {{"request_timeout_s", 5}, {"power_timeout_s", 20}}}}}}, 201);
    call(c, "PUT", "/v1/nodes/dgx/states/provision", {{"target", "manage"}}, 202);
    wait_state(c, "dgx", "manageable");

    json a = call(c, "POST", "/v1/allocations", {{"name", "job"}, {"profile", "cpu-lab"}, {"kind", "baremetal"},
                                                 {"count", 2}, {"image", "demo-os"},
                                                 {"ssh_keys", json::array({kSshKey})}}, 202, tenant_token);
    alloc_id = a["id"];
    REQUIRE(wait_until([&] { return get(c, "/v1/allocations/" + alloc_id)["state"] == "ready"; }, 60s, 50ms));
    REQUIRE(wait_until([&] { return get(c, "/v1/usage", tenant_token)["usage"].size() == 2; }, 20s, 50ms));

    before_nodes = all(c, "/v1/nodes", "nodes");
    before_tenants = get(c, "/v1/tenants");
    before_alloc = get(c, "/v1/allocations/" + alloc_id);
    before_usage = get(c, "/v1/usage")["usage"];
    before_tokens = get(c, "/v1/tokens");
    before_events = all(c, "/v1/events", "events");
    REQUIRE(before_events.size() > 10);

    // The writer: node creates through the API for as long as the backup runs.
    std::atomic<bool> stop{false};
    std::atomic<int> attempts{0};
    std::vector<std::string> created;
    std::thread writer([&] {
      HttpTestClient w("127.0.0.1", k.port());
      for (int i = 0; !stop.load(); ++i) {
        std::string name = "w" + std::to_string(i);
        auto r = w.request("POST", "/v1/nodes",
                           json{{"name", name}, {"bmc", {{"driver", "fake"}, {"address", "bmc-" + name}}}}.dump(),
                           bearer(kToken));
        ++attempts;
        if (r.status == 201) created.push_back(name);
      }
    });
    // Let the writer get going, so the copy starts mid-stream.
    REQUIRE(wait_until([&] { return attempts.load() >= 20; }, 20s, 5ms));
    Cli b = kilnd({"backup", "--data-dir", src, "--to", backup});
    const int during = attempts.load();
    REQUIRE(wait_until([&] { return attempts.load() >= during + 20; }, 20s, 5ms));  // still writing after it
    stop = true;
    writer.join();
    INFO(b.out << b.err);
    REQUIRE(b.rc == 0);
    CHECK_THAT(b.out, Catch::Contains("not copied"));
    written.insert(created.begin(), created.end());
    REQUIRE(written.size() >= 40);

    // The backup file: private, and never the key.
    struct stat st{};
    REQUIRE(::stat(backup.c_str(), &st) == 0);
    CHECK((st.st_mode & 0777) == 0600);
    std::ifstream kf(src + "/kiln.key", std::ios::binary);
    std::string key((std::istreambuf_iterator<char>(kf)), std::istreambuf_iterator<char>());
    std::ifstream bf(backup, std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(bf)), std::istreambuf_iterator<char>());
    REQUIRE(key.size() == 32);
    CHECK(bytes.find(key) == std::string::npos);
    CHECK(bytes.find(kBmcPassword) == std::string::npos);  // sealed, never in clear
    CHECK(k.terminate() == 0);
  }
  // An image whose file is gone by the time of the restore.
  std::filesystem::remove(images + "/gone.img");

  Cli r = kilnd({"restore", "--from", backup, "--data-dir", dst, "--key-file", src + "/kiln.key"});
  INFO(r.out << r.err);
  REQUIRE(r.rc == 0);
  CHECK_THAT(r.out, Catch::Contains("1 image(s) marked failed"));

  KilndProcess k(dst, [&] {
    auto f = flags;
    f.insert(f.end(), {"--key-file", src + "/kiln.key"});
    return f;
  }());
  k.start();
  HttpTestClient c("127.0.0.1", k.port());

  // Every node, port, BMC (password kept: password_set), owner and state.
  json after_nodes = all(c, "/v1/nodes", "nodes");
  auto after = by(after_nodes, "name");
  for (const json& n : before_nodes) {
    INFO(n["name"]);
    REQUIRE(after.count(n["name"]));
    CHECK(node_record(after[n["name"]]) == node_record(n));
  }
  // The writer's nodes: the copy holds a prefix of them, each with its event.
  json after_events = all(c, "/v1/events", "events");
  check_events_gap_free(after_events);
  std::set<std::string> restored_w, created_events;
  for (const auto& [name, n] : after)
    if (name[0] == 'w') {
      CHECK(written.count(name));
      restored_w.insert(n["id"].get<std::string>());
    }
  for (const json& e : after_events)
    if (e["type"] == "node.created" && e["node"].is_string()) created_events.insert(e["node"].get<std::string>());
  for (const std::string& id : restored_w) CHECK(created_events.count(id));
  CHECK(after_nodes.size() == before_nodes.size() + restored_w.size());
  CHECK(restored_w.size() < written.size());  // taken while the writer ran: not every later create
  // The event log before the writer started, event for event.
  REQUIRE(after_events.size() >= before_events.size());
  for (std::size_t i = 0; i < before_events.size(); ++i) CHECK(after_events[i] == before_events[i]);

  CHECK(get(c, "/v1/tenants") == before_tenants);
  json alloc = get(c, "/v1/allocations/" + alloc_id);
  CHECK(alloc["state"] == "ready");
  CHECK(alloc["nodes"].size() == before_alloc["nodes"].size());
  CHECK(alloc["history"] == before_alloc["history"]);
  json usage = get(c, "/v1/usage")["usage"];
  REQUIRE(usage.size() == before_usage.size());
  for (std::size_t i = 0; i < usage.size(); ++i) CHECK(usage_record(usage[i]) == usage_record(before_usage[i]));
  CHECK(get(c, "/v1/tokens") == before_tokens);
  // The old tokens authenticate, with their roles and tenant.
  CHECK(get(c, "/v1/allocations", tenant_token)["allocations"].size() == 1);
  CHECK(c.request("GET", "/v1/tokens", "", bearer(operator_token)).status == 403);  // admin only
  CHECK(get(c, "/v1/nodes/f0", operator_token)["name"] == "f0");
  CHECK(c.request("GET", "/v1/nodes", "", bearer("kiln_not_a_token_at_all_000001")).status == 401);

  // Images: the one whose file is there stays ready; the other says why it is not.
  json demo = get(c, "/v1/images/demo-os");
  CHECK(demo["state"] == "ready");
  json gone = get(c, "/v1/images/gone-os");
  CHECK(gone["state"] == "failed");
  CHECK_THAT(gone["last_error"].get<std::string>(), Catch::Contains("gone.img is missing"));

  // The sealed BMC password opens with the same key file: a power verb reaches the BMC.
  call(c, "PUT", "/v1/nodes/dgx/states/power", {{"target", "off"}}, 202);
  json dgx;
  REQUIRE(wait_until([&] {
    dgx = get(c, "/v1/nodes/dgx");
    return dgx["target_power_state"].is_null() && (dgx["reservation"].is_null() || dgx["reservation"] == "");
  }, 30s, 50ms));
  INFO(dgx.dump());
  CHECK(dgx["power_state"] == "off");
  CHECK((dgx["last_error"].is_null() || dgx["last_error"] == ""));
  HttpTestClient observer("127.0.0.1", bmc_port, true);
  json system = json::parse(observer.request("GET", "/redfish/v1/Systems/DGX", "",
                                             {{"Authorization", "Basic " + kiln::base64_encode(kBmcUser + ":" + kBmcPassword)}})
                                .body);
  CHECK(system["PowerState"] == "Off");
}

TEST_CASE("kilnd restore refuses a non-empty target, a corrupted backup and the wrong key, each in one line") {
  TempDir root;
  const std::string src = root.path() + "/src";
  const std::string backup = root.path() + "/b.tar";
  {
    KilndProcess k(src, {"--bootstrap-token", kToken});
    k.start();
    HttpTestClient c("127.0.0.1", k.port());
    call(c, "POST", "/v1/nodes", {{"name", "n1"}, {"bmc", {{"driver", "fake"}, {"address", "b1"}, {"password", "pw"}}}}, 201);
    Cli b = kilnd({"backup", "--data-dir", src, "--to", backup});
    INFO(b.err);
    REQUIRE(b.rc == 0);
    // An existing --to is kept unless --overwrite.
    check_refused(kilnd({"backup", "--data-dir", src, "--to", backup}), "already exists");
    CHECK(kilnd({"backup", "--data-dir", src, "--to", backup, "--overwrite"}).rc == 0);
    k.terminate();
  }
  const std::string key = src + "/kiln.key";

  SECTION("bad arguments are exit 2") {
    Cli r = kilnd({"restore", "--from", backup});
    CHECK(r.rc == 2);
    CHECK_THAT(r.err, Catch::Contains("--data-dir is required"));
    CHECK(kilnd({"backup", "--data-dir", src}).rc == 2);
    check_refused(kilnd({"backup", "--data-dir", root.path() + "/nothing", "--to", root.path() + "/x.tar"}),
                  "no SQLite database");
  }
  SECTION("a non-empty target") {
    const std::string dst = root.path() + "/busy";
    std::filesystem::create_directories(dst);
    std::ofstream(dst + "/something") << "x";
    check_refused(kilnd({"restore", "--from", backup, "--data-dir", dst, "--key-file", key}), "is not empty");
    CHECK(!std::filesystem::exists(dst + "/kiln.db"));
    // The source itself, with its database, is the most important one to refuse.
    check_refused(kilnd({"restore", "--from", backup, "--data-dir", src}), "is not empty");
  }
  SECTION("a flipped byte in the database") {
    const auto size = static_cast<std::streamoff>(std::filesystem::file_size(backup));
    flip_byte(backup, size - 1024 - 3000);  // inside kiln.db: the last member, before the two end blocks
    const std::string dst = root.path() + "/d1";
    check_refused(kilnd({"restore", "--from", backup, "--data-dir", dst, "--key-file", key}), "SHA-256");
    CHECK(!std::filesystem::exists(dst));  // nothing half-written, not even the directory
  }
  SECTION("a flipped byte in the manifest") {
    flip_byte(backup, 512 + 40);
    const std::string dst = root.path() + "/d2";
    check_refused(kilnd({"restore", "--from", backup, "--data-dir", dst, "--key-file", key}),
                  "does not match manifest.sha256");
    CHECK(!std::filesystem::exists(dst));
  }
  SECTION("a truncated file") {
    std::filesystem::resize_file(backup, std::filesystem::file_size(backup) / 2);
    check_refused(kilnd({"restore", "--from", backup, "--data-dir", root.path() + "/d3", "--key-file", key}),
                  "truncated");
  }
  SECTION("the wrong key, a missing key, and --skip-key-check") {
    const std::string other = write_key(root.path() + "/other.key", 'k');
    const std::string dst = root.path() + "/d4";
    check_refused(kilnd({"restore", "--from", backup, "--data-dir", dst, "--key-file", other}),
                  "is not the key the backup names");
    CHECK(!std::filesystem::exists(dst));
    // kilnd's default key (DIR/kiln.key) absent: refused, naming the fingerprint.
    check_refused(kilnd({"restore", "--from", backup, "--data-dir", dst}), "no key file at " + dst + "/kiln.key");
    // The right key placed where kilnd looks for it does not make the target "non-empty".
    std::filesystem::create_directories(dst);
    std::filesystem::copy_file(key, dst + "/kiln.key");
    Cli ok = kilnd({"restore", "--from", backup, "--data-dir", dst});
    INFO(ok.err);
    CHECK(ok.rc == 0);
    // Told to proceed without the key: restored, and kilnd itself refuses the wrong key.
    const std::string dst5 = root.path() + "/d5";
    Cli skip = kilnd({"restore", "--from", backup, "--data-dir", dst5, "--key-file", other, "--skip-key-check"});
    INFO(skip.err);
    REQUIRE(skip.rc == 0);
    CHECK_THAT(skip.out, Catch::Contains("key NOT checked"));
    std::string out, err;
    int rc = KilndProcess::run_to_exit({"--data-dir", dst5, "--key-file", other, "--listen", "127.0.0.1:0"}, &out, &err);
    CHECK(rc == 1);
    CHECK_THAT(err, Catch::Contains("is not the key this database's secrets were sealed with"));
  }
}

TEST_CASE("PostgreSQL: pg_dump -Fc and pg_restore into a new database give a working kilnd with the same key") {
  if (auto missing = PostgresServer::missing_binaries()) KILN_SKIP("PostgreSQL not available: " << *missing);
  for (const char* tool : {"/pg_dump", "/pg_restore"})
    if (!std::filesystem::exists(PostgresServer::bin_dir() + tool))
      KILN_SKIP(PostgresServer::bin_dir() << tool << " is not installed");
  PostgresServer pg;
  pg.create_database("kiln_live");
  TempDir root;
  const std::string key = root.path() + "/kiln.key";
  const std::string dump = root.path() + "/kiln.dump";
  std::string tenant_token;
  json before_nodes, before_tenants, before_tokens, before_events;
  {
    KilndProcess k(root.path() + "/a", {"--bootstrap-token", kToken, "--database", pg.url("kiln_live"),
                                        "--key-file", key, "--power-sync-interval", "0"});
    k.start(true, 60s);
    HttpTestClient c("127.0.0.1", k.port());
    call(c, "POST", "/v1/tenants", {{"name", "acme"}, {"quotas", json::array({{{"profile", "cpu-lab"},
                                                                               {"kind", "baremetal"},
                                                                               {"max_nodes", 1}}})}}, 201);
    tenant_token = call(c, "POST", "/v1/tokens", {{"name", "ci"}, {"role", "tenant"}, {"tenant", "acme"}}, 201)["token"];
    for (const char* name : {"p0", "p1"}) {
      call(c, "POST", "/v1/nodes", {{"name", name}, {"profile", "cpu-lab"},
                                    {"ports", json::array({{{"address", std::string("52:54:00:00:00:0") + name[1]}}})},
                                    {"bmc", {{"driver", "fake"}, {"address", std::string("bmc-") + name},
                                             {"password", "pw"}}}}, 201);
      call(c, "PUT", std::string("/v1/nodes/") + name + "/states/provision", {{"target", "manage"}}, 202);
      wait_state(c, name, "manageable");
    }
    before_nodes = all(c, "/v1/nodes", "nodes");
    before_tenants = get(c, "/v1/tenants");
    before_tokens = get(c, "/v1/tokens");
    before_events = all(c, "/v1/events", "events");
    // The recipe's dump, taken while kilnd runs (pg_dump reads one snapshot).
    const std::string dump_cmd = PostgresServer::bin_dir() + "/pg_dump --format=custom --no-owner --file=" + dump +
                                 " '" + pg.conninfo("kiln_live") + "' 2>&1";
    REQUIRE(std::system(dump_cmd.c_str()) == 0);
    k.terminate();
  }
  pg.create_database("kiln_restored");
  const std::string restore_cmd = PostgresServer::bin_dir() + "/pg_restore --no-owner --exit-on-error --dbname='" +
                                  pg.conninfo("kiln_restored") + "' " + dump + " 2>&1";
  REQUIRE(std::system(restore_cmd.c_str()) == 0);

  KilndProcess k(root.path() + "/b", {"--bootstrap-token", kToken, "--database", pg.url("kiln_restored"),
                                      "--key-file", key, "--power-sync-interval", "0"});
  k.start(true, 60s);
  HttpTestClient c("127.0.0.1", k.port());
  auto after = by(all(c, "/v1/nodes", "nodes"), "name");
  for (const json& n : before_nodes) {
    REQUIRE(after.count(n["name"]));
    CHECK(node_record(after[n["name"]]) == node_record(n));
  }
  CHECK(get(c, "/v1/tenants") == before_tenants);
  CHECK(get(c, "/v1/tokens") == before_tokens);
  CHECK(get(c, "/v1/tenants/acme", tenant_token)["name"] == "acme");
  json events = all(c, "/v1/events", "events");
  REQUIRE(events.size() >= before_events.size());
  for (std::size_t i = 0; i < before_events.size(); ++i) CHECK(events[i] == before_events[i]);
  // It works: a verb on a restored node runs, and its event follows the old ones.
  call(c, "PUT", "/v1/nodes/p0/states/provision", {{"target", "provide"}}, 202);
  wait_state(c, "p0", "available");
  json later = all(c, "/v1/events", "events");
  check_events_gap_free(later);
  CHECK(later.size() > events.size());
}
