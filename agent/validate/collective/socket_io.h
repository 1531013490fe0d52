#pragma once
// Deadline-bounded I/O on non-blocking sockets for the tcp collective: every
// wait is a poll() with the time left, also woken by a cancel pipe, so a
// peer that goes quiet costs at most the participant's deadline and a
// cancelled root returns at once. Partial reads and writes, EINTR and EAGAIN
// are handled here; writes use MSG_NOSIGNAL, so a peer that hangs up is an
// error value, never SIGPIPE.

#include <chrono>
#include <cstddef>
#include <string>
#include <utility>

namespace kiln::agent {

// An owned file descriptor (closed by the destructor).
class SocketFd {
 public:
  SocketFd() = default;
  explicit SocketFd(int fd) : fd_(fd) {}
  SocketFd(SocketFd&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  SocketFd& operator=(SocketFd&& o) noexcept;
  SocketFd(const SocketFd&) = delete;
  SocketFd& operator=(const SocketFd&) = delete;
  ~SocketFd() { reset(); }
  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  void reset();

 private:
  int fd_ = -1;
};

// When to give up, and a pipe whose readability means "cancelled" (-1: the
// wait cannot be cancelled).
struct IoDeadline {
  std::chrono::steady_clock::time_point at;
  int cancel_fd = -1;
};

enum class Io { kOk, kTimeout, kClosed, kCancelled };

struct IoResult {
  Io kind = Io::kOk;
  std::string what;  // kClosed: the system's words ("Connection reset by peer")
  bool ok() const { return kind == Io::kOk; }
};

// kClosed with `what`.
IoResult io_closed(const std::string& what);

// Waits until `fd` is ready for `events` (POLLIN/POLLOUT) or hung up.
IoResult wait_ready(int fd, short events, const IoDeadline& d);

// Sends all `n` bytes; kClosed when the other end went away.
IoResult send_all(int fd, const void* data, std::size_t n, const IoDeadline& d);

// Receives exactly `n` bytes; kClosed ("connection closed") on EOF first.
IoResult recv_all(int fd, void* data, std::size_t n, const IoDeadline& d);

// TCP_NODELAY: the control frames are small and latency-bound.
void set_nodelay(int fd);

}  // namespace kiln::agent
