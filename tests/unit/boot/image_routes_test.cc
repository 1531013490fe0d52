// The image catalogue and the boot scripts through the real Api and the real
// HttpServer (so file replies go through sendfile, HEAD and Range over a
// socket), with a SQLite store, the conductor on the fake driver, and a
// scripted AgentAuthority standing in for the agent broker.
#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/use_future.hpp>
#include <nlohmann/json.hpp>

#include "common/crypto.h"
#include "common/ids.h"
#include "controller/agent/agent_authority.h"
#include "controller/api/api.h"
#include "controller/api/image_input.h"
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

// What a Fixture may change from the defaults.
struct FixtureOptions {
  bool with_agents = true;
  bool with_image_dirs = true;
  uint64_t upload_max = uint64_t{64} << 30;
  std::chrono::seconds read_timeout{30};
  boot::LeaseBinding binding = boot::LeaseBinding::kLeaseFile;
};

struct Fixture {
  explicit Fixture(bool with_agents = true) : Fixture(FixtureOptions{with_agents}) {}
  explicit Fixture(FixtureOptions opt) : work(asio::make_work_guard(io)), db(2), box(SecretBox::Key{1, 2, 3}) {
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
    // The test client is the machine DHCP leased the test MACs to.
    settings.binding = opt.binding;
    settings.lease_file = dir + "/dhcp.leases";
    std::ofstream(settings.lease_file) << "0 52:54:00:aa:bb:cc 127.0.0.1 * *\n0 52:54:00:aa:bb:01 127.0.0.1 * *\n";
    ApiDeps deps{*store, db, *conductor, box, clock, Logger(LogLevel::kOff), {}};
    deps.agents = opt.with_agents ? agents.get() : nullptr;
    deps.boot = &settings;
    auto dirs = boot::ImageDirs::open({dir + "/images"}, dir + "/images");
    REQUIRE(dirs);
    image_dirs = std::move(*dirs);
    if (opt.with_image_dirs) deps.image_dirs = image_dirs.get();
    deps.image_upload_max = opt.upload_max;
    api = std::make_unique<Api>(std::move(deps));
    http::ServerOptions so;
    so.port = 0;
    so.read_timeout = opt.read_timeout;
    so.streamed_body = [this](const http::RequestHeader& h) { return api->streamed_body(h); };
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

// Registers an os image whose bytes are to be uploaded; returns its id.
std::string register_upload(HttpTestClient& c, const std::string& name, const std::string& content) {
  json img = post_image(c, {{"name", name}, {"kind", "os"}, {"format", "raw"}, {"sha256", sha256_hex(content)},
                            {"size", content.size()}, {"source", "upload"}});
  CHECK(img["status"] == "awaiting_upload");
  CHECK(img["path"] == "");
  return img["id"];
}

// The request line and headers of an upload (the body follows separately).
std::string upload_head(const std::string& image, const std::string& token, const std::string& framing,
                        const std::string& extra = "", const std::string& type = "application/octet-stream") {
  return "PUT /v1/images/" + image + "/content HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + token +
         "\r\nContent-Type: " + type + "\r\n" + framing + "\r\n" + extra + "\r\n";
}

std::string with_length(std::size_t n) { return "Content-Length: " + std::to_string(n); }

// `body` as chunks of `piece` bytes in chunked transfer coding, with the last chunk.
std::string chunked(std::string_view body, std::size_t piece) {
  std::string out;
  char size[32];
  for (std::size_t at = 0; at < body.size(); at += piece) {
    std::string_view c = body.substr(at, piece);
    std::snprintf(size, sizeof size, "%zx\r\n", c.size());
    out.append(size).append(c).append("\r\n");
  }
  return out + "0\r\n\r\n";
}

// Files in the image directory whose names start with '.' (upload temporaries).
std::vector<std::string> hidden_files(const Fixture& f) {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(f.dir + "/images")) {
    std::string name = e.path().filename().string();
    if (!name.empty() && name.front() == '.') out.push_back(name);
  }
  return out;
}

// Waits (up to 5 s) until the image directory has no upload temporaries.
bool no_temporaries_soon(const Fixture& f) {
  for (int i = 0; i < 100; ++i) {
    if (hidden_files(f).empty()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}

std::string image_status(HttpTestClient& c, const std::string& id) {
  auto r = c.request("GET", "/v1/images/" + id, "", bearer(kAdmin));
  REQUIRE(r.status == 200);
  return json::parse(r.body)["status"];
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

  REQUIRE(c.request("POST", "/v1/tenants", json{{"name", "acme"}}.dump(), bearer(kAdmin)).status == 201);
  auto tok = c.request("POST", "/v1/tokens", json{{"name", "t"}, {"role", "tenant"}, {"tenant", "acme"}}.dump(),
                       bearer(kAdmin));
  REQUIRE(tok.status == 201);
  std::string tenant = json::parse(tok.body)["token"];
  // A tenant lists public images only: ubuntu is private, so the list is
  // empty and the image itself answers as if missing.
  auto listed = c.request("GET", "/v1/images", "", bearer(tenant));
  CHECK(listed.status == 200);
  CHECK(json::parse(listed.body)["images"].empty());
  CHECK(c.request("GET", "/v1/images/ubuntu", "", bearer(tenant)).status == 404);
  CHECK(c.request("PATCH", "/v1/images/ubuntu", json{{"public", true}}.dump(), bearer(tenant)).status == 403);
  CHECK(c.request("GET", "/v1/images/ubuntu/content", "", bearer(tenant)).status == 404);  // hidden: as if missing

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

  // Without credentials a private os image is a 404, as a missing one is;
  // credentials that are no one's are a 401 whatever the image.
  CHECK(c.request("GET", "/v1/images/os1/content").status == 404);
  CHECK(c.request("GET", "/v1/images/os1/content", "", bearer("kiln_nonsense")).status == 401);
  CHECK(c.request("GET", "/v1/images/no-such/content", "", bearer("kiln_nonsense")).status == 401);
  CHECK(c.request("GET", "/v1/images/os1/content", "", bearer(kAdmin)).status == 200);
  // A session whose node deploys something else: 404 (os1 is private); once it deploys os1: 200.
  CHECK(c.request("GET", "/v1/images/os1/content", "", bearer("session-" + node)).status == 404);
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

TEST_CASE("boot scripts: with nothing to bind to, per-MAC scripts are refused, and off serves them to anyone") {
  for (boot::LeaseBinding mode : {boot::LeaseBinding::kUnbound, boot::LeaseBinding::kOff, boot::LeaseBinding::kLeaseFile}) {
    FixtureOptions opt;
    opt.binding = mode;
    Fixture f(opt);
    auto c = f.client();
    // A node deploying, its ramdisk registered: its script would carry a boot token.
    auto n = c.request("POST", "/v1/nodes",
                       json{{"name", "n1"},
                            {"bmc", {{"driver", "fake"}, {"address", "b"}, {"username", "u"}, {"password", "p"}}}}
                           .dump(),
                       bearer(kAdmin));
    REQUIRE(n.status == 201);
    std::string node = json::parse(n.body)["id"];
    // One MAC leased to the test client, one leased to nobody.
    REQUIRE(c.request("POST", "/v1/ports", json{{"node", node}, {"address", "52:54:00:aa:bb:01"}}.dump(),
                      bearer(kAdmin)).status == 201);
    REQUIRE(c.request("POST", "/v1/ports", json{{"node", node}, {"address", "52:54:00:aa:bb:02"}}.dump(),
                      bearer(kAdmin)).status == 201);
    const std::string initrd = pattern(100);
    post_image(c, {{"name", "deploy-ramdisk"}, {"kind", "ramdisk"}, {"format", "raw"},
                   {"sha256", sha256_hex(initrd)}, {"size", 100}, {"source", f.write_file("initrd", initrd)},
                   {"kernel", f.write_file("vmlinuz", "k")}});
    REQUIRE(f.store->update_node_if(node, {}, [](Node& x) {
      x.provision_state = ProvisionState::kInspecting;
      return ok_status();
    }, {}));
    INFO("mode " << static_cast<int>(mode));
    CHECK(c.request("GET", "/boot/boot.ipxe").status == 200);  // the generic chain holds nothing per node
    auto leased = c.request("GET", "/boot/52:54:00:aa:bb:01.ipxe");
    auto unleased = c.request("GET", "/boot/52:54:00:aa:bb:02.ipxe");
    switch (mode) {
      case boot::LeaseBinding::kUnbound:
        CHECK(leased.status == 404);
        CHECK(unleased.status == 404);
        CHECK(leased.body.find("kiln.token") == std::string::npos);
        CHECK(f.agents->minted(node) == 0);
        break;
      case boot::LeaseBinding::kOff:
        CHECK(leased.status == 200);
        CHECK(unleased.status == 200);
        CHECK(leased.body.find("kiln.token=") != std::string::npos);
        CHECK(unleased.body.find("kiln.token=") != std::string::npos);
        break;
      case boot::LeaseBinding::kLeaseFile:
        CHECK(leased.status == 200);
        CHECK(leased.body.find("kiln.token=") != std::string::npos);
        CHECK(unleased.status == 200);  // the one "nothing to boot" answer
        CHECK(unleased.body.find("kiln.token") == std::string::npos);
        break;
    }
  }
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

TEST_CASE("routes answer 503 naming the service this kilnd runs without, after authentication") {
  // This fixture's kilnd has no agent broker, allocation engine or
  // hypervisor registry, and (here) no image directory: the routes that
  // declare them (api::Needs) refuse before their handlers run.
  FixtureOptions opt;
  opt.with_image_dirs = false;
  Fixture f(opt);
  struct Case {
    const char* method;
    const char* target;
    const char* names;
  };
  const Case cases[] = {
      {"POST", "/v1/agent/lookup", "agent broker"},
      {"POST", "/v1/agent/heartbeat", "agent broker"},
      {"POST", "/v1/agent/results", "agent broker"},
      {"POST", "/v1/allocations", "allocations"},
      {"DELETE", "/v1/allocations/a1", "allocations"},
      {"POST", "/v1/hosts", "hypervisor"},
      {"PUT", "/v1/images/i1/content", "image directory"},
  };
  for (const Case& k : cases) {
    INFO(k.method << " " << k.target);
    // A client each: a refused streamed body may end the connection.
    auto r = f.client().request(k.method, k.target, "{}", bearer(kAdmin));
    CHECK(r.status == 503);
    CHECK(r.header("content-type") == "application/problem+json");
    CHECK(r.body.find(k.names) != std::string::npos);
    if (std::string(k.target).find("/agent/") == std::string::npos) {
      auto anonymous = f.client().request(k.method, k.target, "{}");
      CHECK(anonymous.status == 401);  // who is asking is settled first
    }
  }
  // Reads of the same resources do not need the service.
  CHECK(f.client().request("GET", "/v1/allocations", "", bearer(kAdmin)).status == 200);
  CHECK(f.client().request("GET", "/v1/hosts", "", bearer(kAdmin)).status == 200);
}

TEST_CASE("images: upload streams a body in pieces, checks it, then serves the same bytes") {
  Fixture f;
  auto c = f.client();
  const std::string content = pattern(3 * 1024 * 1024 + 123);
  const std::string id = register_upload(c, "uploaded", content);
  CHECK(c.request("GET", "/v1/images/" + id + "/content", "", bearer(kAdmin)).status == 409);  // nothing yet

  // Content-Length, the body sent in 256 KiB writes after the header.
  c.send_raw(upload_head(id, kAdmin, with_length(content.size())));
  for (std::size_t at = 0; at < content.size(); at += 256 * 1024) c.send_raw(content.substr(at, 256 * 1024));
  auto up = c.read_response();
  INFO(up.body);
  REQUIRE(up.status == 200);
  json img = json::parse(up.body);
  CHECK(img["status"] == "ready");
  CHECK(img["path"] == f.dir + "/images/" + id);
  CHECK(img["source"] == "upload");
  CHECK(up.keep_alive);
  CHECK(hidden_files(f).empty());
  CHECK(std::filesystem::file_size(f.dir + "/images/" + id) == content.size());
  CHECK((std::filesystem::status(f.dir + "/images/" + id).permissions() & std::filesystem::perms::others_all) ==
        std::filesystem::perms::none);

  auto whole = c.request("GET", "/v1/images/" + id + "/content", "", bearer(kAdmin));
  REQUIRE(whole.status == 200);
  CHECK(whole.body == content);
  CHECK(whole.header("etag") == "\"" + sha256_hex(content) + "\"");
  auto part = c.request("GET", "/v1/images/uploaded/content", "", {{"Authorization", "Bearer " + kAdmin},
                                                                   {"Range", "bytes=1048570-1048589"}});
  REQUIRE(part.status == 206);
  CHECK(part.body == content.substr(1048570, 20));

  // Content once: a second upload is refused before its body is read.
  c.send_raw(upload_head(id, kAdmin, with_length(content.size())));
  auto again = c.read_response();
  CHECK(again.status == 409);
  c.close();

  // Chunked, with Expect: 100-continue answered once the route reads the body.
  const std::string small = pattern(700 * 1024 + 5);
  const std::string id2 = register_upload(c, "chunked", small);
  c.send_raw(upload_head(id2, kAdmin, "Transfer-Encoding: chunked", "Expect: 100-continue\r\n"));
  CHECK(c.read_response().status == 100);
  c.send_raw(chunked(small, 100 * 1024 + 1));
  auto up2 = c.read_response();
  INFO(up2.body);
  REQUIRE(up2.status == 200);
  CHECK(c.request("GET", "/v1/images/chunked/content", "", bearer(kAdmin)).body == small);

  // Deleting an uploaded image removes kilnd's copy.
  CHECK(c.request("DELETE", "/v1/images/" + id, "", bearer(kAdmin)).status == 204);
  CHECK(!std::filesystem::exists(f.dir + "/images/" + id));
}

TEST_CASE("images: a wrong checksum or size is 400 naming the field and leaves no file") {
  Fixture f;
  auto c = f.client();
  const std::string content = pattern(2 * 1024 * 1024);
  const std::string id = register_upload(c, "img", content);
  std::string wrong = content;
  wrong[1000] = '#';

  c.send_raw(upload_head(id, kAdmin, with_length(wrong.size())) + wrong);
  auto bad = c.read_response();
  INFO(bad.body);
  REQUIRE(bad.status == 400);
  CHECK(bad.header("content-type") == "application/problem+json");
  json p = json::parse(bad.body);
  CHECK(has_field(p, "/sha256"));
  CHECK(p.dump().find(sha256_hex(wrong)) != std::string::npos);
  CHECK(hidden_files(f).empty());
  CHECK(!std::filesystem::exists(f.dir + "/images/" + id));
  CHECK(image_status(c, id) == "awaiting_upload");

  // A declared length other than the registered size: refused before the body.
  c.send_raw(upload_head(id, kAdmin, with_length(content.size() + 1)));
  auto len = c.read_response();
  CHECK(len.status == 400);
  CHECK(has_field(json::parse(len.body), "/size"));
  c.close();
  // Chunked and longer than registered, or shorter.
  c.send_raw(upload_head(id, kAdmin, "Transfer-Encoding: chunked") + chunked(content + "x", 512 * 1024));
  auto longer = c.read_response();
  CHECK(longer.status == 400);
  CHECK(has_field(json::parse(longer.body), "/size"));
  c.close();
  c.send_raw(upload_head(id, kAdmin, "Transfer-Encoding: chunked") + chunked(content.substr(1), 512 * 1024));
  auto shorter = c.read_response();
  CHECK(shorter.status == 400);
  CHECK(has_field(json::parse(shorter.body), "/size"));
  CHECK(no_temporaries_soon(f));
  CHECK(image_status(c, id) == "awaiting_upload");

  // The right bytes still go in afterwards.
  c.send_raw(upload_head(id, kAdmin, with_length(content.size())) + content);
  CHECK(c.read_response().status == 200);
}

TEST_CASE("images: who may upload, and to which images") {
  Fixture f;
  auto c = f.client();
  const std::string content = pattern(4096);
  const std::string id = register_upload(c, "img", content);
  REQUIRE(c.request("POST", "/v1/tenants", json{{"name", "acme"}}.dump(), bearer(kAdmin)).status == 201);
  auto tok = c.request("POST", "/v1/tokens", json{{"name", "t"}, {"role", "tenant"}, {"tenant", "acme"}}.dump(),
                       bearer(kAdmin));
  REQUIRE(tok.status == 201);
  const std::string tenant = json::parse(tok.body)["token"];
  auto op = c.request("POST", "/v1/tokens", json{{"name", "o"}, {"role", "operator"}}.dump(), bearer(kAdmin));
  REQUIRE(op.status == 201);
  const std::string operator_token = json::parse(op.body)["token"];

  // Refusals come before the body: with Expect: 100-continue no 100 is sent.
  auto refused = [&](const std::string& image, const std::string& token,
                     const std::string& type = "application/octet-stream") {
    HttpTestClient k = f.client();
    k.send_raw(upload_head(image, token, with_length(content.size()), "Expect: 100-continue\r\n", type));
    return k.read_response();
  };
  CHECK(refused(id, tenant).status == 403);
  CHECK(refused(id, "kiln_no_such_token_0000000000000000").status == 401);
  CHECK(refused("no-such-image", kAdmin).status == 404);
  CHECK(refused(id, kAdmin, "application/json").status == 415);
  const std::string local = f.write_file("local.raw", content);
  post_image(c, {{"name", "local"}, {"kind", "os"}, {"format", "raw"}, {"sha256", sha256_hex(content)},
                 {"size", content.size()}, {"source", local}});
  auto has_source = refused("local", kAdmin);
  CHECK(has_source.status == 409);
  CHECK(json::parse(has_source.body)["detail"].get<std::string>().find("upload") != std::string::npos);
  CHECK(image_status(c, id) == "awaiting_upload");

  // Operators are staff: they may.
  c.send_raw(upload_head("img", operator_token, with_length(content.size())) + content);
  CHECK(c.read_response().status == 200);
}

TEST_CASE("images: 413 over the upload maximum, and JSON routes keep their 4 MiB limit") {
  FixtureOptions o;
  o.upload_max = 1024 * 1024;
  Fixture f(o);
  auto c = f.client();
  // An image bigger than uploads may be cannot be registered for one.
  json big = post_image(c, {{"name", "big"}, {"kind", "os"}, {"format", "raw"}, {"sha256", sha256_hex("x")},
                            {"size", 2 * 1024 * 1024}, {"source", "upload"}}, 400);
  CHECK(has_field(big, "/size"));
  const std::string content = pattern(1000);
  const std::string id = register_upload(c, "img", content);

  c.send_raw(upload_head(id, kAdmin, with_length(1024 * 1024 + 1)));
  auto over = c.read_response();
  CHECK(over.status == 413);
  CHECK(over.header("content-type") == "application/problem+json");
  c.close();
  // A chunk that would pass the maximum: 413 as soon as its size is read.
  c.send_raw(upload_head(id, kAdmin, "Transfer-Encoding: chunked") + "200000\r\n" + std::string(1000, 'a'));
  auto chunk = c.read_response();
  CHECK(chunk.status == 413);
  c.close();
  CHECK(no_temporaries_soon(f));
  CHECK(image_status(c, id) == "awaiting_upload");

  // Every other route reads its body whole, within the server's body limit, as before.
  const std::string huge(4 * 1024 * 1024 + 1, ' ');
  c.send_raw("POST /v1/images HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + kAdmin +
             "\r\nContent-Type: application/json\r\nContent-Length: " + std::to_string(huge.size()) + "\r\n\r\n");
  CHECK(c.read_response().status == 413);
  c.close();
  c.send_raw("POST /v1/images HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + kAdmin +
             "\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n" + chunked(huge, 1024 * 1024));
  CHECK(c.read_response().status == 413);
  c.close();
}

TEST_CASE("images: a client gone half-way or too slow leaves no file and the image unchanged") {
  FixtureOptions o;
  o.read_timeout = std::chrono::seconds(1);
  Fixture f(o);
  auto c = f.client();
  const std::string content = pattern(1024 * 1024);
  const std::string id = register_upload(c, "img", content);

  {
    HttpTestClient gone = f.client();
    gone.send_raw(upload_head(id, kAdmin, with_length(content.size())) + content.substr(0, content.size() / 2));
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    gone.close();
  }
  CHECK(no_temporaries_soon(f));
  CHECK(image_status(c, id) == "awaiting_upload");

  // Slow loris: the body stops; the read timeout still ends the connection.
  {
    HttpTestClient slow = f.client();
    slow.send_raw(upload_head(id, kAdmin, with_length(content.size())) + content.substr(0, 1000));
    auto started = std::chrono::steady_clock::now();
    CHECK(slow.wait_closed(std::chrono::seconds(8)));
    CHECK(std::chrono::steady_clock::now() - started < std::chrono::seconds(6));
  }
  CHECK(no_temporaries_soon(f));
  CHECK(image_status(c, id) == "awaiting_upload");

  // The claims were released: a whole upload now succeeds.
  c.send_raw(upload_head(id, kAdmin, with_length(content.size())) + content);
  CHECK(c.read_response().status == 200);
  CHECK(image_status(c, id) == "ready");
}

TEST_CASE("images: upload temporaries a crash left behind are removed when the image directories open, live ones kept") {
  char t[] = "/tmp/kiln-dirs-XXXXXX";
  REQUIRE(mkdtemp(t) != nullptr);
  const std::string own = std::string(t) + "/images";
  REQUIRE(::mkdir(own.c_str(), 0700) == 0);
  for (const char* name : {".0a1b.upload-00ff", ".0a1b.upload-11ee", "keep.raw", ".0a1b.part"})
    std::ofstream(own + "/" + name) << "x";
  // Left by a crash two hours ago; the other is being written by another kilnd
  // sharing the directory (its file changes all the time).
  const struct timespec two_hours_ago[2] = {{::time(nullptr) - 7200, 0}, {::time(nullptr) - 7200, 0}};
  REQUIRE(::utimensat(AT_FDCWD, (own + "/.0a1b.upload-00ff").c_str(), two_hours_ago, 0) == 0);
  auto dirs = boot::ImageDirs::open({own}, own);
  REQUIRE(dirs);
  CHECK(!std::filesystem::exists(own + "/.0a1b.upload-00ff"));
  CHECK(std::filesystem::exists(own + "/.0a1b.upload-11ee"));
  CHECK(std::filesystem::exists(own + "/keep.raw"));
  CHECK(std::filesystem::exists(own + "/.0a1b.part"));  // a download's, not ours to remove
  std::filesystem::remove_all(t);
}

TEST_CASE("images: public ones are listed to tenants without where they come from, and staff flip the flag") {
  Fixture f;
  auto c = f.client();
  REQUIRE(c.request("POST", "/v1/tenants", json{{"name", "acme"}}.dump(), bearer(kAdmin)).status == 201);
  auto tok = c.request("POST", "/v1/tokens", json{{"name", "t"}, {"role", "tenant"}, {"tenant", "acme"}}.dump(),
                       bearer(kAdmin));
  REQUIRE(tok.status == 201);
  const std::string tenant = json::parse(tok.body)["token"];
  const std::string content = pattern(4096);
  json pub = post_image(c, {{"name", "ubuntu-22.04"}, {"kind", "os"}, {"format", "raw"},
                            {"sha256", sha256_hex(content)}, {"size", content.size()}, {"source", "upload"},
                            {"public", true}, {"ssh_user", "ubuntu"}});
  CHECK(pub["public"] == true);
  CHECK(pub["ssh_user"] == "ubuntu");
  register_upload(c, "internal-debug", content);
  // The login user is a login name, and only os images have one.
  for (const char* bad : {"Root", "1user", "-x", "a b", "", "abcdefghijklmnopqrstuvwxyz0123456"}) {
    INFO(bad);
    CHECK(has_field(post_image(c, {{"name", "x"}, {"kind", "os"}, {"format", "raw"}, {"sha256", sha256_hex(content)},
                                   {"size", content.size()}, {"source", "upload"}, {"ssh_user", bad}}, 400),
                    "/ssh_user"));
  }
  CHECK(has_field(post_image(c, {{"name", "x"}, {"kind", "os"}, {"format", "raw"}, {"sha256", sha256_hex(content)},
                                 {"size", content.size()}, {"source", "upload"}, {"public", "yes"}}, 400),
                  "/public"));

  auto listed = c.request("GET", "/v1/images", "", bearer(tenant));
  REQUIRE(listed.status == 200);
  json images = json::parse(listed.body)["images"];
  REQUIRE(images.size() == 1);
  CHECK(images[0]["name"] == "ubuntu-22.04");
  CHECK(images[0]["ssh_user"] == "ubuntu");  // the tenant needs it to log in
  CHECK_FALSE(images[0].contains("source"));
  CHECK_FALSE(images[0].contains("path"));
  CHECK_FALSE(images[0].contains("last_error"));
  CHECK(c.request("GET", "/v1/images/ubuntu-22.04", "", bearer(tenant)).status == 200);
  auto priv = c.request("GET", "/v1/images/internal-debug", "", bearer(tenant));
  auto none = c.request("GET", "/v1/images/no-such-image", "", bearer(tenant));
  CHECK(priv.status == 404);
  CHECK(none.status == 404);
  CHECK(json::parse(priv.body)["title"] == json::parse(none.body)["title"]);

  const std::string merge = "application/merge-patch+json";
  auto patch = [&](const std::string& name, const json& body, const std::string& token) {
    return c.request("PATCH", "/v1/images/" + name, body.dump(), {{"Authorization", "Bearer " + token},
                                                                   {"Content-Type", merge}});
  };
  CHECK(patch("internal-debug", {{"public", true}}, tenant).status == 403);
  auto flipped = patch("internal-debug", {{"public", true}}, kAdmin);
  REQUIRE(flipped.status == 200);
  CHECK(json::parse(flipped.body)["public"] == true);
  CHECK(json::parse(flipped.body)["ssh_user"] == "root");  // registered without one
  CHECK(c.request("GET", "/v1/images/internal-debug", "", bearer(tenant)).status == 200);
  CHECK(has_field(json::parse(patch("internal-debug", {{"name", "x"}}, kAdmin).body), "/name"));
  CHECK(has_field(json::parse(patch("internal-debug", json::object(), kAdmin).body), "/public"));
  CHECK(patch("no-such-image", {{"public", true}}, kAdmin).status == 404);
}

namespace {

// The wire reply with what differs per request anyway (the date, the request
// id) taken out and every occurrence of `id` replaced by "{id}": two replies
// that are equal after this tell the caller nothing more than the id it sent.
std::string normalized_reply(std::string wire, const std::string& id) {
  std::string out;
  std::size_t at = 0;
  const std::size_t head_end = wire.find("\r\n\r\n");
  while (at < wire.size()) {
    std::size_t eol = wire.find("\r\n", at);
    if (eol == std::string::npos || at > head_end) {
      out += wire.substr(at);
      break;
    }
    std::string line = wire.substr(at, eol + 2 - at);
    std::string lower = line;
    for (char& ch : lower) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    if (lower.rfind("date:", 0) != 0 && lower.rfind("x-request-id:", 0) != 0) out += line;
    at = eol + 2;
  }
  for (std::size_t p = out.find(id); p != std::string::npos; p = out.find(id, p)) out.replace(p, id.size(), "{id}");
  return out;
}

int wire_status(const std::string& wire) {
  return wire.size() >= 12 && wire.rfind("HTTP/1.1 ", 0) == 0 ? std::stoi(wire.substr(9, 3)) : 0;
}

}  // namespace

TEST_CASE("images: a hidden image answers exactly as a missing one on every route, for every caller") {
  Fixture f;
  auto c = f.client();
  auto token = [&](const json& body) {
    auto r = c.request("POST", "/v1/tokens", body.dump(), bearer(kAdmin));
    REQUIRE(r.status == 201);
    return json::parse(r.body)["token"].get<std::string>();
  };
  for (const char* t : {"acme", "globex"})
    REQUIRE(c.request("POST", "/v1/tenants", json{{"name", t}}.dump(), bearer(kAdmin)).status == 201);
  const std::string tenant_a = token({{"name", "a"}, {"role", "tenant"}, {"tenant", "acme"}});
  const std::string tenant_b = token({{"name", "b"}, {"role", "tenant"}, {"tenant", "globex"}});
  const std::string operator_token = token({{"name", "o"}, {"role", "operator"}});
  // The agent session of a node that deploys some other image.
  auto n = c.request("POST", "/v1/nodes",
                     json{{"name", "n1"}, {"bmc", {{"driver", "fake"}, {"address", "b"}, {"username", "u"},
                                                   {"password", "p"}}}}.dump(),
                     bearer(kAdmin));
  REQUIRE(n.status == 201);
  const std::string node = json::parse(n.body)["id"];
  REQUIRE(f.store->update_node_if(node, {}, [](Node& x) { x.image = "something-else"; return ok_status(); }, {}));

  const std::string content = pattern(4096);
  const std::string sha = sha256_hex(content);
  auto os_image = [&](const std::string& name, bool pub) {
    return post_image(c, {{"name", name}, {"kind", "os"}, {"format", "raw"}, {"sha256", sha}, {"size", 4096},
                          {"source", f.write_file(name + ".raw", content)}, {"public", pub}})["id"]
        .get<std::string>();
  };
  struct Target {
    const char* what;
    std::string id;
    bool is_public;
  };
  const std::vector<Target> targets = {
      {"missing", new_uuid(), false},
      {"private", os_image("provider-os", false), false},
      {"public", os_image("ubuntu", true), true},
      {"ramdisk", post_image(c, {{"name", "deploy-ramdisk"}, {"kind", "ramdisk"}, {"format", "raw"}, {"sha256", sha},
                                 {"size", 4096}, {"source", f.write_file("initrd", content)},
                                 {"kernel", f.write_file("vmlinuz", "KERNEL")}})["id"]
                      .get<std::string>(),
       false},
  };
  REQUIRE(targets[0].id.size() == targets[1].id.size());  // same Content-Length unless the bodies differ

  struct Caller {
    const char* who;
    std::string authorization;  // "" = none
    bool staff;
  };
  const std::vector<Caller> callers = {
      {"anonymous", "", false},
      {"unknown token", "Bearer kiln_000000000000000000000000000000000000000000000000", false},
      {"tenant A", "Bearer " + tenant_a, false},
      {"tenant B", "Bearer " + tenant_b, false},
      {"agent session of another node", "Bearer session-" + node, false},
      {"operator", "Bearer " + operator_token, true},  // last: its DELETEs remove the images
  };

  // Per route and caller, the status for missing, private, public, ramdisk.
  using Row = std::array<int, 4>;
  struct RouteCase {
    std::string method, pattern;
    std::map<std::string, Row> want;
  };
  const Row r401 = {401, 401, 401, 401}, r403 = {403, 403, 403, 403}, r405 = {405, 405, 405, 405};
  const Row content_row = {404, 404, 403, 200};  // a tenant or another node's session
  auto bytes_route = [&](const std::string& method, const std::string& pattern, Row staff) {
    return RouteCase{method, pattern, {{"anonymous", {404, 404, 404, 200}}, {"unknown token", r401},
                                       {"tenant A", content_row}, {"tenant B", content_row},
                                       {"agent session of another node", content_row}, {"operator", staff}}};
  };
  auto staff_route = [&](const std::string& method, const std::string& pattern, Row staff) {
    return RouteCase{method, pattern, {{"anonymous", r401}, {"unknown token", r401}, {"tenant A", r403},
                                       {"tenant B", r403}, {"agent session of another node", r401},
                                       {"operator", staff}}};
  };
  const std::vector<RouteCase> routes = {
      {"GET", "/v1/images/{id}", {{"anonymous", r401}, {"unknown token", r401}, {"tenant A", {404, 404, 200, 404}},
                                  {"tenant B", {404, 404, 200, 404}}, {"agent session of another node", r401},
                                  {"operator", {404, 200, 200, 200}}}},
      {"HEAD", "/v1/images/{id}", {{"anonymous", r405}, {"unknown token", r405}, {"tenant A", r405}, {"tenant B", r405},
                                   {"agent session of another node", r405}, {"operator", r405}}},
      bytes_route("GET", "/v1/images/{id}/content", {404, 200, 200, 200}),
      bytes_route("HEAD", "/v1/images/{id}/content", {404, 200, 200, 200}),
      bytes_route("GET", "/v1/images/{id}/kernel", {404, 404, 404, 200}),
      bytes_route("HEAD", "/v1/images/{id}/kernel", {404, 404, 404, 200}),
      staff_route("PATCH", "/v1/images/{id}", {404, 200, 200, 200}),
      staff_route("PUT", "/v1/images/{id}/content", {404, 409, 409, 409}),  // none takes an upload
      staff_route("DELETE", "/v1/images/{id}", {404, 204, 204, 204}),  // last: removes them
  };
  // Every image route the API serves is in the table above.
  for (const auto& [method, pattern] : f.api->routes()) {
    if (pattern.rfind("/v1/images/{id}", 0) != 0) continue;
    bool listed = false;
    for (const RouteCase& rc : routes) listed = listed || (rc.method == method && rc.pattern == pattern);
    INFO(method << " " << pattern << " must be in the matrix: add it");
    CHECK(listed);
  }

  auto request = [&](const RouteCase& rc, const Caller& who, const Target& t) {
    std::string path = rc.pattern;
    path.replace(path.find("{id}"), 4, t.id);
    std::string body;
    std::string head = rc.method + " " + path + " HTTP/1.1\r\nHost: x\r\nConnection: close\r\n";
    if (!who.authorization.empty()) head += "Authorization: " + who.authorization + "\r\n";
    if (rc.method == "PATCH") {
      body = json{{"public", t.is_public}}.dump();  // the value it has: nothing changes
      head += "Content-Type: application/merge-patch+json\r\n";
    } else if (rc.method == "PUT") {
      body = "abcd";
      head += "Content-Type: application/octet-stream\r\n";
    }
    if (!body.empty()) head += "Content-Length: " + std::to_string(body.size()) + "\r\n";
    return raw_exchange(f.server->port(), head + "\r\n" + body);
  };

  int cells = 0;
  for (const RouteCase& rc : routes) {
    for (const Caller& who : callers) {
      std::vector<std::string> replies;
      for (std::size_t i = 0; i < targets.size(); ++i) {
        std::string wire = request(rc, who, targets[i]);
        ++cells;
        INFO(rc.method << " " << rc.pattern << " as " << who.who << " on " << targets[i].what << ":\n"
                       << wire.substr(0, 600));
        CHECK(wire_status(wire) == rc.want.at(who.who)[i]);
        replies.push_back(std::move(wire));
      }
      if (who.staff) continue;  // staff see every image: nothing to hide from them
      INFO(rc.method << " " << rc.pattern << " as " << who.who << ": missing vs private");
      CHECK(normalized_reply(replies[0], targets[0].id) == normalized_reply(replies[1], targets[1].id));
    }
  }
  CHECK(cells == static_cast<int>(routes.size() * callers.size() * targets.size()));
}

TEST_CASE("images: hostile Range headers over the wire: one range 206, several the whole body, past the end 416") {
  Fixture f;
  auto c = f.client();
  const std::string content = pattern(10000);
  const std::string sha = sha256_hex(content);
  const std::string etag = "\"" + sha + "\"";
  post_image(c, {{"name", "rd"}, {"kind", "ramdisk"}, {"format", "raw"}, {"sha256", sha}, {"size", content.size()},
                 {"source", f.write_file("initrd", content)}, {"kernel", f.write_file("vmlinuz", "KERNEL-BYTES")}});
  const std::string size = std::to_string(content.size());

  auto get = [&](const Headers& h) { return c.request("GET", "/v1/images/rd/content", "", h); };
  auto whole = [&](const kiln::testing::TestResponse& r) {
    CHECK(r.status == 200);
    CHECK(r.header("content-range").empty());
    CHECK(r.header("content-type") == "application/octet-stream");
    CHECK(r.header("content-length") == size);
    CHECK(r.body == content);
  };
  auto partial = [&](const kiln::testing::TestResponse& r, std::size_t first, std::size_t last) {
    CHECK(r.status == 206);
    CHECK(r.header("content-range") == "bytes " + std::to_string(first) + "-" + std::to_string(last) + "/" + size);
    CHECK(r.body == content.substr(first, last - first + 1));
  };

  partial(get({{"Range", "bytes=-10"}}), 9990, 9999);
  partial(get({{"Range", "bytes=9000-"}}), 9000, 9999);
  partial(get({{"Range", "bytes=0-99999999999999999999999"}}), 0, 9999);  // past uint64_t: the end
  partial(get({{"Range", "bytes= 5-9 "}}), 5, 9);
  partial(get({{"Range", "bytes=5-9,"}}), 5, 9);
  {
    INFO("several ranges, overlapping, a thousand of them, invalid, spaced inside: the whole body");
    std::string thousand = "bytes=0-0";
    for (int i = 1; i < 1000; ++i) thousand += ",0-0";
    for (const std::string& h : {std::string("bytes=0-1,3-4"), thousand, std::string("bytes=5-3"),
                                 std::string("bytes=0 - 9"), std::string("bytes=x-"), std::string("lines=0-1")}) {
      INFO(h.substr(0, 40));
      whole(get({{"Range", h}}));
    }
  }
  for (const std::string& h : {"bytes=" + size + "-", std::string("bytes=99999999999999999999-"),
                               std::string("bytes=9223372036854775808-9223372036854775809"), std::string("bytes=-0")}) {
    INFO(h);
    auto r = get({{"Range", h}});
    CHECK(r.status == 416);
    CHECK(r.header("content-range") == "bytes */" + size);
    CHECK(r.header("etag").empty());
    CHECK(r.body.find(h) == std::string::npos);  // the client's text is not echoed
  }
  // If-Range: only our strong ETag keeps the range.
  partial(get({{"Range", "bytes=0-9"}, {"If-Range", etag}}), 0, 9);
  for (const std::string& v : {std::string("\"0000\""), "W/" + etag, std::string("Tue, 15 Nov 1994 08:12:31 GMT"),
                               etag.substr(1)}) {
    INFO(v);
    whole(get({{"Range", "bytes=0-9"}, {"If-Range", v}}));
  }
  // The kernel has no ETag: any If-Range means the whole file.
  auto k = c.request("GET", "/v1/images/rd/kernel", "", {{"Range", "bytes=0-5"}, {"If-Range", "\"x\""}});
  CHECK(k.status == 200);
  CHECK(k.body == "KERNEL-BYTES");

  // Two Range fields (a proxy would join them into one list): the whole body.
  std::string two = raw_exchange(f.server->port(),
                                 "GET /v1/images/rd/content HTTP/1.1\r\nHost: x\r\nRange: bytes=0-9\r\n"
                                 "Range: bytes=20-29\r\nConnection: close\r\n\r\n");
  CHECK(two.rfind("HTTP/1.1 200", 0) == 0);
  CHECK(two.find("Content-Length: " + size + "\r\n") != std::string::npos);
  // HEAD with a thousand ranges: the whole body's length, nothing else.
  std::string many = "bytes=0-0";
  for (int i = 1; i < 1000; ++i) many += ",0-0";
  std::string head = raw_exchange(f.server->port(), "HEAD /v1/images/rd/content HTTP/1.1\r\nHost: x\r\nRange: " +
                                                        many + "\r\nConnection: close\r\n\r\n");
  CHECK(head.rfind("HTTP/1.1 200", 0) == 0);
  CHECK(head.find("Content-Length: " + size + "\r\n") != std::string::npos);
  CHECK(head.size() == head.find("\r\n\r\n") + 4);
}

TEST_CASE("images: Accept-Encoding never changes image bytes and never fails the request") {
  Fixture f;
  auto c = f.client();
  // Even a gzip image is sent as stored, without Content-Encoding: a client
  // that unpacked it would hand the agent bytes whose SHA-256 is not the image's.
  const std::string content = pattern(5000);
  const std::string sha = sha256_hex(content);
  post_image(c, {{"name", "rd"}, {"kind", "ramdisk"}, {"format", "raw+gzip"}, {"sha256", sha},
                 {"size", content.size()}, {"source", f.write_file("initrd.gz", content)},
                 {"kernel", f.write_file("vmlinuz", "k")}});
  for (const char* ae : {"gzip", "br", "deflate, gzip;q=1.0", "*", "zstd", "identity;q=0", "identity;q=0, *;q=0",
                         "*;q=0", "gzip;q=0, identity;q=0", "", "x-unknown;q=abc", ";;;,,,"}) {
    INFO("Accept-Encoding: " << ae);
    auto r = c.request("GET", "/v1/images/rd/content", "", {{"Accept-Encoding", ae}});
    CHECK(r.status == 200);
    CHECK(r.header("content-encoding").empty());
    CHECK(r.header("content-length") == std::to_string(content.size()));
    CHECK(r.body == content);
    auto part = c.request("GET", "/v1/images/rd/content", "", {{"Accept-Encoding", ae}, {"Range", "bytes=10-19"}});
    CHECK(part.status == 206);
    CHECK(part.header("content-encoding").empty());
    CHECK(part.body == content.substr(10, 10));
  }
}

TEST_CASE("images: os_agent says whether the OS runs kiln-agent, by format unless the registration says") {
  Fixture f;
  auto c = f.client();
  const std::string content = pattern(4096);
  auto os = [&](const std::string& name, const std::string& format) {
    return json{{"name", name}, {"kind", "os"}, {"format", format}, {"sha256", sha256_hex(content)},
                {"size", content.size()}, {"source", "upload"}};
  };
  // Kiln's own raw builds run the agent; a qcow2 is a distro cloud image.
  CHECK(post_image(c, os("demo", "raw"))["os_agent"] == true);
  CHECK(post_image(c, os("demo-zst", "raw+zstd"))["os_agent"] == true);
  // (This fixture converts no qcow2: the registration's parser says it.)
  api::ImageSourceChecks can;
  can.can_upload = can.can_convert = true;
  can.upload_max = 1 << 20;
  Result<Image> qcow = api::parse_image(os("cloud", "qcow2"), can);
  REQUIRE(qcow);
  CHECK_FALSE(qcow->os_agent);
  // An explicit value wins either way, and is what the store gives back.
  json agent_qcow = os("agent-qcow", "qcow2");
  agent_qcow["os_agent"] = true;
  qcow = api::parse_image(agent_qcow, can);
  REQUIRE(qcow);
  CHECK(qcow->os_agent);
  json raw_cloud = os("raw-cloud", "raw");
  raw_cloud["os_agent"] = false;
  CHECK(post_image(c, raw_cloud)["os_agent"] == false);
  auto read = c.request("GET", "/v1/images/raw-cloud", "", bearer(kAdmin));
  REQUIRE(read.status == 200);
  CHECK(json::parse(read.body)["os_agent"] == false);
  read = c.request("GET", "/v1/images/demo", "", bearer(kAdmin));
  REQUIRE(read.status == 200);
  CHECK(json::parse(read.body)["os_agent"] == true);
  // Typed, and only for os images.
  json bad = os("bad", "raw");
  bad["os_agent"] = "no";
  CHECK(has_field(post_image(c, bad, 400), "/os_agent"));
  json ramdisk = {{"name", "rd"}, {"kind", "ramdisk"}, {"format", "raw"}, {"sha256", sha256_hex(content)},
                  {"size", content.size()}, {"source", "upload"}, {"kernel", "/nonexistent"}, {"os_agent", false}};
  CHECK(has_field(post_image(c, ramdisk, 400), "/os_agent"));
}
