#pragma once
// File and qemu-img plumbing shared by the qcow2 inspection
// (qcow2_image.cc) and conversion (qcow2_convert.cc). Internal to kiln_boot.
// Thread-safe free functions; Fd is a plain RAII owner (one thread at a time).

#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>

#include "common/result.h"

namespace kiln::boot::qcow2_io {

class Fd {
 public:
  explicit Fd(int fd = -1) : fd_(fd) {}
  ~Fd() { reset(); }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  bool ok() const { return fd_ >= 0; }
  void reset(int fd = -1) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = fd;
  }
  // close() reporting its error (a delayed write error shows here).
  int close_checked() {
    const int rc = ::close(fd_);
    fd_ = -1;
    return rc;
  }

 private:
  int fd_;
};

inline bool disk_full(int e) { return e == ENOSPC || e == EDQUOT; }

inline Error io_error(int e, const std::string& what) {
  if (disk_full(e)) return Error(Code::kInsufficientStorage, "no space left on device (" + what + ")");
  return Error(Code::kInternal, what + ": " + std::strerror(e));
}

// qemu's option syntax: a ',' in a value is written ',,'.
inline std::string qemu_opt_value(const std::string& v) {
  std::string out;
  out.reserve(v.size());
  for (char c : v) {
    out += c;
    if (c == ',') out += ',';
  }
  return out;
}

// The source as qemu sees it: always qcow2 over a plain file, never a probe or
// a protocol chosen by the file's name.
inline std::string qcow2_opts(const std::string& path) {
  return "driver=qcow2,file.driver=file,file.filename=" + qemu_opt_value(path);
}

// What qemu-img said, short and on one line, for a message.
inline std::string tool_words(const std::string& err) {
  std::string s = err.substr(0, 400);
  for (char& c : s)
    if (c == '\n' || c == '\r') c = ' ';
  while (!s.empty() && s.back() == ' ') s.pop_back();
  return s;
}

inline Result<int64_t> full_pread(int fd, uint8_t* buf, size_t n, int64_t at, size_t* got) {
  *got = 0;
  while (*got < n) {
    const ssize_t r = ::pread(fd, buf + *got, n - *got, at + static_cast<int64_t>(*got));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return io_error(errno, "reading");
    if (r == 0) break;
    *got += static_cast<size_t>(r);
  }
  return static_cast<int64_t>(*got);
}

}  // namespace kiln::boot::qcow2_io
