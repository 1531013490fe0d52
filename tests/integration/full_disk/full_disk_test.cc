// A full disk under a real kilnd: its --data-dir (SQLite, key) and its own
// image directory (DATA_DIR/images: uploads and downloads) lie on a tmpfs of
// 16 MiB the test mounts, then fills with a filler file.
//
// While it is full: node creates and patches are 507 problem+json with
// Retry-After whose detail says "no space left on device" and names the data
// directory; reads are served; an upload is refused the same way and leaves
// no file; kilnd stays up. With a little room back, an upload and a URL
// download that run out of space half-way leave nothing in the image
// directory (the download ends `failed` with the cause). Once the filler is
// gone, writes and the upload succeed without a restart. After kilnd stops,
// the database passes integrity_check, every write answered 2xx is there,
// every write answered 507 is not, and the event sequence has no gap.
//
// Mounting needs root: elsewhere the case is reported skipped. The log and
// stdout of kilnd are symlinked out of the tmpfs, so the test can read what
// kilnd said while its disk was full.

#include <catch2/catch.hpp>

#include <sqlite3.h>
#include <sys/mount.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/child_process.h"
#include "common/crypto.h"
#include "tests/integration/kilnd/kilnd_process.h"
#include "tests/support/http_test_client.h"
#include "tests/support/skip.h"
#include "tests/support/wait_until.h"

using namespace kiln::testing;
using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;
using Catch::Matchers::EndsWith;
using nlohmann::json;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

namespace {

const std::string kToken = "kiln_full_disk_admin_token_00001";
Headers auth() { return {{"Authorization", "Bearer " + kToken}}; }

class TinyTmpfs {
 public:
  TinyTmpfs(const std::string& dir, const std::string& size) : dir_(dir) {
    fs::create_directories(dir);
    mounted_ = ::mount("tmpfs", dir.c_str(), "tmpfs", 0, ("size=" + size + ",mode=0755").c_str()) == 0;
    errno_ = errno;
  }
  ~TinyTmpfs() {
    if (mounted_) ::umount2(dir_.c_str(), MNT_DETACH);
  }
  TinyTmpfs(const TinyTmpfs&) = delete;
  TinyTmpfs& operator=(const TinyTmpfs&) = delete;
  bool mounted() const { return mounted_; }
  int error() const { return errno_; }

 private:
  std::string dir_;
  bool mounted_ = false;
  int errno_ = 0;
};

// Incompressible bytes (xorshift), so n of them take n bytes anywhere.
std::string noise(size_t n, uint64_t seed) {
  std::string s;
  s.reserve(n + 8);
  uint64_t x = seed;
  while (s.size() < n) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    s.append(reinterpret_cast<const char*>(&x), 8);
  }
  s.resize(n);
  return s;
}

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary);
  f << bytes;
  REQUIRE(f.good());
}

// Writes `path` until the filesystem has no room left (ENOSPC).
void fill(const std::string& path) {
  FILE* f = std::fopen(path.c_str(), "wb");
  REQUIRE(f != nullptr);
  std::setvbuf(f, nullptr, _IONBF, 0);
  const std::string block(64 * 1024, 'f');
  while (std::fwrite(block.data(), 1, block.size(), f) == block.size()) {
  }
  // Then the last few bytes a 64 KiB block did not fit into.
  while (std::fwrite("f", 1, 1, f) == 1) {
  }
  std::fclose(f);
}

uint64_t free_bytes(const std::string& dir) {
  struct statvfs v {};
  REQUIRE(::statvfs(dir.c_str(), &v) == 0);
  return static_cast<uint64_t>(v.f_bavail) * v.f_frsize;
}

std::vector<std::string> entries(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) out.push_back(e.path().filename().string());
  return out;
}

json create_node_body(const std::string& name) {
  return {{"name", name},
          {"bmc", {{"driver", "fake"}, {"address", "bmc-" + name}, {"username", "root"}, {"password", "pw-" + name}}}};
}

// `r` is the 507 problem+json a write on a full disk must be, naming `dir`.
void check_full_disk_reply(const TestResponse& r, const std::string& dir) {
  INFO(r.status << " " << r.body);
  CHECK(r.status == 507);
  CHECK(r.header("content-type") == "application/problem+json");
  const std::string retry = r.header("retry-after");
  CHECK(!retry.empty());
  CHECK(retry.find_first_not_of("0123456789") == std::string::npos);
  json p = json::parse(r.body, nullptr, false);
  REQUIRE(p.is_object());
  CHECK(p["status"] == 507);
  CHECK_THAT(p.value("type", ""), EndsWith("insufficient-storage"));
  const std::string detail = p.value("detail", "");
  CHECK_THAT(detail, StartsWith("no space left on device"));
  CHECK_THAT(detail, Contains(dir));
}

json get_json(HttpTestClient& c, const std::string& target) {
  auto r = c.request("GET", target, "", auth());
  INFO(target << ": " << r.status << " " << r.body);
  REQUIRE(r.status == 200);
  return json::parse(r.body);
}

// Raw SQLite on the stopped kilnd's file, read-only.
class Db {
 public:
  explicit Db(const std::string& path) {
    REQUIRE(sqlite3_open_v2(path.c_str(), &db_, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK);
  }
  ~Db() { sqlite3_close(db_); }
  std::vector<std::string> column(const std::string& sql) {
    sqlite3_stmt* st = nullptr;
    REQUIRE(sqlite3_prepare_v2(db_, sql.c_str(), -1, &st, nullptr) == SQLITE_OK);
    std::vector<std::string> out;
    while (sqlite3_step(st) == SQLITE_ROW) {
      const unsigned char* t = sqlite3_column_text(st, 0);
      out.emplace_back(t != nullptr ? reinterpret_cast<const char*>(t) : "");
    }
    sqlite3_finalize(st);
    return out;
  }
  std::string text(const std::string& sql) {
    auto c = column(sql);
    REQUIRE(c.size() == 1);
    return c[0];
  }

 private:
  sqlite3* db_ = nullptr;
};

}  // namespace

TEST_CASE("a full disk - writes are 507 naming the cause, nothing half-written, recovery without a restart",
          "[full-disk]") {
  if (::geteuid() != 0) KILN_SKIP("mounting a tmpfs needs root");
  if (::access("/usr/bin/python3", X_OK) != 0) KILN_SKIP("python3 is not installed (serves the URL download)");
  TempDir scratch;
  const std::string mnt = scratch.path() + "/small";
  TinyTmpfs tmpfs(mnt, "16M");
  if (!tmpfs.mounted()) KILN_SKIP("cannot mount a tmpfs here: " << std::strerror(tmpfs.error()));
  const std::string data = mnt + "/data";
  const std::string images = data + "/images";
  fs::create_directories(data);
  // kilnd's log and stdout stay readable off the full disk.
  fs::create_directories(scratch.path() + "/logs");
  write_file(scratch.path() + "/logs/kilnd.log", "");
  write_file(scratch.path() + "/logs/kilnd.stdout", "");
  fs::create_symlink(scratch.path() + "/logs/kilnd.log", data + "/kilnd.log");
  fs::create_symlink(scratch.path() + "/logs/kilnd.stdout", data + "/kilnd.stdout");

  // A 6 MiB file served over loopback for the URL download.
  const std::string www = scratch.path() + "/www";
  fs::create_directories(www);
  const std::string big = noise(6 << 20, 0x9e3779b97f4a7c15ull);
  write_file(www + "/big.raw", big);
  kiln::ChildSpec http_spec;
  http_spec.argv = {"/usr/bin/python3", "-u", "-m", "http.server", "0", "--bind", "127.0.0.1", "--directory", www};
  http_spec.output_file = scratch.path() + "/logs/http.log";
  auto http_server = kiln::ChildProcess::spawn(http_spec);
  REQUIRE(http_server);
  auto serving = kiln::wait_for_lines(*http_server, http_spec.output_file, {"Serving HTTP on "}, 20s);
  REQUIRE(serving);
  // "127.0.0.1 port 41234 (http://127.0.0.1:41234/) ..."
  const std::string& line = serving->at("Serving HTTP on ");
  const std::string port = line.substr(line.find(" port ") + 6, line.find(' ', line.find(" port ") + 6) - line.find(" port ") - 6);
  const std::string big_url = "http://127.0.0.1:" + port + "/big.raw";

  KilndProcess k(data, {"--bootstrap-token", kToken, "--power-sync-interval", "0", "--image-url-allow", "127.0.0.0/8"});
  k.start();
  HttpTestClient c("127.0.0.1", k.port());
  const auto started = std::chrono::steady_clock::now();

  // Before: writes answered 2xx.
  std::set<std::string> kept = {"ok-0", "ok-1", "ok-2"};
  for (const std::string& name : kept) {
    auto r = c.request("POST", "/v1/nodes", create_node_body(name).dump(), auth());
    INFO(r.body);
    REQUIRE(r.status == 201);
  }
  REQUIRE(c.request("PATCH", "/v1/nodes/ok-0", json{{"boot_mode", "bios"}}.dump(), auth()).status == 200);
  const std::string upload = noise(1536 * 1024, 42);
  {
    json body = {{"name", "up"}, {"kind", "os"}, {"format", "raw"}, {"sha256", kiln::sha256_hex(upload)},
                 {"size", upload.size()}, {"source", "upload"}};
    auto r = c.request("POST", "/v1/images", body.dump(), auth());
    INFO(r.body);
    REQUIRE(r.status == 201);
  }
  const Headers upload_headers = {{"Authorization", "Bearer " + kToken}, {"Content-Type", "application/octet-stream"}};

  // 768 KiB of slack (given back later), then fill every byte that is left.
  write_file(mnt + "/slack", std::string(768 * 1024, 's'));
  fill(mnt + "/filler");
  INFO("free after filling: " << free_bytes(mnt));

  // Full: writes 507, reads served, an upload leaves nothing.
  for (int i = 0; i < 3; ++i) {
    auto r = c.request("POST", "/v1/nodes", create_node_body("refused-" + std::to_string(i)).dump(), auth());
    check_full_disk_reply(r, data);
  }
  check_full_disk_reply(c.request("PATCH", "/v1/nodes/ok-1", json{{"boot_mode", "bios"}}.dump(), auth()), data);
  {
    json list = get_json(c, "/v1/nodes");
    std::set<std::string> names;
    for (const json& n : list["nodes"]) names.insert(n["name"].get<std::string>());
    CHECK(names == kept);
    CHECK(get_json(c, "/v1/nodes/ok-0")["boot_mode"] == "bios");
    CHECK(get_json(c, "/v1/nodes/ok-1")["boot_mode"] == "uefi");
  }
  {
    HttpTestClient u("127.0.0.1", k.port(), false, 20s);
    auto r = u.request("PUT", "/v1/images/up/content", upload, upload_headers);
    check_full_disk_reply(r, images);
  }
  CHECK(entries(images).empty());
  CHECK(get_json(c, "/v1/images/up")["state"] == "awaiting_upload");
  CHECK(k.running());

  // 768 KiB back: an upload of 1.5 MiB and a download of 6 MiB both run out
  // half-way; neither leaves a byte behind.
  fs::remove(mnt + "/slack");
  {
    HttpTestClient u("127.0.0.1", k.port(), false, 20s);
    auto r = u.request("PUT", "/v1/images/up/content", upload, upload_headers);
    check_full_disk_reply(r, images);
  }
  CHECK(entries(images).empty());
  {
    json body = {{"name", "dl"}, {"kind", "os"}, {"format", "raw"}, {"sha256", kiln::sha256_hex(big)},
                 {"size", big.size()}, {"source", big_url}};
    auto r = c.request("POST", "/v1/images", body.dump(), auth());
    INFO(r.body);
    REQUIRE(r.status == 201);
  }
  json dl;
  REQUIRE(wait_until([&] {
    dl = get_json(c, "/v1/images/dl");
    return dl["state"] != "downloading";
  }, 30s, 100ms));
  INFO(dl.dump());
  CHECK(dl["state"] == "failed");
  CHECK_THAT(dl.value("last_error", ""), StartsWith("no space left on device"));
  CHECK_THAT(dl.value("last_error", ""), Contains(images));
  CHECK(entries(images).empty());
  CHECK(k.running());

  // Room again: the same kilnd writes, no restart.
  fs::remove(mnt + "/filler");
  {
    auto r = c.request("POST", "/v1/nodes", create_node_body("after").dump(), auth());
    INFO(r.body);
    CHECK(r.status == 201);
    kept.insert("after");
  }
  {
    auto r = c.request("PATCH", "/v1/nodes/ok-2", json{{"boot_mode", "bios"}}.dump(), auth());
    INFO(r.body);
    CHECK(r.status == 200);
  }
  {
    HttpTestClient u("127.0.0.1", k.port(), false, 20s);
    auto r = u.request("PUT", "/v1/images/up/content", upload, upload_headers);
    INFO(r.body);
    CHECK(r.status == 200);
  }
  CHECK(get_json(c, "/v1/images/up")["state"] == "ready");
  {
    const std::vector<std::string> files = entries(images);
    CHECK(files.size() == 1);  // the uploaded image, nothing else
  }
  const auto seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  INFO("kilnd log:\n" << k.log());
  CHECK(k.terminate() == 0);
  http_server->stop(2s);

  Db db(data + "/kiln.db");
  CHECK(db.text("PRAGMA integrity_check") == "ok");
  std::vector<std::string> names = db.column("SELECT name FROM nodes ORDER BY name");
  CHECK(std::set<std::string>(names.begin(), names.end()) == kept);
  CHECK(db.text("SELECT boot_mode FROM nodes WHERE name = 'ok-0'") == "bios");
  CHECK(db.text("SELECT boot_mode FROM nodes WHERE name = 'ok-1'") == "uefi");
  CHECK(db.text("SELECT boot_mode FROM nodes WHERE name = 'ok-2'") == "bios");
  CHECK(db.text("SELECT count(*) FROM events WHERE type = 'node.created'") == std::to_string(kept.size()));
  // No event from a refused write, and none lost: the sequence has no gap.
  CHECK(db.text("SELECT count(*) = max(seq) - min(seq) + 1 FROM events") == "1");
  std::fprintf(stderr, "full-disk scenario: %.1f s from kilnd ready to its stop\n", seconds);
}
