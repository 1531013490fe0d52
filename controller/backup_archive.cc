#include "controller/backup_archive.h"

#include <sys/stat.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <vector>

namespace kiln::backup {

namespace {

constexpr std::size_t kBlock = 512;

// ustar header fields: (offset, length), POSIX.1-1988.
constexpr std::size_t kName = 0, kNameLen = 100;
constexpr std::size_t kMode = 100, kUid = 108, kGid = 116, kSize = 124, kSizeLen = 12, kMtime = 136;
constexpr std::size_t kChksum = 148, kChksumLen = 8, kType = 156, kMagic = 257, kVersion = 263;

void put_octal(std::array<char, kBlock>& h, std::size_t off, std::size_t len, uint64_t v) {
  // len-1 octal digits, zero padded, then NUL.
  std::string digits(len - 1, '0');
  for (std::size_t i = len - 1; i-- > 0 && v != 0; v >>= 3) digits[i] = static_cast<char>('0' + (v & 7));
  std::memcpy(h.data() + off, digits.data(), len - 1);
  h[off + len - 1] = '\0';
}

unsigned checksum(const unsigned char* h) {
  unsigned sum = 0;
  for (std::size_t i = 0; i < kBlock; ++i) sum += (i >= kChksum && i < kChksum + kChksumLen) ? ' ' : h[i];
  return sum;
}

// An octal field: digits possibly surrounded by spaces/NULs. -1 when malformed.
int64_t parse_octal(const unsigned char* f, std::size_t len) {
  std::size_t i = 0;
  while (i < len && f[i] == ' ') ++i;
  int64_t v = 0;
  std::size_t digits = 0;
  for (; i < len && f[i] >= '0' && f[i] <= '7'; ++i, ++digits) {
    if (v > (INT64_MAX >> 3)) return -1;
    v = (v << 3) | (f[i] - '0');
  }
  for (; i < len; ++i)
    if (f[i] != ' ' && f[i] != '\0') return -1;
  return digits == 0 ? -1 : v;
}

Status io_error(const char* what) { return Error(Code::kInternal, std::string(what) + ": " + std::strerror(errno)); }

bool plain_name(std::string_view n) {
  if (n.empty() || n.size() > kNameLen || n == "." || n == "..") return false;
  return std::all_of(n.begin(), n.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
           c == '-';
  });
}

}  // namespace

Status TarWriter::header(std::string_view name, int64_t size, int64_t mtime) {
  if (!plain_name(name)) return Error(Code::kInvalidArgument, "archive member name " + std::string(name));
  std::array<char, kBlock> h{};
  std::memcpy(h.data() + kName, name.data(), name.size());
  put_octal(h, kMode, 8, 0600);
  put_octal(h, kUid, 8, 0);
  put_octal(h, kGid, 8, 0);
  put_octal(h, kSize, kSizeLen, static_cast<uint64_t>(size));
  put_octal(h, kMtime, 12, static_cast<uint64_t>(std::max<int64_t>(mtime, 0)));
  h[kType] = '0';
  std::memcpy(h.data() + kMagic, "ustar", 6);  // with its NUL
  std::memcpy(h.data() + kVersion, "00", 2);
  unsigned sum = checksum(reinterpret_cast<const unsigned char*>(h.data()));
  put_octal(h, kChksum, 7, sum);  // six digits, NUL, and the space kept below
  h[kChksum + 7] = ' ';
  if (std::fwrite(h.data(), 1, kBlock, out_) != kBlock) return io_error("write");
  return ok_status();
}

Status TarWriter::pad(int64_t size) {
  static const std::array<char, kBlock> zeros{};
  std::size_t rest = static_cast<std::size_t>(size % static_cast<int64_t>(kBlock));
  if (rest != 0 && std::fwrite(zeros.data(), 1, kBlock - rest, out_) != kBlock - rest) return io_error("write");
  return ok_status();
}

Status TarWriter::add(std::string_view name, std::string_view data, int64_t mtime) {
  if (Status s = header(name, static_cast<int64_t>(data.size()), mtime); !s) return s;
  if (std::fwrite(data.data(), 1, data.size(), out_) != data.size()) return io_error("write");
  return pad(static_cast<int64_t>(data.size()));
}

Status TarWriter::add_file(std::string_view name, const std::string& path, int64_t mtime) {
  std::FILE* in = std::fopen(path.c_str(), "rb");
  if (in == nullptr) return io_error(("open " + path).c_str());
  struct stat st{};
  if (::fstat(::fileno(in), &st) != 0) {
    std::fclose(in);
    return io_error(("stat " + path).c_str());
  }
  Status s = header(name, st.st_size, mtime);
  std::vector<char> buf(1 << 16);
  int64_t copied = 0;
  while (s) {
    std::size_t n = std::fread(buf.data(), 1, buf.size(), in);
    if (n == 0) break;
    if (std::fwrite(buf.data(), 1, n, out_) != n) s = io_error("write");
    copied += static_cast<int64_t>(n);
  }
  if (s && std::ferror(in)) s = io_error(("read " + path).c_str());
  std::fclose(in);
  // Nobody else writes the copy; a size change means something is badly wrong.
  if (s && copied != st.st_size) s = Error(Code::kInternal, path + " changed size while it was archived");
  return s ? pad(st.st_size) : s;
}

Status TarWriter::finish() {
  static const std::array<char, 2 * kBlock> zeros{};
  if (std::fwrite(zeros.data(), 1, zeros.size(), out_) != zeros.size()) return io_error("write");
  return ok_status();
}

Status read_tar(std::FILE* in, int64_t max_member_bytes, const TarVisitor& on_member) {
  std::array<unsigned char, kBlock> h{};
  int64_t offset = 0;
  for (;;) {
    std::size_t got = std::fread(h.data(), 1, kBlock, in);
    if (got != kBlock)
      return Error(Code::kInvalidArgument, "truncated archive: no end marker after byte " + std::to_string(offset));
    offset += kBlock;
    if (std::all_of(h.begin(), h.end(), [](unsigned char c) { return c == 0; })) return ok_status();
    const std::string at = " (header at byte " + std::to_string(offset - kBlock) + ")";
    int64_t sum = parse_octal(h.data() + kChksum, kChksumLen);
    if (sum < 0 || static_cast<unsigned>(sum) != checksum(h.data()))
      return Error(Code::kInvalidArgument, "archive header checksum mismatch" + at);
    if (std::memcmp(h.data() + kMagic, "ustar", 5) != 0)
      return Error(Code::kInvalidArgument, "not a ustar archive" + at);
    if (h[kType] != '0' && h[kType] != '\0')
      return Error(Code::kInvalidArgument, "archive member is not a regular file" + at);
    TarMember m;
    m.name.assign(reinterpret_cast<const char*>(h.data() + kName),
                  ::strnlen(reinterpret_cast<const char*>(h.data() + kName), kNameLen));
    if (h[345] != '\0' || !plain_name(m.name))  // a ustar prefix would make it a path
      return Error(Code::kInvalidArgument, "archive member name is not a plain file name" + at);
    m.size = parse_octal(h.data() + kSize, kSizeLen);
    if (m.size < 0) return Error(Code::kInvalidArgument, "archive member " + m.name + " has a malformed size");
    if (m.size > max_member_bytes)
      return Error(Code::kInvalidArgument, "archive member " + m.name + " is larger than " +
                                               std::to_string(max_member_bytes) + " bytes");
    int64_t left = m.size;
    bool read_once = false;
    auto read = [&](const TarSink& sink) -> Status {
      if (read_once) return Error(Code::kInternal, "archive member " + m.name + " read twice");
      read_once = true;
      std::vector<char> buf(1 << 16);
      while (left > 0) {
        std::size_t want = static_cast<std::size_t>(std::min<int64_t>(left, static_cast<int64_t>(buf.size())));
        std::size_t n = std::fread(buf.data(), 1, want, in);
        if (n == 0) return Error(Code::kInvalidArgument, "truncated archive: member " + m.name + " is cut short");
        left -= static_cast<int64_t>(n);
        offset += static_cast<int64_t>(n);
        if (Status s = sink(std::string_view(buf.data(), n)); !s) return s;
      }
      return ok_status();
    };
    if (Status s = on_member(m, read); !s) return s;
    if (Status s = read([](std::string_view) { return ok_status(); }); !s && left > 0) return s;
    // Padding to the block.
    int64_t rest = m.size % static_cast<int64_t>(kBlock);
    if (rest != 0) {
      std::array<char, kBlock> pad{};
      std::size_t n = kBlock - static_cast<std::size_t>(rest);
      if (std::fread(pad.data(), 1, n, in) != n)
        return Error(Code::kInvalidArgument, "truncated archive: member " + m.name + " is cut short");
      offset += static_cast<int64_t>(n);
    }
  }
}

}  // namespace kiln::backup
