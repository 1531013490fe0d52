// qcow2 images against a running kilnd (the ASan build under make test), the
// files made by the real qemu-img: a good qcow2 turns converting -> ready and
// is served as raw+sparse that `simg2img` reads back as exactly what `qemu-img convert
// -O raw` gives; a qcow2 with a backing file, an external data file or
// encryption, a truncated one and a non-image are refused at registration
// from an image directory (422 naming /source) and end `failed` when
// uploaded or downloaded; a deploy or an allocation of an image that is not
// ready is a 409; a restart resumes a conversion; a converted file shared by
// two images outlives the first delete.

#include <catch2/catch.hpp>

#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <random>
#include <sstream>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "common/child_process.h"
#include "common/crypto.h"
#include "tests/integration/kilnd/kilnd_process.h"
#include "tests/support/http_test_client.h"
#include "tests/support/skip.h"
#include "tests/support/wait_until.h"

using namespace kiln::testing;
using namespace std::chrono_literals;
using nlohmann::json;

namespace {

const std::string kToken = "kiln_images_admin_token_000001";
Headers auth() { return {{"Authorization", "Bearer " + kToken}}; }
const std::string kKey = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl ci@example";

json body_json(const TestResponse& r) { return json::parse(r.body, nullptr, false); }

std::string first_message(const TestResponse& r) {
  json j = body_json(r);
  if (!j.is_object() || !j.contains("errors") || j["errors"].empty()) return "<none>";
  return j["errors"][0]["field"].get<std::string>() + ": " + j["errors"][0]["message"].get<std::string>();
}

// Runs a shell command; its exit status (its output is printed when it fails).
int sh(const std::string& cmd) {
  const std::string out = "/tmp/kiln-images-test-" + std::to_string(::getpid()) + ".out";
  int rc = std::system((cmd + " >'" + out + "' 2>&1").c_str());
  rc = WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
  if (rc != 0) {
    std::ifstream f(out);
    std::cerr << cmd << ": exit " << rc << "\n" << f.rdbuf() << "\n";
  }
  ::unlink(out.c_str());
  return rc;
}

void need_tools() {
  for (const char* tool : {"/usr/bin/qemu-img", "/usr/bin/simg2img"})
    if (::access(tool, X_OK) != 0) {
      KILN_SKIP(tool << " is not installed (scripts/install-deps: qemu-utils, android-sdk-libsparse-utils)");
    }
}

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

// A raw disk of `mib` MiB: random data at the start and in the middle, holes
// elsewhere (what a cloud image looks like to qemu-img), made into a qcow2.
void make_qcow2(const std::string& qcow2, int mib, unsigned seed) {
  const std::string raw = qcow2 + ".src.raw";
  std::string bytes(static_cast<std::size_t>(mib) << 20, '\0');
  std::mt19937 rng(seed);
  for (std::size_t i = 0; i < (1u << 20); ++i) bytes[i] = static_cast<char>(rng());
  for (std::size_t i = bytes.size() / 2; i < bytes.size() / 2 + (256u << 10); ++i) bytes[i] = static_cast<char>(rng() & 0x0f);
  write_file(raw, bytes);
  REQUIRE(sh("qemu-img convert -f raw -O qcow2 '" + raw + "' '" + qcow2 + "'") == 0);
  ::unlink(raw.c_str());
}

json qcow2_body(const std::string& name, const std::string& source, const std::string& file) {
  std::string bytes = read_file(file);
  return {{"name", name}, {"kind", "os"}, {"format", "qcow2"}, {"sha256", kiln::sha256_hex(bytes)},
          {"size", bytes.size()}, {"source", source}};
}

json get_image(HttpTestClient& c, const std::string& ref) {
  auto r = c.request("GET", "/v1/images/" + ref, "", auth());
  REQUIRE(r.status == 200);
  return body_json(r);
}

// Polls the image until its state is none of the waiting ones.
json settled(HttpTestClient& c, const std::string& ref) {
  json img;
  bool done = wait_until([&] {
    img = get_image(c, ref);
    return img["state"] != "converting" && img["state"] != "downloading";
  }, 120s, 100ms);
  INFO(img.dump());
  REQUIRE(done);
  return img;
}

// The hostile files, each with the words its refusal must hold.
struct Hostile {
  std::string name, file, reason;
};

std::vector<Hostile> make_hostile(const std::string& dir) {
  std::vector<Hostile> out;
  write_file(dir + "/base.raw", std::string(1 << 20, 'b'));
  REQUIRE(sh("qemu-img create -f qcow2 -b '" + dir + "/base.raw' -F raw '" + dir + "/backing.qcow2' 1M") == 0);
  out.push_back({"backing", dir + "/backing.qcow2", "backing file"});
  REQUIRE(sh("qemu-img create -f qcow2 -o data_file='" + dir + "/data.raw' '" + dir + "/datafile.qcow2' 1M") == 0);
  out.push_back({"datafile", dir + "/datafile.qcow2", "data file"});
  // LUKS times its key derivation first; on a loaded machine qemu-img may
  // fail that ("Unable to get accurate CPU usage"): try again.
  int luks = -1;
  for (int attempt = 0; attempt < 5 && luks != 0; ++attempt)
    luks = sh("qemu-img create -f qcow2 --object secret,id=sec0,data=hunter2 -o "
              "encrypt.format=luks,encrypt.key-secret=sec0,encrypt.iter-time=10 '" + dir + "/encrypted.qcow2' 1M");
  REQUIRE(luks == 0);
  out.push_back({"encrypted", dir + "/encrypted.qcow2", "encrypt"});
  make_qcow2(dir + "/whole.qcow2", 2, 7);
  write_file(dir + "/truncated.qcow2", read_file(dir + "/whole.qcow2").substr(0, 300));
  out.push_back({"truncated", dir + "/truncated.qcow2", "truncated"});
  write_file(dir + "/notes.qcow2", "#cloud-config\nthis is no disk image at all\n" + std::string(4096, 'x'));
  out.push_back({"notimage", dir + "/notes.qcow2", "not a qcow2"});
  return out;
}

bool contains_ci(std::string hay, std::string needle) {
  for (char& ch : hay) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  for (char& ch : needle) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return hay.find(needle) != std::string::npos;
}

}  // namespace

TEST_CASE("a qcow2 from an image directory converts to raw+sparse that reads back as the disk qemu-img sees",
          "[images][qcow2]") {
  need_tools();
  TempDir dir;
  const std::string images = dir.path() + "/images";
  KilndProcess k(dir.path(), {"--bootstrap-token", kToken});
  k.start();
  HttpTestClient c("127.0.0.1", k.port());
  make_qcow2(images + "/jammy.qcow2", 8, 1);

  auto r = c.request("POST", "/v1/images", qcow2_body("jammy", images + "/jammy.qcow2", images + "/jammy.qcow2").dump(),
                     auth());
  INFO(r.body);
  REQUIRE(r.status == 201);
  json created = body_json(r);
  CHECK(created["format"] == "qcow2");
  CHECK(created["state"] == "converting");
  CHECK(created["virtual_size"] == 8 << 20);     // inspected at registration
  CHECK(created["served"]["format"] == "raw+sparse");
  CHECK(created["served"]["sha256"].is_null());  // not converted yet

  json img = settled(c, "jammy");
  INFO(img.dump());
  REQUIRE(img["state"] == "ready");
  CHECK(img["status"] == "ready");
  CHECK(img["virtual_size"] == 8 << 20);
  CHECK(img["last_error"] == "");
  const std::string served_sha = img["served"]["sha256"];
  const int64_t served_size = img["served"]["size"];
  CHECK(served_sha.size() == 64);

  // The bytes the agent would download: the converted file, its own ETag.
  r = c.request("GET", "/v1/images/jammy/content", "", auth());
  REQUIRE(r.status == 200);
  CHECK(static_cast<int64_t>(r.body.size()) == served_size);
  CHECK(kiln::sha256_hex(r.body) == served_sha);
  CHECK(r.header("etag") == "\"" + served_sha + "\"");
  write_file(dir.path() + "/served.simg", r.body);
  REQUIRE(sh("simg2img '" + dir.path() + "/served.simg' '" + dir.path() + "/served.raw'") == 0);
  REQUIRE(sh("qemu-img convert -f qcow2 -O raw '" + images + "/jammy.qcow2' '" + dir.path() + "/expected.raw'") == 0);
  const std::string got = read_file(dir.path() + "/served.raw");
  CHECK(got.size() == (8u << 20));
  CHECK(got == read_file(dir.path() + "/expected.raw"));
  CHECK(img["served"]["path"].get<std::string>().rfind(images + "/qcow2-", 0) == 0);
}

TEST_CASE("hostile qcow2 files are refused at registration naming source and the reason",
          "[images][qcow2]") {
  need_tools();
  TempDir dir;
  const std::string images = dir.path() + "/images";
  KilndProcess k(dir.path(), {"--bootstrap-token", kToken});
  k.start();
  HttpTestClient c("127.0.0.1", k.port());
  for (const Hostile& h : make_hostile(images)) {
    INFO(h.name);
    auto r = c.request("POST", "/v1/images", qcow2_body(h.name, h.file, h.file).dump(), auth());
    INFO(r.body);
    CHECK(r.status == 422);
    CHECK(r.header("content-type").find("application/problem+json") == 0);
    CHECK(first_message(r).rfind("/source: ", 0) == 0);
    CHECK(contains_ci(first_message(r), h.reason));
    CHECK(c.request("GET", "/v1/images/" + h.name, "", auth()).status == 404);  // nothing catalogued
  }
  // Nothing was converted or left behind in kilnd's own directory.
  for (const auto& e : std::filesystem::directory_iterator(images)) {
    INFO(e.path());
    CHECK(e.path().filename().string().rfind("qcow2-", 0) != 0);
    CHECK(e.path().filename().string().rfind(".convert-", 0) != 0);
  }
}

TEST_CASE("an uploaded or downloaded qcow2 that is hostile ends failed with the reason, and a failed image is not deployable",
          "[images][qcow2]") {
  need_tools();
  TempDir dir;
  TempDir src;
  const std::string images = dir.path() + "/images";
  KilndProcess k(dir.path(), {"--bootstrap-token", kToken, "--power-sync-interval", "0"});
  k.start();
  HttpTestClient c("127.0.0.1", k.port());
  std::vector<Hostile> hostile = make_hostile(src.path());
  for (const Hostile& h : hostile) {
    INFO(h.name);
    json body = qcow2_body(h.name, "upload", h.file);
    auto r = c.request("POST", "/v1/images", body.dump(), auth());
    INFO(r.body);
    REQUIRE(r.status == 201);
    CHECK(body_json(r)["state"] == "awaiting_upload");
    r = c.request("PUT", "/v1/images/" + h.name + "/content", read_file(h.file),
                  {{"Authorization", "Bearer " + kToken}, {"Content-Type", "application/octet-stream"}});
    INFO(r.body);
    REQUIRE(r.status == 200);
    json img = settled(c, h.name);
    CHECK(img["state"] == "failed");
    CHECK(img["status"] == "error");  // the pre-qcow2 name of failed
    CHECK(contains_ci(img["last_error"].get<std::string>(), h.reason));
    CHECK(img["served"]["sha256"].is_null());
  }
  // A good upload converts.
  make_qcow2(src.path() + "/good.qcow2", 4, 3);
  REQUIRE(c.request("POST", "/v1/images", qcow2_body("good", "upload", src.path() + "/good.qcow2").dump(), auth())
              .status == 201);
  REQUIRE(c.request("PUT", "/v1/images/good/content", read_file(src.path() + "/good.qcow2"),
                    {{"Authorization", "Bearer " + kToken}, {"Content-Type", "application/octet-stream"}})
              .status == 200);
  json good = settled(c, "good");
  CHECK(good["state"] == "ready");
  CHECK(good["virtual_size"] == 4 << 20);

  // No partial conversion output is left for any of them.
  for (const auto& e : std::filesystem::directory_iterator(images)) {
    INFO(e.path());
    CHECK(e.path().filename().string().rfind(".convert-", 0) != 0);
  }

  // Deploying a failed image, or one still awaiting its upload: 409 naming
  // the image and its state, for a node and for an allocation.
  REQUIRE(c.request("POST", "/v1/images", qcow2_body("later", "upload", src.path() + "/good.qcow2").dump(), auth())
              .status == 201);
  json node = {{"name", "n1"}, {"profile", "cpu-lab"}, {"bmc", {{"driver", "fake"}, {"address", "bmc-n1"}}}};
  REQUIRE(c.request("POST", "/v1/nodes", node.dump(), auth()).status == 201);
  REQUIRE(c.request("PUT", "/v1/nodes/n1/states/provision", R"({"target":"manage"})", auth()).status == 202);
  REQUIRE(wait_until([&] { return body_json(c.request("GET", "/v1/nodes/n1", "", auth()))["provision_state"] == "manageable"; }, 20s));
  REQUIRE(c.request("PUT", "/v1/nodes/n1/states/provision", R"({"target":"provide"})", auth()).status == 202);
  REQUIRE(wait_until([&] { return body_json(c.request("GET", "/v1/nodes/n1", "", auth()))["provision_state"] == "available"; }, 20s));
  for (const auto& [image, state] : {std::pair<std::string, std::string>{"backing", "failed"}, {"later", "awaiting_upload"}}) {
    INFO(image);
    auto r = c.request("PUT", "/v1/nodes/n1/states/provision", json{{"target", "deploy"}, {"image", image}}.dump(), auth());
    INFO(r.body);
    CHECK(r.status == 409);
    CHECK(r.body.find("image " + image + " is " + state) != std::string::npos);
    CHECK(first_message(r).rfind("/image", 0) == 0);
  }
  CHECK(body_json(c.request("GET", "/v1/nodes/n1", "", auth()))["provision_state"] == "available");
  REQUIRE(c.request("POST", "/v1/tenants",
                    json{{"name", "acme"},
                         {"quotas", json::array({{{"profile", "cpu-lab"}, {"kind", "baremetal"}, {"max_nodes", 2}}})}}
                        .dump(),
                    auth())
              .status == 201);
  auto a = c.request("POST", "/v1/allocations",
                     json{{"tenant", "acme"}, {"profile", "cpu-lab"}, {"kind", "baremetal"}, {"count", 1},
                          {"image", "backing"}, {"ssh_keys", json::array({kKey})}}
                         .dump(),
                     auth());
  INFO(a.body);
  CHECK(a.status == 409);
  CHECK(a.body.find("image backing is failed") != std::string::npos);
}

TEST_CASE("a qcow2 URL that serves a hostile file, or fails half-way, ends failed with the reason",
          "[images][qcow2]") {
  need_tools();
  TempDir dir;
  TempDir src;
  std::vector<Hostile> hostile = make_hostile(src.path());
  // python3's http.server serves the files over loopback (allowed for this kilnd).
  if (::access("/usr/bin/python3", X_OK) != 0) KILN_SKIP("python3 is not installed");
  const int port = 20000 + static_cast<int>(::getpid() % 20000);
  kiln::ChildSpec spec;
  spec.argv = {"/usr/bin/python3", "-m", "http.server", std::to_string(port), "--bind", "127.0.0.1", "--directory",
               src.path()};
  spec.output_file = src.path() + "/http.log";
  auto server = kiln::ChildProcess::spawn(spec);
  REQUIRE(server);
  HttpTestClient probe("127.0.0.1", static_cast<uint16_t>(port));
  REQUIRE(wait_until([&] {
    try {
      return probe.request("GET", "/base.raw").status == 200;
    } catch (...) {
      probe.close();
      return false;
    }
  }, 20s, 100ms));

  KilndProcess k(dir.path(), {"--bootstrap-token", kToken, "--image-url-allow", "127.0.0.0/8"});
  k.start();
  HttpTestClient c("127.0.0.1", k.port());
  const std::string base = "http://127.0.0.1:" + std::to_string(port) + "/";
  for (const Hostile& h : hostile) {
    INFO(h.name);
    const std::string file_name = std::filesystem::path(h.file).filename();
    auto r = c.request("POST", "/v1/images", qcow2_body(h.name, base + file_name, h.file).dump(), auth());
    INFO(r.body);
    REQUIRE(r.status == 201);
    json img = settled(c, h.name);
    CHECK(img["state"] == "failed");
    CHECK(contains_ci(img["last_error"].get<std::string>(), h.reason));
  }
  // A download that stops short (the file shrank after registration): failed, nothing kept.
  make_qcow2(src.path() + "/shrinks.qcow2", 2, 9);
  json body = qcow2_body("shrinks", base + "shrinks.qcow2", src.path() + "/shrinks.qcow2");
  write_file(src.path() + "/shrinks.qcow2", read_file(src.path() + "/shrinks.qcow2").substr(0, 100000));
  REQUIRE(c.request("POST", "/v1/images", body.dump(), auth()).status == 201);
  json img = settled(c, "shrinks");
  CHECK(img["state"] == "failed");
  CHECK(contains_ci(img["last_error"].get<std::string>(), "size mismatch"));
  server->stop(std::chrono::seconds(2));
}

TEST_CASE("a conversion cut short by a crash is done again at start, and a shared converted file outlives the first delete",
          "[images][qcow2]") {
  need_tools();
  TempDir dir;
  const std::string images = dir.path() + "/images";
  std::filesystem::create_directories(images);
  make_qcow2(images + "/a.qcow2", 4, 5);
  REQUIRE(sh("cp '" + images + "/a.qcow2' '" + images + "/b.qcow2'") == 0);  // same bytes, same sha256
  std::string id;
  {
    KilndProcess k(dir.path(), {"--bootstrap-token", kToken});
    k.start();
    HttpTestClient c("127.0.0.1", k.port());
    auto r = c.request("POST", "/v1/images", qcow2_body("a", images + "/a.qcow2", images + "/a.qcow2").dump(), auth());
    REQUIRE(r.status == 201);
    id = body_json(r)["id"];
    settled(c, "a");
    k.kill9();
  }
  // What a crash mid-conversion leaves: the image converting, no converted
  // file, a hidden partial output.
  for (const auto& e : std::filesystem::directory_iterator(images))
    if (e.path().filename().string().rfind("qcow2-", 0) == 0) std::filesystem::remove(e.path());
  write_file(images + "/.convert-" + id + ".simg.part", "half a conversion");
  write_file(images + "/.qcow2-0123abcd-0.raw", "a window qemu-img was writing");
  {
    sqlite3* db = nullptr;
    REQUIRE(sqlite3_open((dir.path() + "/kiln.db").c_str(), &db) == SQLITE_OK);
    const std::string sql = "UPDATE images SET state = 'converting', served_sha256 = '', served_size = 0, "
                            "served_path = '' WHERE id = '" + id + "'";
    CHECK(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr) == SQLITE_OK);
    CHECK(sqlite3_changes(db) == 1);
    sqlite3_close(db);
  }
  KilndProcess k(dir.path(), {"--bootstrap-token", kToken});
  k.start();
  HttpTestClient c("127.0.0.1", k.port());
  json a = settled(c, "a");
  INFO(a.dump());
  REQUIRE(a["state"] == "ready");
  const std::string served_path = a["served"]["path"];
  struct stat st {};
  CHECK(::stat(served_path.c_str(), &st) == 0);
  CHECK(::access((images + "/.convert-" + id + ".simg.part").c_str(), F_OK) != 0);  // stale part removed
  CHECK(::access((images + "/.qcow2-0123abcd-0.raw").c_str(), F_OK) != 0);       // and the stale window
  CHECK(c.request("GET", "/v1/images/a/content", "", auth()).status == 200);

  // A second image of the same source shares the converted file.
  REQUIRE(c.request("POST", "/v1/images", qcow2_body("b", images + "/b.qcow2", images + "/b.qcow2").dump(), auth())
              .status == 201);
  json b = settled(c, "b");
  REQUIRE(b["state"] == "ready");
  CHECK(b["served"]["path"] == served_path);
  CHECK(b["served"]["sha256"] == a["served"]["sha256"]);
  // Deleting one keeps the file the other serves; deleting both removes it.
  REQUIRE(c.request("DELETE", "/v1/images/a", "", auth()).status == 204);
  CHECK(::stat(served_path.c_str(), &st) == 0);
  CHECK(c.request("GET", "/v1/images/b/content", "", auth()).status == 200);
  REQUIRE(c.request("DELETE", "/v1/images/b", "", auth()).status == 204);
  CHECK(::stat(served_path.c_str(), &st) != 0);
  // The operator's source files are theirs: never removed.
  CHECK(::stat((images + "/a.qcow2").c_str(), &st) == 0);
}
