#include "agent/validate/collective/socket_io.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>

namespace kiln::agent {

using Clock = std::chrono::steady_clock;

SocketFd& SocketFd::operator=(SocketFd&& o) noexcept {
  if (this != &o) {
    reset();
    fd_ = std::exchange(o.fd_, -1);
  }
  return *this;
}

void SocketFd::reset() {
  if (fd_ >= 0) close(fd_);
  fd_ = -1;
}

IoResult io_closed(const std::string& what) { return {Io::kClosed, what}; }

IoResult wait_ready(int fd, short events, const IoDeadline& d) {
  for (;;) {
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(d.at - Clock::now());
    if (left.count() <= 0) return {Io::kTimeout, ""};
    pollfd fds[2] = {{fd, events, 0}, {d.cancel_fd, POLLIN, 0}};  // poll ignores a negative fd
    const int n = poll(fds, 2, static_cast<int>(std::min<long long>(left.count(), INT_MAX)));
    if (n < 0) {
      if (errno == EINTR) continue;
      return io_closed(std::string("poll: ") + std::strerror(errno));
    }
    if (fds[1].revents != 0) return {Io::kCancelled, "cancelled"};
    if (fds[0].revents != 0) return {};
  }
}

IoResult send_all(int fd, const void* data, std::size_t n, const IoDeadline& d) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t w = send(fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w > 0) {
      p += w;
      n -= static_cast<std::size_t>(w);
      continue;
    }
    if (w < 0 && errno == EINTR) continue;
    if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (auto s = wait_ready(fd, POLLOUT, d); !s.ok()) return s;
      continue;
    }
    return io_closed(w < 0 ? std::strerror(errno) : "send returned 0");
  }
  return {};
}

IoResult recv_all(int fd, void* data, std::size_t n, const IoDeadline& d) {
  char* p = static_cast<char*>(data);
  while (n > 0) {
    const ssize_t r = recv(fd, p, n, MSG_DONTWAIT);
    if (r > 0) {
      p += r;
      n -= static_cast<std::size_t>(r);
      continue;
    }
    if (r == 0) return io_closed("connection closed");
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      if (auto s = wait_ready(fd, POLLIN, d); !s.ok()) return s;
      continue;
    }
    return io_closed(std::strerror(errno));
  }
  return {};
}

void set_nodelay(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

}  // namespace kiln::agent
