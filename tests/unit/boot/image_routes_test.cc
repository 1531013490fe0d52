// The image catalogue and the boot scripts through the real Api and the real
// HttpServer (so file replies go through sendfile, HEAD and Range over a
// socket), with a SQLite store, the conductor on the fake driver, and a
// scripted AgentAuthority standing in for the agent broker.
#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <thread>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/use_future.hpp>
#include <nlohmann/json.hpp>

#include "common/crypto.h"
#include "controller/agent/agent_authority.h"
#include "controller/api/api.h"
#include "controller/boot/image_dirs.h"
#include "controller/boot/boot_script.h"
#include "controller/conductor/conductor.h"
#include "drivers/fake/fake_driver.h"
#include "tests/support/http_test_client.h"

using namespace kiln;
using kiln::testing::Headers;
using kiln::testing::HttpTestClient;
using nlohmann::json;

namespace {

const std::string kAdmin = "kiln_boot_tests_admin_secret_0001";

// Sessions are "session-<node id>"; tokens are counted.
class ScriptedAgents : public AgentAuthority {
 public:
  explicit ScriptedAgents(NodeStore& store) : store_(store) {}
  // One token per boot attempt (the broker's rule): the same on every call.
  asio::awaitable<Result<std::string>> boot_token(const Node& node) override {
    std::lock_guard<std::mutex> lock(mu_);
    ++minted_[node.id];
    co_return std::string("tok-1");
  }
  asio::awaitable<Result<std::string>> os_secret(const Node&) override { co_return std::string(64, 'a'); }
  asio::awaitable<Result<Node>> session_node(std::string bearer) override {
    if (bearer.rfind("session-", 0) != 0) co_return Error(Code::kUnauthenticated, "unknown session");
    co_return store_.get_node(bearer.substr(8));
  }
  int minted(const std::string& node) {
    std::lock_guard<std::mutex> lock(mu_);
    return minted_[node];
  }

 private:
  NodeStore& store_;
  std::mutex mu_;
  std::map<std::string, int> minted_;
};

struct Fixture {
  Fixture(bool with_agents = true) : work(asio::make_work_guard(io)), db(2), box(SecretBox::Key{1, 2, 3}) {
    char t[] = "/tmp/kiln-boot-XXXXXX";
    REQUIRE(mkdtemp(t) != nullptr);
    dir = t;
    auto s = open_sqlite_store({.path = dir + "/kiln.db", .clock = &clock});
    REQUIRE(s);
    store = std::move(*s);
    REQUIRE(store->migrate());
    REQUIRE(bootstrap_admin_token(*store, kAdmin, clock));
    drivers.add(make_fake_driver(io.get_executor()));
    conductor = std::make_unique<Conductor>(io, *store, db, drivers, box, clock, ConductorOptions{},
                                            Logger(LogLevel::kOff));
    agents = std::make_unique<ScriptedAgents>(*store);
    settings.boot_url = "http://10.77.0.1:8080";
    ApiDeps deps{*store, db, *conductor, box, clock, Logger(LogLevel::kOff), {}};
    deps.agents = with_agents ? agents.get() : nullptr;
    deps.boot = &settings;
    auto dirs = boot::ImageDirs::open({dir + "/images"}, dir + "/images");
    REQUIRE(dirs);
    image_dirs = std::move(*dirs);
    deps.image_dirs = image_dirs.get();
    api = std::make_unique<Api>(std::move(deps));
    http::ServerOptions so;
    so.port = 0;
    server = std::make_unique<http::HttpServer>(
        io, so, [this](http::Request& r, const http::RequestInfo& i) { return api->handle(r, i); },
        [this](int st, std::string_view d) { return api->error_response(st, d); }, Logger(LogLevel::kOff));
    REQUIRE(server->start());
    thread = std::thread([this] { io.run(); });
    api->set_ready(true);
  }
  ~Fixture() {
    server->stop();
    api->shutdown();
    work.reset();
    io.stop();
    thread.join();
    db.stop();
    server.reset();
    api.reset();
    std::filesystem::remove_all(dir);
  }
  HttpTestClient client() { return HttpTestClient("127.0.0.1", server->port()); }
  // Writes into the image directory (the only place images may come from).
  std::string write_file(const std::string& name, const std::string& content) {
    std::string p = dir + "/images/" + name;
    std::ofstream(p, std::ios::binary) << content;
    return p;
  }

  asio::io_context io;
  asio::executor_work_guard<asio::io_context::executor_type> work;
  BlockingPool db;
  SecretBox box;
  SystemClock clock;
  std::string dir;
  std::unique_ptr<NodeStore> store;
  DriverRegistry drivers;
  std::unique_ptr<Conductor> conductor;
  std::unique_ptr<ScriptedAgents> agents;
  std::shared_ptr<boot::ImageDirs> image_dirs;
  boot::BootSettings settings;
  std::unique_ptr<Api> api;
  std::unique_ptr<http::HttpServer> server;
  std::thread thread;
};

Headers bearer(const std::string& t) { return {{"Authorization", "Bearer " + t}}; }

// `size` bytes of a recognisable pattern.
std::string pattern(std::size_t size) {
  std::string s(size, '\0');
  for (std::size_t i = 0; i < size; ++i) s[i] = static_cast<char>('a' + (i * 7 + i / 251) % 26);
  return s;
}

json post_image(HttpTestClient& c, const json& body, int want = 201) {
  auto r = c.request("POST", "/v1/images", body.dump(), bearer(kAdmin));
  INFO(r.body);
  REQUIRE(r.status == want);
  return json::parse(r.body);
}

bool has_field(const json& problem, const std::string& field) {
  for (const auto& e : problem["errors"])
    if (e["field"] == field) return true;
  return false;
}

// A raw HEAD (or any) request read until the server closes: the whole wire reply.
std::string raw_exchange(uint16_t port, const std::string& request) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  timeval tv{5, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  REQUIRE(::write(fd, request.data(), request.size()) == static_cast<ssize_t>(request.size()));
  std::string out;
  char buf[4096];
  while (true) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n <= 0) break;
    out.append(buf, static_cast<std::size_t>(n));
  }
  ::close(fd);
  return out;
}

}  // namespace

TEST_CASE("images: registration checks every field and names it") {
  Fixture f;
  auto c = f.client();
  const std::string content = pattern(1000);
  const std::string path = f.write_file("disk.raw", content);
  const std::string sha = sha256_hex(content);
  json good = {{"name", "ubuntu"}, {"kind", "os"}, {"format", "raw"}, {"sha256", sha}, {"size", 1000}, {"source", path}};

  json p = post_image(c, json::object(), 400);
  for (const char* field : {"/name", "/kind", "/format", "/sha256", "/size", "/source"}) {
    INFO(field);
    CHECK(has_field(p, field));
  }
  auto bad = [&](const std::string& key, json value, const std::string& field) {
    json b = good;
    b[key] = value;
    json pr = post_image(c, b, 400);
    INFO(key << " -> " << pr.dump());
    CHECK(has_field(pr, field));
  };
  bad("kind", "iso", "/kind");
  bad("format", "qcow2", "/format");
  bad("sha256", "abc", "/sha256");
  bad("size", 0, "/size");
  bad("size", 999, "/size");  // does not match the file
  bad("source", f.dir + "/images/missing.raw", "/source");
  // Nothing outside the image directory can be named, and every such path
  // gets the same answer: the API tells nothing about files outside.
  const std::string outside_message = [&] {
    json b = good;
    b["source"] = "/etc/shadow";
    return post_image(c, b, 400)["errors"][0]["message"].get<std::string>();
  }();
  REQUIRE(::symlink("/etc/passwd", (f.dir + "/images/passwd-link").c_str()) == 0);
  for (std::string outside : {std::string("/etc/passwd"), std::string("/etc/../etc/passwd"), f.dir + "/kiln.db",
                              f.dir + "/images/../kiln.db", f.dir + "/images/passwd-link", std::string("/nonexistent/x")}) {
    json b = good;
    b["source"] = outside;
    json pr = post_image(c, b, 400);
    INFO(outside << " -> " << pr.dump());
    CHECK(pr["errors"][0]["field"] == "/source");
    CHECK(pr["errors"][0]["message"] == outside_message);
    CHECK(pr.dump().find("bytes") == std::string::npos);
  }
  bad("source", "relative/path", "/source");
  bad("source", "https://example.invalid/x.raw", "/source");  // no fetcher configured here
  bad("name", "has/slash", "/name");
  bad("kernel", path, "/kernel");  // os images have no kernel
  bad("extra", 1, "/extra");
  json rd = good;
  rd["kind"] = "ramdisk";
  rd["name"] = "rd";
  CHECK(has_field(post_image(c, rd, 400), "/kernel"));

  json img = post_image(c, good);
  CHECK(img["status"] == "ready");
  CHECK(img["path"] == path);
  CHECK(img["sha256"] == sha);
  json dup = post_image(c, good, 409);
  CHECK(has_field(dup, "/name"));

  auto list = c.request("GET", "/v1/images", "", bearer(kAdmin));
  REQUIRE(list.status == 200);
  CHECK(json::parse(list.body)["images"].size() == 1);
  CHECK(c.request("GET", "/v1/images/ubuntu", "", bearer(kAdmin)).status == 200);
  CHECK(c.request("GET", "/v1/images/" + img["id"].get<std::string>(), "", bearer(kAdmin)).status == 200);
  CHECK(c.request("GET", "/v1/images").status == 401);

  auto tok = c.request("POST", "/v1/tokens", json{{"name", "t"}, {"role", "tenant"}, {"tenant", "acme"}}.dump(),
                       bearer(kAdmin));
  REQUIRE(tok.status == 201);
  std::string tenant = json::parse(tok.body)["token"];
  CHECK(c.request("GET", "/v1/images", "", bearer(tenant)).status == 403);
  CHECK(c.request("GET", "/v1/images/ubuntu/content", "", bearer(tenant)).status == 403);

  CHECK(c.request("DELETE", "/v1/images/ubuntu", "", bearer(kAdmin)).status == 204);
  CHECK(c.request("GET", "/v1/images/ubuntu", "", bearer(kAdmin)).status == 404);
  CHECK(std::filesystem::exists(path));  // a registered local file is the operator's
}

TEST_CASE("images: content with Range, HEAD, 416, ETag over the wire") {
  Fixture f;
  auto c = f.client();
  const std::string content = pattern(3 * 1024 * 1024 + 17);  // several sendfile rounds
  const std::string sha = sha256_hex(content);
  const std::string kernel = f.write_file("vmlinuz", "KERNEL-BYTES");
  post_image(c, {{"name", "deploy-ramdisk"}, {"kind", "ramdisk"}, {"format", "raw"}, {"sha256", sha},
                 {"size", content.size()}, {"source", f.write_file("initrd", content)}, {"kernel", kernel},
                 {"kernel_args", "console=ttyS0"}});

  auto whole = c.request("GET", "/v1/images/deploy-ramdisk/content");  // ramdisk: no auth
  REQUIRE(whole.status == 200);
  CHECK(whole.body.size() == content.size());
  CHECK(whole.body == content);
  CHECK(whole.header("etag") == "\"" + sha + "\"");
  CHECK(whole.header("accept-ranges") == "bytes");
  CHECK(whole.keep_alive);

  auto part = c.request("GET", "/v1/images/deploy-ramdisk/content", "", {{"Range", "bytes=1000-1999"}});
  REQUIRE(part.status == 206);
  CHECK(part.body == content.substr(1000, 1000));
  CHECK(part.header("content-range") == "bytes 1000-1999/" + std::to_string(content.size()));

  auto tail = c.request("GET", "/v1/images/deploy-ramdisk/content", "", {{"Range", "bytes=-7"}});
  REQUIRE(tail.status == 206);
  CHECK(tail.body == content.substr(content.size() - 7));

  auto resume = c.request("GET", "/v1/images/deploy-ramdisk/content", "", {{"Range", "bytes=2000000-"}});
  REQUIRE(resume.status == 206);
  CHECK(resume.body == content.substr(2000000));

  // If-Range with a stale validator: the whole body.
  auto stale = c.request("GET", "/v1/images/deploy-ramdisk/content", "",
                         {{"Range", "bytes=0-9"}, {"If-Range", "\"0000\""}});
  CHECK(stale.status == 200);
  CHECK(stale.body.size() == content.size());

  auto bad = c.request("GET", "/v1/images/deploy-ramdisk/content", "",
                       {{"Range", "bytes=" + std::to_string(content.size()) + "-"}});
  CHECK(bad.status == 416);
  CHECK(bad.header("content-range") == "bytes */" + std::to_string(content.size()));
  CHECK(bad.header("content-type") == "application/problem+json");

  auto k = c.request("GET", "/v1/images/deploy-ramdisk/kernel", "", {{"Range", "bytes=0-5"}});
  CHECK(k.status == 206);
  CHECK(k.body == "KERNEL");
  CHECK(c.request("GET", "/v1/images/nope/content").status == 404);

  // HEAD: the headers of GET, no body (the connection closes right after them).
  std::string head = raw_exchange(f.server->port(),
                                  "HEAD /v1/images/deploy-ramdisk/content HTTP/1.1\r\nHost: x\r\n"
                                  "Range: bytes=0-99\r\nConnection: close\r\n\r\n");
  CHECK(head.rfind("HTTP/1.1 206", 0) == 0);
  CHECK(head.find("Content-Length: 100\r\n") != std::string::npos);
  CHECK(head.size() == head.find("\r\n\r\n") + 4);
  std::string head404 = raw_exchange(f.server->port(),
                                     "HEAD /v1/images/nope/content HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  CHECK(head404.rfind("HTTP/1.1 404", 0) == 0);
  CHECK(head404.size() == head404.find("\r\n\r\n") + 4);
}

TEST_CASE("images: os content needs staff or the session of a node deploying it") {
  Fixture f;
  auto c = f.client();
  const std::string content = pattern(4096);
  post_image(c, {{"name", "os1"}, {"kind", "os"}, {"format", "raw"}, {"sha256", sha256_hex(content)},
                 {"size", 4096}, {"source", f.write_file("os1.raw", content)}});
  auto n = c.request("POST", "/v1/nodes",
                     json{{"name", "n1"}, {"bmc", {{"driver", "fake"}, {"address", "b"}, {"username", "u"},
                                                   {"password", "p"}}}}.dump(),
                     bearer(kAdmin));
  REQUIRE(n.status == 201);
  std::string node = json::parse(n.body)["id"];

  CHECK(c.request("GET", "/v1/images/os1/content").status == 401);
  CHECK(c.request("GET", "/v1/images/os1/content", "", bearer("kiln_nonsense")).status == 401);
  CHECK(c.request("GET", "/v1/images/os1/content", "", bearer(kAdmin)).status == 200);
  // A session whose node deploys something else: 403; once it deploys os1: 200.
  CHECK(c.request("GET", "/v1/images/os1/content", "", bearer("session-" + node)).status == 403);
  REQUIRE(f.store->update_node_if(node, {}, [](Node& x) { x.image = "os1"; return ok_status(); }, {}));
  auto ok = c.request("GET", "/v1/images/os1/content", "", bearer("session-" + node));
  CHECK(ok.status == 200);
  CHECK(ok.body == content);
  CHECK(ok.header("cache-control") == "private, no-store");
}

TEST_CASE("boot scripts: generic chain, per-MAC choice, one answer for unknown and idle MACs, one token per attempt") {
  Fixture f;
  auto c = f.client();
  auto chain = c.request("GET", "/boot/boot.ipxe");
  REQUIRE(chain.status == 200);
  CHECK(chain.body.find("chain --autofree http://10.77.0.1:8080/boot/${netX/mac}.ipxe") != std::string::npos);
  auto unknown = c.request("GET", "/boot/52:54:00:aa:bb:cc.ipxe");
  CHECK(unknown.status == 200);
  CHECK(c.request("GET", "/boot/whatever").status == 404);

  auto n = c.request("POST", "/v1/nodes",
                     json{{"name", "n1"}, {"boot_mode", "bios"},
                          {"bmc", {{"driver", "fake"}, {"address", "b"}, {"username", "u"}, {"password", "p"}}}}
                         .dump(),
                     bearer(kAdmin));
  REQUIRE(n.status == 201);
  std::string node = json::parse(n.body)["id"];
  REQUIRE(c.request("POST", "/v1/ports", json{{"node", node}, {"address", "52:54:00:AA:BB:CC"}}.dump(),
                    bearer(kAdmin)).status == 201);

  auto enroll = c.request("GET", "/boot/52:54:00:aa:bb:cc.ipxe");
  REQUIRE(enroll.status == 200);
  CHECK(enroll.body == unknown.body);  // nothing to boot: not even the name or state
  CHECK(enroll.body.find("n1") == std::string::npos);
  CHECK(c.request("GET", "/boot/52-54-00-AA-BB-CC.ipxe").status == 200);  // any MAC spelling

  auto set_state = [&](ProvisionState s, std::string step) {
    REQUIRE(f.store->update_node_if(node, {}, [&](Node& x) {
      x.provision_state = s;
      x.provision_step = step;
      return ok_status();
    }, {}));
  };
  set_state(ProvisionState::kInspecting, "");
  // No deploy ramdisk registered: the node is told so and retries.
  auto missing = c.request("GET", "/boot/52:54:00:aa:bb:cc.ipxe");
  REQUIRE(missing.status == 200);
  CHECK(missing.body == unknown.body);  // the reason is in kilnd's log

  const std::string initrd = pattern(100);
  json rd = post_image(c, {{"name", "deploy-ramdisk"}, {"kind", "ramdisk"}, {"format", "raw"},
                           {"sha256", sha256_hex(initrd)}, {"size", 100}, {"source", f.write_file("initrd", initrd)},
                           {"kernel", f.write_file("vmlinuz", "k")}, {"kernel_args", "console=ttyS0"}});
  std::string rid = rd["id"];
  auto s1 = c.request("GET", "/boot/52:54:00:aa:bb:cc.ipxe");
  REQUIRE(s1.status == 200);
  CHECK(s1.body.find("kernel http://10.77.0.1:8080/v1/images/" + rid + "/kernel initrd=initrd console=ttyS0 "
                     "kiln.api=http://10.77.0.1:8080 kiln.node=" + node + " kiln.token=tok-1 kiln.phase=ramdisk") !=
        std::string::npos);
  auto s2 = c.request("GET", "/boot/52:54:00:aa:bb:cc.ipxe");
  CHECK(s2.body == s1.body);  // the attempt's token again, never a replacement
  CHECK(f.agents->minted(node) == 2);

  set_state(ProvisionState::kDeploying, "wait_boot");
  auto local = c.request("GET", "/boot/52:54:00:aa:bb:cc.ipxe");
  CHECK(local.body.find("sanboot --no-describe --drive 0x80") != std::string::npos);
  set_state(ProvisionState::kActive, "");
  CHECK(c.request("GET", "/boot/52:54:00:aa:bb:cc.ipxe").body.find("sanboot") != std::string::npos);
}

TEST_CASE("boot scripts: ramdisk states answer 503 without an agent broker") {
  Fixture f(false);
  auto c = f.client();
  auto n = c.request("POST", "/v1/nodes",
                     json{{"name", "n1"},
                          {"bmc", {{"driver", "fake"}, {"address", "b"}, {"username", "u"}, {"password", "p"}}}}.dump(),
                     bearer(kAdmin));
  REQUIRE(n.status == 201);
  std::string node = json::parse(n.body)["id"];
  REQUIRE(c.request("POST", "/v1/ports", json{{"node", node}, {"address", "52:54:00:aa:bb:01"}}.dump(),
                    bearer(kAdmin)).status == 201);
  REQUIRE(f.store->update_node_if(node, {}, [](Node& x) {
    x.provision_state = ProvisionState::kCleaning;
    return ok_status();
  }, {}));
  auto r = c.request("GET", "/boot/52:54:00:aa:bb:01.ipxe");
  CHECK(r.status == 503);
  CHECK(r.body.find("agent broker not configured") != std::string::npos);
}
