// write_image against a local HTTP server: raw, gzip and zstd images, a wrong
// sha256 (fails and zeroes the device's first and last MiB), dropped
// connections resumed with Range (the hash continues across resumes), a
// server without Range support, chunked framing, bearer auth and size checks.
#include <catch2/catch.hpp>

#include <zlib.h>
#include <zstd.h>

#include <fstream>
#include <string>

#include "agent/deploy/stream_decoder.h"
#include "agent/deploy/write_image.h"
#include "common/crypto.h"
#include "tests/unit/agent_checks/temp_tree.h"
#include "tests/unit/agent_deploy/scripted_http_server.h"

using kiln::test::ScriptedHttpServer;
using kiln::test::TempTree;

namespace {

constexpr std::size_t kMiB = 1024 * 1024;

// A compressible but not trivial image: runs of a pattern mixed with noise.
std::string make_image(std::size_t size) {
  std::string s(size, '\0');
  std::uint32_t x = 12345;
  for (std::size_t i = 0; i < size; ++i) {
    x = x * 1103515245 + 12345;
    s[i] = (i / 4096) % 3 == 0 ? static_cast<char>(x >> 24) : static_cast<char>(i % 251);
  }
  return s;
}

std::string gzip(const std::string& in) {
  z_stream z{};
  REQUIRE(deflateInit2(&z, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) == Z_OK);
  std::string out(deflateBound(&z, in.size()) + 64, '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  z.avail_in = static_cast<uInt>(in.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  REQUIRE(deflate(&z, Z_FINISH) == Z_STREAM_END);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

std::string zstd(const std::string& in) {
  std::string out(ZSTD_compressBound(in.size()), '\0');
  const std::size_t n = ZSTD_compress(out.data(), out.size(), in.data(), in.size(), 3);
  REQUIRE_FALSE(ZSTD_isError(n));
  out.resize(n);
  return out;
}

std::string read_file(const std::string& path, std::size_t offset, std::size_t n) {
  std::ifstream in(path, std::ios::binary);
  in.seekg(static_cast<std::streamoff>(offset));
  std::string s(n, '\0');
  in.read(s.data(), static_cast<std::streamsize>(n));
  s.resize(static_cast<std::size_t>(in.gcount()));
  return s;
}

// A device file of `size` bytes filled with 0xAB, so zeroing is visible.
std::string make_device(const TempTree& t, std::size_t size) {
  const std::string path = t.path("device.img");
  std::ofstream out(path, std::ios::binary);
  const std::string chunk(kMiB, '\xAB');
  for (std::size_t i = 0; i < size / kMiB; ++i) out.write(chunk.data(), static_cast<std::streamsize>(chunk.size()));
  return path;
}

kiln::agent::WriteImageOptions fast_options() {
  kiln::agent::WriteImageOptions o;
  o.resume_delay = std::chrono::milliseconds(1);
  o.http.io_timeout = std::chrono::milliseconds(5000);
  return o;
}

const kiln::Logger kQuiet(kiln::LogLevel::kOff);

}  // namespace

TEST_CASE("write_image writes raw, gzip and zstd images and reports the stream's sha256", "[write_image]") {
  const std::string image = make_image(6 * kMiB + 1000);  // an unaligned tail
  for (const std::string format : {"raw", "raw+gzip", "raw+zstd"}) {
    DYNAMIC_SECTION(format) {
      TempTree t;
      const std::string device = make_device(t, 16 * kMiB);
      const std::string served = format == "raw" ? image : format == "raw+gzip" ? gzip(image) : zstd(image);
      ScriptedHttpServer server(kiln::test::range_file_handler(served, {}, "session-1"));
      kiln::agent::WriteImageRequest req;
      req.url = server.url("/v1/images/img/content");
      req.sha256 = kiln::sha256_hex(served);
      req.size = served.size();
      req.format = format;
      req.device = device;
      req.token = "session-1";
      auto r = kiln::agent::write_image(req, fast_options(), kQuiet);
      REQUIRE(r);
      CHECK(r->device == device);
      CHECK(r->bytes_downloaded == served.size());
      CHECK(r->bytes_written == image.size());
      CHECK(r->sha256 == req.sha256);
      CHECK(r->resumes == 0);
      CHECK(r->mb_per_s > 0);
      CHECK(read_file(device, 0, image.size()) == image);
      CHECK(read_file(device, image.size(), 16) == std::string(16, '\xAB'));  // past the image: untouched
      const auto json = kiln::agent::to_json(*r);
      for (const char* k : {"device", "bytes_downloaded", "bytes_written", "seconds", "mb_per_s", "sha256", "resumes"})
        CHECK(json.contains(k));
      REQUIRE(server.requests().size() == 1);
      CHECK(server.requests()[0].header("Authorization") == "Bearer session-1");
    }
  }
}

TEST_CASE("write_image with a wrong sha256 fails and zeroes the device's first and last MiB", "[write_image]") {
  TempTree t;
  const std::string device = make_device(t, 16 * kMiB);
  const std::string image = make_image(3 * kMiB);
  ScriptedHttpServer server(kiln::test::range_file_handler(image));
  kiln::agent::WriteImageRequest req;
  req.url = server.url("/img");
  req.sha256 = std::string(64, '0');
  req.size = image.size();
  req.device = device;
  auto r = kiln::agent::write_image(req, fast_options(), kQuiet);
  REQUIRE_FALSE(r);
  CHECK(r.error().message == "sha256 mismatch: expected " + std::string(64, '0') + ", got " + kiln::sha256_hex(image));
  CHECK(read_file(device, 0, kMiB) == std::string(kMiB, '\0'));
  CHECK(read_file(device, 15 * kMiB, kMiB) == std::string(kMiB, '\0'));
}

TEST_CASE("write_image resumes a dropped download with Range and the hash still matches", "[write_image]") {
  const std::string image = make_image(5 * kMiB + 512);
  for (const std::string format : {"raw", "raw+zstd"}) {
    DYNAMIC_SECTION(format) {
      TempTree t;
      const std::string device = make_device(t, 8 * kMiB);
      const std::string served = format == "raw" ? image : zstd(image);
      const long long first_cut = static_cast<long long>(served.size() / 3) + 7;
      const long long second_cut = static_cast<long long>(served.size() / 4);
      ScriptedHttpServer server(kiln::test::range_file_handler(served, {first_cut, second_cut}));
      kiln::agent::WriteImageRequest req;
      req.url = server.url("/img");
      req.sha256 = kiln::sha256_hex(served);
      req.size = served.size();
      req.format = format;
      req.device = device;
      auto r = kiln::agent::write_image(req, fast_options(), kQuiet);
      REQUIRE(r);
      CHECK(r->resumes == 2);
      CHECK(r->sha256 == req.sha256);
      CHECK(r->bytes_downloaded == served.size());
      CHECK(read_file(device, 0, image.size()) == image);
      const auto reqs = server.requests();
      REQUIRE(reqs.size() == 3);
      CHECK(reqs[0].header("Range").empty());
      CHECK(reqs[1].header("Range") == "bytes=" + std::to_string(first_cut) + "-");
      CHECK(reqs[2].header("Range") == "bytes=" + std::to_string(first_cut + second_cut) + "-");
    }
  }
}

TEST_CASE("write_image gives up after the allowed resumes and leaves the device unbootable", "[write_image]") {
  TempTree t;
  const std::string device = make_device(t, 8 * kMiB);
  const std::string image = make_image(2 * kMiB);
  ScriptedHttpServer server(kiln::test::range_file_handler(image, {100000, 1000, 1000, 1000}));
  kiln::agent::WriteImageRequest req;
  req.url = server.url("/img");
  req.sha256 = kiln::sha256_hex(image);
  req.size = image.size();
  req.device = device;
  auto o = fast_options();
  o.max_resumes = 3;
  auto r = kiln::agent::write_image(req, o, kQuiet);
  REQUIRE_FALSE(r);
  CHECK(r.error().code == kiln::Code::kUnavailable);
  CHECK(server.requests().size() == 4);
  CHECK(read_file(device, 0, kMiB) == std::string(kMiB, '\0'));
}

TEST_CASE("write_image against a server without Range support skips what it already has", "[write_image]") {
  TempTree t;
  const std::string device = make_device(t, 8 * kMiB);
  const std::string image = make_image(3 * kMiB);
  int calls = 0;
  ScriptedHttpServer server([&](const kiln::test::ScriptedRequest&) {
    kiln::test::ScriptedResponse r;
    r.body = image;  // always 200 with the whole file
    if (calls++ == 0) r.drop_after = 1234567;
    return r;
  });
  kiln::agent::WriteImageRequest req;
  req.url = server.url("/img");
  req.sha256 = kiln::sha256_hex(image);
  req.size = image.size();
  req.device = device;
  auto r = kiln::agent::write_image(req, fast_options(), kQuiet);
  REQUIRE(r);
  CHECK(r->resumes == 1);
  CHECK(read_file(device, 0, image.size()) == image);
}

TEST_CASE("write_image reads chunked and unframed bodies", "[write_image]") {
  const std::string image = make_image(kMiB + 333);
  for (int mode = 0; mode < 2; ++mode) {
    TempTree t;
    const std::string device = make_device(t, 4 * kMiB);
    ScriptedHttpServer server([&](const kiln::test::ScriptedRequest&) {
      kiln::test::ScriptedResponse r;
      r.body = image;
      (mode == 0 ? r.chunked : r.unframed) = true;
      return r;
    });
    kiln::agent::WriteImageRequest req;
    req.url = server.url("/img");
    req.sha256 = kiln::sha256_hex(image);
    req.size = image.size();
    req.device = device;
    auto r = kiln::agent::write_image(req, fast_options(), kQuiet);
    REQUIRE(r);
    CHECK(read_file(device, 0, image.size()) == image);
  }
}

TEST_CASE("write_image fails cleanly on HTTP errors, size mismatch, corrupt data and oversized images", "[write_image]") {
  TempTree t;
  const std::string device = make_device(t, 4 * kMiB);
  const std::string image = make_image(kMiB);
  ScriptedHttpServer server(kiln::test::range_file_handler(image, {}, "right"));
  kiln::agent::WriteImageRequest req;
  req.url = server.url("/img");
  req.sha256 = kiln::sha256_hex(image);
  req.size = image.size();
  req.device = device;

  SECTION("wrong bearer: 401, no retries") {
    req.token = "wrong";
    auto r = kiln::agent::write_image(req, fast_options(), kQuiet);
    REQUIRE_FALSE(r);
    CHECK(r.error().message.find("HTTP 401") != std::string::npos);
    CHECK(server.requests().size() == 1);
    CHECK(read_file(device, 0, 16) == std::string(16, '\xAB'));  // nothing was written, nothing wiped
  }
  SECTION("the server sends fewer bytes than the size promised") {
    req.token = "right";
    req.size = image.size() + 10;
    auto o = fast_options();
    o.max_resumes = 1;
    auto r = kiln::agent::write_image(req, o, kQuiet);
    REQUIRE_FALSE(r);
    CHECK(read_file(device, 0, kMiB) == std::string(kMiB, '\0'));
  }
  SECTION("the server sends more bytes than the size promised") {
    req.token = "right";
    req.size = image.size() - 10;
    auto r = kiln::agent::write_image(req, fast_options(), kQuiet);
    REQUIRE_FALSE(r);
    CHECK(r.error().message.find("size mismatch") == 0);
  }
  SECTION("gzip format but the bytes are not gzip") {
    req.token = "right";
    req.format = "raw+gzip";
    auto r = kiln::agent::write_image(req, fast_options(), kQuiet);
    REQUIRE_FALSE(r);
    CHECK(r.error().message.find("gzip:") == 0);
  }
  SECTION("an unknown format is refused before any download") {
    req.format = "qcow2";
    auto r = kiln::agent::write_image(req, fast_options(), kQuiet);
    REQUIRE_FALSE(r);
    CHECK(r.error().code == kiln::Code::kInvalidArgument);
    CHECK(server.requests().empty());
  }
  SECTION("a raw image larger than the device") {
    req.token = "right";
    req.size = 5 * kMiB;
    auto r = kiln::agent::write_image(req, fast_options(), kQuiet);
    REQUIRE_FALSE(r);
    CHECK(r.error().message == "image is " + std::to_string(5 * kMiB) + " bytes; disk " + device + " has " +
                                   std::to_string(4 * kMiB) + " bytes: nothing was written");
    CHECK(server.requests().empty());
  }
}

TEST_CASE("write_image refuses a compressed image whose virtual size exceeds the disk before a byte is written",
          "[write_image]") {
  TempTree t;
  const std::string device = make_device(t, 4 * kMiB);
  const std::string image = make_image(5 * kMiB);  // decompresses past the 4 MiB disk
  const std::string packed = zstd(image);
  ScriptedHttpServer server(kiln::test::range_file_handler(packed, {}, "right"));
  kiln::agent::WriteImageRequest req;
  req.url = server.url("/img");
  req.sha256 = kiln::sha256_hex(packed);
  req.size = packed.size();
  req.format = "raw+zstd";
  req.token = "right";

  SECTION("known virtual size: refused naming both sizes, nothing downloaded or written") {
    req.device = device;
    req.virtual_size = image.size();
    req.image = "jammy";
    auto r = kiln::agent::write_image(req, fast_options(), kQuiet);
    REQUIRE_FALSE(r);
    CHECK(r.error().code == kiln::Code::kInvalidArgument);
    CHECK(r.error().message == "image jammy is " + std::to_string(5 * kMiB) + " bytes; disk " + device + " has " +
                                   std::to_string(4 * kMiB) + " bytes: nothing was written");
    CHECK(server.requests().empty());
    CHECK(read_file(device, 0, 4 * kMiB) == std::string(4 * kMiB, '\xAB'));  // untouched, not even wiped
  }
  SECTION("known virtual size and no device named: no disk is large enough, the largest is named") {
    t.write("sys/block/vda/size", std::to_string(4 * kMiB / 512) + "\n");
    t.write("sys/block/vda/removable", "0\n");
    t.mkdir("dev");
    std::ofstream(t.path("dev/vda"), std::ios::binary) << std::string(4 * kMiB, '\xAB');
    req.virtual_size = image.size();
    req.image = "jammy";
    auto o = fast_options();
    o.root = t.root();
    auto r = kiln::agent::write_image(req, o, kQuiet);
    REQUIRE_FALSE(r);
    CHECK(r.error().message.find("image jammy is " + std::to_string(5 * kMiB) + " bytes; disk " + t.path("dev/vda") +
                                 " has " + std::to_string(4 * kMiB) + " bytes") == 0);
    CHECK(server.requests().empty());
    CHECK(read_file(t.path("dev/vda"), 0, 16) == std::string(16, '\xAB'));
  }
  SECTION("unknown virtual size: the write stops at the disk's end with a clear error") {
    req.device = device;
    auto r = kiln::agent::write_image(req, fast_options(), kQuiet);
    REQUIRE_FALSE(r);
    CHECK(r.error().message.find("image is larger than " + device) == 0);
  }
}

TEST_CASE("decoders accept concatenated gzip members and zstd frames, reject truncation", "[write_image][decoder]") {
  const std::string a = make_image(300000), b = make_image(200000);
  for (const std::string format : {"raw+gzip", "raw+zstd"}) {
    const std::string enc = format == "raw+gzip" ? gzip(a) + gzip(b) : zstd(a) + zstd(b);
    auto dec = kiln::agent::StreamDecoder::create(format);
    REQUIRE(dec);
    std::string out;
    const kiln::agent::ByteSink sink = [&](const char* d, std::size_t n) {
      out.append(d, n);
      return kiln::ok_status();
    };
    for (std::size_t off = 0; off < enc.size(); off += 777)  // odd-sized network reads
      REQUIRE((*dec)->feed(enc.data() + off, std::min<std::size_t>(777, enc.size() - off), sink));
    CHECK((*dec)->finish());
    CHECK(out == a + b);

    auto cut = kiln::agent::StreamDecoder::create(format);
    REQUIRE((*cut)->feed(enc.data(), enc.size() / 3, sink));
    CHECK_FALSE((*cut)->finish());
  }
}

TEST_CASE("write_image without a device picks the smallest non-removable disk that fits", "[write_image]") {
  TempTree t;
  const std::string image = make_image(3 * kMiB);
  t.mkdir("dev");
  // big: 16 MiB, small: 2 MiB (too small), usb: 4 MiB removable, fit: 4 MiB.
  for (auto [name, mib, removable] : {std::tuple{"big", 16, false}, {"small", 2, false}, {"usb", 4, true}, {"fit", 4, false}}) {
    t.write(std::string("sys/block/") + name + "/size", std::to_string(mib * kMiB / 512) + "\n");
    t.write(std::string("sys/block/") + name + "/removable", removable ? "1\n" : "0\n");
    std::ofstream(t.path(std::string("dev/") + name), std::ios::binary) << std::string(mib * kMiB, '\xAB');
  }
  ScriptedHttpServer server(kiln::test::range_file_handler(image));
  kiln::agent::WriteImageRequest req;
  req.url = server.url("/img");
  req.sha256 = kiln::sha256_hex(image);
  req.size = image.size();
  auto o = fast_options();
  o.root = t.root();
  auto r = kiln::agent::write_image(req, o, kQuiet);
  REQUIRE(r);
  CHECK(r->device == t.path("dev/fit"));
  CHECK(read_file(t.path("dev/fit"), 0, image.size()) == image);
  CHECK(read_file(t.path("dev/big"), 0, 16) == std::string(16, '\xAB'));
}

TEST_CASE("kiln-agent write-image streams a zstd image onto a device file", "[write_image][cli]") {
  TempTree t;
  const std::string device = make_device(t, 4 * kMiB);
  const std::string image = make_image(kMiB + 4096);
  const std::string served = zstd(image);
  ScriptedHttpServer server(kiln::test::range_file_handler(served, {}, "tok"));
  const std::string cmd = std::string(KILN_AGENT_BIN) + " write-image --url " + server.url("/img") + " --sha256 " +
                          kiln::sha256_hex(served) + " --size " + std::to_string(served.size()) +
                          " --format raw+zstd --device " + device + " --token tok >/dev/null 2>&1";
  REQUIRE(std::system(cmd.c_str()) == 0);
  CHECK(read_file(device, 0, image.size()) == image);
}
