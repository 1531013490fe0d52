// controller/boot/qcow2_image.h: the header parser on crafted bytes, then
// inspect_qcow2 and convert_qcow2 on files made by the real qemu-img and
// qemu-io (backing file, external data file, LUKS encryption, truncation, a
// non-image), a conversion checked byte for byte against `qemu-img convert
// -O raw` through both `simg2img` (Android's own sparse reader) and the
// agent's own decoder, and a full disk
// (a tiny tmpfs; root only).

#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "agent/deploy/stream_decoder.h"
#include "common/child_process.h"
#include "common/crypto.h"
#include "controller/boot/qcow2_image.h"
#include "tests/support/scratch_dir.h"
#include "tests/support/skip.h"

namespace fs = std::filesystem;
using kiln::Code;
using kiln::boot::convert_qcow2;
using kiln::boot::ConvertOptions;
using kiln::boot::inspect_qcow2;
using kiln::boot::parse_qcow2_header;
using kiln::testing::ScratchDir;
using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;

namespace {

const std::string kQemuImg = "/usr/bin/qemu-img";
const std::string kQemuIo = "/usr/bin/qemu-io";

// ---- crafted headers ------------------------------------------------------

void put32(std::vector<uint8_t>& b, size_t at, uint32_t v) {
  for (int i = 0; i < 4; ++i) b[at + i] = static_cast<uint8_t>(v >> (24 - 8 * i));
}
void put64(std::vector<uint8_t>& b, size_t at, uint64_t v) {
  put32(b, at, static_cast<uint32_t>(v >> 32));
  put32(b, at + 4, static_cast<uint32_t>(v));
}

// A well-formed version 3 image, laid out as qemu-img create lays it out:
// 64 KiB clusters, header in cluster 0, refcount table in 1, L1 table in 3.
struct Crafted {
  std::vector<uint8_t> bytes = std::vector<uint8_t>(4 * 65536, 0);
  Crafted() {
    put32(bytes, 0, 0x514649fb);
    put32(bytes, 4, 3);
    put32(bytes, 20, 16);                  // cluster_bits
    put64(bytes, 24, uint64_t{1} << 30);   // 1 GiB
    put32(bytes, 36, 2);                   // l1_size (512 MiB per entry)
    put64(bytes, 40, 3 * 65536);           // l1_table_offset
    put64(bytes, 48, 65536);               // refcount_table_offset
    put32(bytes, 56, 1);                   // refcount_table_clusters
    put32(bytes, 96, 4);                   // refcount_order
    put32(bytes, 100, 112);                // header_length
  }
  // Appends a header extension at `at` (8-aligned) and returns the next offset.
  size_t extension(size_t at, uint32_t type, uint32_t len) {
    put32(bytes, at, type);
    put32(bytes, at + 4, len);
    return at + 8 + (len + 7) / 8 * 8;
  }
  kiln::Result<kiln::boot::Qcow2Info> parse() const {
    return parse_qcow2_header(bytes, static_cast<int64_t>(bytes.size()));
  }
};

std::string refusal(const kiln::Result<kiln::boot::Qcow2Info>& r) {
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code == Code::kUnprocessable);
  return r.error().message;
}

// ---- tools ----------------------------------------------------------------

void require_tools() {
  if (::access(kQemuImg.c_str(), X_OK) != 0 || ::access(kQemuIo.c_str(), X_OK) != 0) {
    KILN_SKIP("qemu-img and qemu-io (Debian qemu-utils) are needed");
  }
}

// Runs a tool that must succeed; its words on failure.
void run_ok(const std::vector<std::string>& argv) {
  auto r = kiln::run_program(argv, std::chrono::minutes(2));
  REQUIRE(r.ok());
  INFO(argv[0] << " " << argv[1] << ": " << r->out << r->err);
  REQUIRE(r->status == 0);
}

std::string read_file(const std::string& path) {
  std::string s(fs::file_size(path), '\0');
  std::ifstream(path, std::ios::binary).read(s.data(), static_cast<std::streamsize>(s.size()));
  return s;
}

std::vector<std::string> entries(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  return names;
}

// A qcow2 of `size` with known data written by qemu-io at each "-P pattern
// offset length" of `writes`.
std::string make_qcow2(const ScratchDir& dir, const std::string& name, const std::string& size,
                       const std::vector<std::string>& writes) {
  const std::string path = dir.path() + "/" + name;
  run_ok({kQemuImg, "create", "-q", "-f", "qcow2", path, size});
  for (const auto& w : writes) run_ok({kQemuIo, "-f", "qcow2", "-c", "write -q " + w, path});
  return path;
}

// The agent's decoder (agent/deploy/stream_decoder.h) over a whole file.
std::string agent_decode(const std::string& compressed) {
  auto dec = kiln::agent::StreamDecoder::create("raw+sparse");
  REQUIRE(dec.ok());
  std::string out;
  const auto sink = [&](const char* p, size_t n) {
    out.append(p, n);
    return kiln::ok_status();
  };
  for (size_t at = 0; at < compressed.size(); at += 65536) {
    auto s = (*dec)->feed(compressed.data() + at, std::min<size_t>(65536, compressed.size() - at), sink);
    REQUIRE(s.ok());
  }
  REQUIRE((*dec)->finish().ok());
  return out;
}

}  // namespace

// ---- the parser, on bytes -------------------------------------------------

TEST_CASE("qcow2 header - a well-formed version 3 header parses") {
  Crafted c;
  auto r = c.parse();
  REQUIRE(r.ok());
  CHECK(r->virtual_size == int64_t{1} << 30);
  CHECK(r->version == 3);
  CHECK(r->file_size == 4 * 65536);
}

TEST_CASE("qcow2 header - bytes that are not qcow2 are refused as bad magic") {
  const std::string text = "#!/bin/sh\necho not an image\n";
  std::vector<uint8_t> b(text.begin(), text.end());
  CHECK(refusal(parse_qcow2_header(b, static_cast<int64_t>(b.size()))) == "not a qcow2 image (bad magic)");
  CHECK(refusal(parse_qcow2_header({}, 0)) == "not a qcow2 image (bad magic)");
}

TEST_CASE("qcow2 header - each hostile or broken field is refused, naming it") {
  Crafted c;
  std::string want;
  SECTION("truncated header") {
    c.bytes.resize(80);
    want = "truncated header";
  }
  SECTION("a backing file") {
    put64(c.bytes, 8, 65536 - 64);
    put32(c.bytes, 16, 11);
    want = "backing file";
  }
  SECTION("an external data file by the incompatible bit") {
    put64(c.bytes, 72, 1u << 2);
    want = "external data file (incompatible feature bit 2)";
  }
  SECTION("an external data file by its header extension alone") {
    c.extension(112, 0x44415441, 10);
    want = "external data file (data-file header extension)";
  }
  SECTION("the raw external data bit") {
    put64(c.bytes, 88, 1u << 1);
    want = "external data file";
  }
  SECTION("AES encryption") {
    put32(c.bytes, 32, 1);
    want = "encrypted (crypt_method 1)";
  }
  SECTION("an encryption header extension alone") {
    c.extension(112, 0x0537be77, 16);
    want = "encrypted (full-disk-encryption header extension)";
  }
  SECTION("a backing format extension") {
    c.extension(c.extension(112, 0x12345678, 5), 0xe2792aca, 3);  // after an unknown one, which is skipped
    want = "backing-format header extension";
  }
  SECTION("an unknown incompatible feature bit") {
    put64(c.bytes, 72, uint64_t{1} << 40);
    want = "unknown incompatible feature bits 0x10000000000";
  }
  SECTION("the corrupt bit") {
    put64(c.bytes, 72, 1u << 1);
    want = "corrupt";
  }
  SECTION("virtual size 0") {
    put64(c.bytes, 24, 0);
    want = "virtual size 0";
  }
  SECTION("virtual size above 64 TiB") {
    put64(c.bytes, 24, (uint64_t{64} << 40) + 512);
    put32(c.bytes, 36, 1u << 20);
    want = "above the";
  }
  SECTION("virtual size not a multiple of 512") {
    put64(c.bytes, 24, (uint64_t{1} << 30) - 1);
    want = "not a multiple of 512";
  }
  SECTION("an L1 table too small for the disk") {
    put32(c.bytes, 36, 1);
    want = "does not cover the virtual size";
  }
  SECTION("an L1 table past the end of the file") {
    c.bytes.resize(3 * 65536 + 8);
    want = "truncated L1 table";
  }
  SECTION("a refcount table past the end of the file") {
    put32(c.bytes, 56, 4);
    want = "truncated refcount table";
  }
  SECTION("cluster_bits out of range") {
    put32(c.bytes, 20, 30);
    want = "cluster_bits 30";
  }
  SECTION("an extension running past the header cluster") {
    c.extension(112, 0x12345678, 70000);
    want = "runs past the header cluster";
  }
  SECTION("a header_length not a multiple of 8") {
    put32(c.bytes, 100, 105);
    want = "header_length 105";
  }
  SECTION("version 4") {
    put32(c.bytes, 4, 4);
    want = "unsupported qcow2 version 4";
  }
  const std::string msg = refusal(c.parse());
  CHECK_THAT(msg, Contains(want));
}

TEST_CASE("qcow2 header - head bytes past the file size are not the file's") {
  Crafted c;
  // A caller that passes more bytes than the file holds: the L1 table is past the end.
  CHECK_THAT(refusal(parse_qcow2_header(c.bytes, 3 * 65536)), Contains("truncated L1 table"));
}

// ---- real files from qemu-img ---------------------------------------------

TEST_CASE("qcow2 inspect - an image qemu-img made is read as qemu-img reads it") {
  require_tools();
  ScratchDir dir;
  const std::string img = make_qcow2(dir, "good.qcow2", "300M", {"-P 0xab 1M 4M"});
  auto r = inspect_qcow2(img);
  REQUIRE(r.ok());
  CHECK(r->virtual_size == 300 << 20);
  CHECK(r->version == 3);
  CHECK(r->file_size == static_cast<int64_t>(fs::file_size(img)));

  // compat=0.10 writes version 2.
  const std::string v2 = dir.path() + "/v2.qcow2";
  run_ok({kQemuImg, "create", "-q", "-f", "qcow2", "-o", "compat=0.10", v2, "64M"});
  auto r2 = inspect_qcow2(v2);
  REQUIRE(r2.ok());
  CHECK(r2->version == 2);
}

TEST_CASE("qcow2 inspect - a backing file is refused") {
  require_tools();
  ScratchDir dir;
  const std::string base = dir.path() + "/base.raw";
  run_ok({kQemuImg, "create", "-q", "-f", "raw", base, "64M"});
  const std::string img = dir.path() + "/x.qcow2";
  run_ok({kQemuImg, "create", "-q", "-f", "qcow2", "-b", base, "-F", "raw", img});
  CHECK_THAT(refusal(inspect_qcow2(img)), Contains("backing file"));
}

TEST_CASE("qcow2 inspect - an external data file is refused") {
  require_tools();
  ScratchDir dir;
  const std::string img = dir.path() + "/x.qcow2";
  run_ok({kQemuImg, "create", "-q", "-f", "qcow2", "-o", "data_file=" + dir.path() + "/data.raw,data_file_raw=on", img,
          "64M"});
  CHECK_THAT(refusal(inspect_qcow2(img)), Contains("external data file"));
}

TEST_CASE("qcow2 inspect - an encrypted image is refused") {
  require_tools();
  ScratchDir dir;
  const std::string img = dir.path() + "/x.qcow2";
  SECTION("LUKS") {
    // qemu times its key derivation with the thread's CPU clock and gives up
    // ("Unable to get accurate CPU usage") now and then on a busy machine.
    std::string words;
    for (int attempt = 0; attempt < 3; ++attempt) {
      auto r = kiln::run_program({kQemuImg, "create", "-q", "--object", "secret,id=s,data=x", "-f", "qcow2", "-o",
                                  "encrypt.format=luks,encrypt.key-secret=s,encrypt.iter-time=100", img, "64M"},
                                 std::chrono::minutes(2));
      REQUIRE(r.ok());
      if (r->status == 0) break;
      words = r->err;
      fs::remove(img);
    }
    INFO("qemu-img create: " << words);
    REQUIRE(fs::exists(img));
  }
  SECTION("legacy AES") {
    run_ok({kQemuImg, "create", "-q", "--object", "secret,id=s,data=x", "-f", "qcow2", "-o",
            "encrypt.format=aes,encrypt.key-secret=s", img, "64M"});
  }
  CHECK_THAT(refusal(inspect_qcow2(img)), Contains("encrypted"));
}

TEST_CASE("qcow2 inspect - a truncated image is refused") {
  require_tools();
  ScratchDir dir;
  const std::string img = make_qcow2(dir, "good.qcow2", "64M", {"-P 0x11 0 1M"});
  const std::string bytes = read_file(img);
  SECTION("cut inside the header") {
    dir.write("cut.qcow2", bytes.substr(0, 60));
    CHECK_THAT(refusal(inspect_qcow2(dir.path() + "/cut.qcow2")), Contains("truncated header"));
  }
  SECTION("cut after the header cluster") {
    dir.write("cut.qcow2", bytes.substr(0, 65536 + 100));
    CHECK_THAT(refusal(inspect_qcow2(dir.path() + "/cut.qcow2")), Contains("truncated"));
  }
}

TEST_CASE("qcow2 inspect - a file that is not an image is refused, a missing one is not found") {
  require_tools();
  ScratchDir dir;
  CHECK(refusal(inspect_qcow2(dir.write("notes.txt", "hello, I am text\n"))) == "not a qcow2 image (bad magic)");
  const std::string raw = dir.path() + "/disk.raw";
  run_ok({kQemuImg, "create", "-q", "-f", "raw", raw, "1M"});
  CHECK(refusal(inspect_qcow2(raw)) == "not a qcow2 image (bad magic)");
  auto missing = inspect_qcow2(dir.path() + "/nothing.qcow2");
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.error().code == Code::kNotFound);
}

TEST_CASE("qcow2 inspect - qemu-img must agree with the header") {
  require_tools();
  ScratchDir dir;
  const std::string img = make_qcow2(dir, "good.qcow2", "64M", {});
  // A stand-in qemu-img whose answer differs from the header, one way per section.
  std::string json, want;
  SECTION("another virtual size") {
    json = R"({"format": "qcow2", "virtual-size": 1048576})";
    want = "virtual size other than the header's 67108864";
  }
  SECTION("a backing file") {
    json = R"({"format": "qcow2", "virtual-size": 67108864, "backing-filename": "/etc/shadow"})";
    want = "reports a backing file";
  }
  SECTION("a data file") {
    json = R"({"format": "qcow2", "virtual-size": 67108864, "format-specific": {"type": "qcow2", "data": {"data-file": "/etc/shadow"}}})";
    want = "reports an external data file";
  }
  SECTION("another format") {
    json = R"({"format": "raw", "virtual-size": 67108864})";
    want = "does not read it as qcow2";
  }
  SECTION("no JSON") {
    json = "qcow2, 64M";
    want = "no JSON object";
  }
  SECTION("JSON nested without end") {
    json = std::string(10000, '[');
    want = "no JSON object";
  }
  const std::string fake = dir.write("qemu-img", "#!/bin/sh\ncat <<'EOF'\n" + json + "\nEOF\n");
  ::chmod(fake.c_str(), 0755);
  CHECK_THAT(refusal(inspect_qcow2(img, fake)), Contains(want));
  // And the real one agrees.
  CHECK(inspect_qcow2(img).ok());
}

// ---- conversion -----------------------------------------------------------

TEST_CASE("qcow2 convert - the raw+sparse output reads back as exactly qemu-img's raw disk") {
  require_tools();
  if (::access("/usr/bin/simg2img", X_OK) != 0) {
    KILN_SKIP("simg2img (Debian android-sdk-libsparse-utils) is needed to read the output independently");
  }
  ScratchDir dir;
  // 60 MiB converted in 16 MiB slices: four slices, data across the first
  // slice boundary, holes of several MiB and of a few KiB, data in the last
  // sector, and a slice of nothing but a hole.
  std::string img = make_qcow2(dir, "good.qcow2", "60M",
                               {"-P 0xab 1M 4M", "-P 0xcd 15M 2M", "-P 0x01 17M 64k", "-P 0x02 17480k 4k",
                                "-P 0xef 62914048 512"});
  // Text-like and random-looking data too: the converter must not depend on the pattern.
  {
    std::string mixed;
    for (int i = 0; i < 20000; ++i) mixed += "line " + std::to_string(i * 7919 % 10007) + " of a config file\n";
    for (uint32_t x = 1; mixed.size() < (3u << 20);) {
      x ^= x << 13, x ^= x >> 17, x ^= x << 5;
      mixed.append(reinterpret_cast<const char*>(&x), 4);
    }
    const std::string raw = dir.write("mixed.raw", mixed);
    run_ok({kQemuIo, "-f", "qcow2", "-c", "write -q -s " + raw + " 8M " + std::to_string(mixed.size()), img});
  }
  bool compressed = false;
  SECTION("plain clusters") {}
  SECTION("compressed clusters (qemu-img convert -c)") {
    const std::string c = dir.path() + "/compressed.qcow2";
    run_ok({kQemuImg, "convert", "-q", "-c", "-f", "qcow2", "-O", "qcow2", img, c});
    img = c;
    compressed = true;
  }
  INFO("compressed clusters: " << compressed);
  const std::string expect = dir.path() + "/expect.raw";
  run_ok({kQemuImg, "convert", "-q", "-f", "qcow2", "-O", "raw", img, expect});

  const std::string work = dir.path() + "/work";
  fs::create_directory(work);
  const std::string dest = dir.path() + "/out.simg";
  ConvertOptions opt;
  opt.work_dir = work;
  opt.slice_bytes = 16 << 20;
  auto r = convert_qcow2(img, dest, opt);
  REQUIRE(r.ok());
  CHECK(r->virtual_size == 60 << 20);
  CHECK(r->size == static_cast<int64_t>(fs::file_size(dest)));
  const std::string served = read_file(dest);
  CHECK(r->sha256 == kiln::sha256_hex(served));
  // About 9.1 MiB of data were written: the holes cost next to nothing.
  CHECK(r->size < 10 << 20);
  CHECK(entries(work).empty());
  CHECK_FALSE(fs::exists(dest + ".part"));

  // Android's own reader, and the agent's decoder, both give qemu-img's disk.
  const std::string got = dir.path() + "/got.raw";
  run_ok({"/usr/bin/simg2img", dest, got});
  run_ok({"/usr/bin/cmp", expect, got});
  CHECK(agent_decode(served) == read_file(expect));
  // The stream depends on the disk, not on how the qcow2 stored it.
  if (compressed) {
    const std::string plain = dir.path() + "/plain.simg";
    auto p = convert_qcow2(dir.path() + "/good.qcow2", plain, opt);
    REQUIRE(p.ok());
    CHECK(p->sha256 == r->sha256);
  }
}

TEST_CASE("qcow2 convert - a path that reads like a protocol is only ever a file") {
  require_tools();
  ScratchDir dir;
  const std::string good = make_qcow2(dir, "good.qcow2", "8M", {"-P 0x5a 0 1M"});
  // Commas would split qemu's options and "json:" / "nbd:" select protocols
  // when a filename is parsed: the path is passed as file.filename only.
  const std::string odd = dir.path() + "/json:{\"driver\":\"nbd\"},file.filename=x.qcow2";
  fs::copy_file(good, odd);
  auto info = inspect_qcow2(odd);
  REQUIRE(info.ok());
  CHECK(info->virtual_size == 8 << 20);
  ConvertOptions opt;
  auto r = convert_qcow2(odd, dir.path() + "/out,x.zst", opt);  // work_dir: dest's dir
  REQUIRE(r.ok());
  const std::string got = agent_decode(read_file(dir.path() + "/out,x.zst"));
  REQUIRE(got.size() == 8u << 20);
  CHECK(got.substr(0, 1 << 20) == std::string(1 << 20, '\x5a'));
  CHECK(got.substr(1 << 20) == std::string(7 << 20, '\0'));
}

TEST_CASE("qcow2 convert - a refused image leaves no file behind") {
  require_tools();
  ScratchDir dir;
  const std::string base = dir.path() + "/base.raw";
  run_ok({kQemuImg, "create", "-q", "-f", "raw", base, "8M"});
  const std::string img = dir.path() + "/x.qcow2";
  run_ok({kQemuImg, "create", "-q", "-f", "qcow2", "-b", base, "-F", "raw", img});
  const std::string out = dir.path() + "/out";
  fs::create_directory(out);
  ConvertOptions opt;
  auto r = convert_qcow2(img, out + "/x.zst", opt);
  REQUIRE_FALSE(r.ok());
  CHECK_THAT(r.error().message, Contains("backing file"));
  CHECK(entries(out).empty());
}

TEST_CASE("qcow2 convert - a virtual size above the caller's bound is refused before qemu-img converts") {
  require_tools();
  ScratchDir dir;
  // A few hundred KiB of qcow2 that describes 4 TiB of disk.
  const std::string img = make_qcow2(dir, "huge.qcow2", "4T", {});
  const std::string out = dir.path() + "/out";
  fs::create_directory(out);
  ConvertOptions opt;
  opt.max_virtual_size = int64_t{1} << 40;
  auto r = convert_qcow2(img, out + "/x.zst", opt);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code == Code::kUnprocessable);
  CHECK_THAT(r.error().message, Contains("virtual size 4398046511104 bytes above the 1099511627776"));
  CHECK(entries(out).empty());
}

TEST_CASE("qcow2 convert - a corrupt table is refused by qemu-img map before a byte is written") {
  require_tools();
  ScratchDir dir;
  // 4 KiB clusters: one L2 table maps 2 MiB. The header stays valid; the L1
  // entry for 30 MiB (index 15) is moved off its cluster boundary, which
  // qemu reports as corruption when it reads the table.
  const std::string img = dir.path() + "/x.qcow2";
  run_ok({kQemuImg, "create", "-q", "-f", "qcow2", "-o", "cluster_size=4096", img, "40M"});
  run_ok({kQemuIo, "-f", "qcow2", "-c", "write -q -P 0x33 0 1M", img});
  run_ok({kQemuIo, "-f", "qcow2", "-c", "write -q -P 0x44 30M 1M", img});
  {
    std::fstream f(img, std::ios::in | std::ios::out | std::ios::binary);
    uint8_t h[48];
    f.read(reinterpret_cast<char*>(h), sizeof h);
    uint64_t l1 = 0;
    for (int i = 40; i < 48; ++i) l1 = l1 << 8 | h[i];
    const auto entry = static_cast<std::streamoff>(l1 + 15 * 8);
    f.seekg(entry);
    uint8_t e[8];
    f.read(reinterpret_cast<char*>(e), 8);
    REQUIRE(e[6] == (e[6] & 0xf0));  // cluster-aligned before
    e[6] |= 0x02;                     // + 0x200
    f.seekp(entry);
    f.write(reinterpret_cast<const char*>(e), 8);
  }
  REQUIRE(inspect_qcow2(img).ok());
  const std::string out = dir.path() + "/out";
  fs::create_directory(out);
  ConvertOptions opt;
  opt.slice_bytes = 16 << 20;
  auto r = convert_qcow2(img, out + "/x.simg", opt);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code == Code::kUnprocessable);
  CHECK_THAT(r.error().message, Contains("qemu-img map cannot read it") && Contains("unaligned"));
  CHECK(entries(out).empty());
}

TEST_CASE("qcow2 convert - compressed data that does not inflate fails half-way and leaves no file behind") {
  require_tools();
  ScratchDir dir;
  // Compressed clusters at 0 and at 30 MiB; the file's last bytes (the
  // compressed data of the clusters at 30 MiB) are overwritten. The map
  // reads only tables, so the conversion starts, writes the first 16 MiB
  // window, and fails in the second when qemu-img inflates the garbage.
  const std::string plain = dir.path() + "/p.qcow2";
  run_ok({kQemuImg, "create", "-q", "-f", "qcow2", plain, "40M"});
  run_ok({kQemuIo, "-f", "qcow2", "-c", "write -q -P 0x33 0 1M", plain});
  run_ok({kQemuIo, "-f", "qcow2", "-c", "write -q -P 0x44 30M 1M", plain});
  const std::string img = dir.path() + "/c.qcow2";
  run_ok({kQemuImg, "convert", "-q", "-c", "-f", "qcow2", "-O", "qcow2", plain, img});
  {
    const auto size = static_cast<std::streamoff>(fs::file_size(img));
    std::fstream f(img, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(size - 600);
    const std::string garbage(600, '\x5a');
    f.write(garbage.data(), static_cast<std::streamsize>(garbage.size()));
  }
  REQUIRE(inspect_qcow2(img).ok());
  const std::string out = dir.path() + "/out";
  const std::string work = dir.path() + "/work";
  fs::create_directory(out);
  fs::create_directory(work);
  ConvertOptions opt;
  opt.slice_bytes = 16 << 20;
  opt.work_dir = work;
  auto r = convert_qcow2(img, out + "/x.simg", opt);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code == Code::kUnprocessable);
  CHECK_THAT(r.error().message, Contains("qemu-img cannot convert the image"));
  CHECK(entries(out).empty());
  CHECK(entries(work).empty());
}

namespace {

// A tmpfs of `size` mounted on `dir` for the test's life.
class TinyTmpfs {
 public:
  TinyTmpfs(const std::string& dir, const std::string& size) : dir_(dir) {
    fs::create_directories(dir);
    mounted_ = ::mount("tmpfs", dir.c_str(), "tmpfs", 0, ("size=" + size).c_str()) == 0;
  }
  ~TinyTmpfs() {
    if (mounted_) ::umount2(dir_.c_str(), MNT_DETACH);
  }
  bool mounted() const { return mounted_; }

 private:
  std::string dir_;
  bool mounted_ = false;
};

// Incompressible bytes, so 4 MiB of them need 4 MiB of output too.
std::string noise(size_t n) {
  std::string s;
  s.reserve(n);
  uint64_t x = 88172645463325252ull;
  while (s.size() < n) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    s.append(reinterpret_cast<const char*>(&x), 8);
  }
  return s;
}

}  // namespace

TEST_CASE("qcow2 convert - a full disk is reported as such and leaves the directory empty") {
  require_tools();
  if (::geteuid() != 0) KILN_SKIP("mounting a tmpfs needs root");
  ScratchDir dir;
  const std::string img = make_qcow2(dir, "big.qcow2", "64M", {});
  run_ok({kQemuIo, "-f", "qcow2", "-c", "write -q -s " + dir.write("noise.raw", noise(6 << 20)) + " 1M 6M", img});
  const std::string full = dir.path() + "/full";
  TinyTmpfs tmpfs(full, "2M");
  if (!tmpfs.mounted()) KILN_SKIP("cannot mount a tmpfs here");
  ConvertOptions opt;
  SECTION("qemu-img fills the work directory") { opt.work_dir = full; }
  SECTION("the compressed output fills the destination") {
    opt.work_dir = dir.path();
  }
  auto r = convert_qcow2(img, full + "/out.simg", opt);
  REQUIRE_FALSE(r.ok());
  CHECK_THAT(r.error().message, StartsWith("no space left on device"));
  CHECK(r.error().code == Code::kInsufficientStorage);
  CHECK(entries(full).empty());
  // The scratch dir holds the image and the noise, no temporary slice.
  for (const auto& name : entries(dir.path())) CHECK((name == "big.qcow2" || name == "noise.raw" || name == "full"));
}
