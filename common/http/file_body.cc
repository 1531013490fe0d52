// File replies (file_body.h) and OpenFile (server.h).
//
// On plain TCP the bytes go with sendfile(2) straight from the page cache: the
// socket is non-blocking, so sendfile writes what fits and the session waits
// for writability in between. Those waits are on the raw socket, outside
// tcp_stream's expiry, so a FileWatch timer cancels them when no byte has
// moved for write_timeout. A session yields its thread every few MiB so one
// fast reader cannot starve the others sharing the thread. On TLS the file is
// read into a buffer and written through the TLS stream, each write with the
// stream's own deadline.

#include "common/http/file_body.h"

#include <fcntl.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>

namespace kiln::http {

namespace detail {

namespace {

// Buffered (TLS) read size, and bytes sent before yielding the thread.
constexpr std::size_t kFileBufferBytes = 256 * 1024;
constexpr uint64_t kFileYieldBytes = 8 * 1024 * 1024;

// Cancels a file reply's socket waits when no byte has moved for `timeout`.
// Armed once per timeout period (not per wait): the handler re-arms itself
// for the rest of the period when there was progress since it was set.
// Everything runs on the session's strand.
struct FileWatch {
  FileWatch(asio::any_io_executor ex, tcp::socket& s, std::chrono::seconds t)
      : timer(std::move(ex)), socket(s), timeout(t) {}
  asio::steady_timer timer;
  tcp::socket& socket;  // valid while !done (the session is running the reply)
  std::chrono::seconds timeout;
  SteadyClock::time_point last_progress = SteadyClock::now();
  bool done = false;
  bool fired = false;

  static void arm(const std::shared_ptr<FileWatch>& w) {
    w->timer.expires_at(w->last_progress + w->timeout);
    w->timer.async_wait([w](const beast::error_code& ec) {
      if (ec || w->done) return;
      if (SteadyClock::now() - w->last_progress < w->timeout) {
        arm(w);
        return;
      }
      w->fired = true;
      beast::error_code ignored;
      w->socket.cancel(ignored);
    });
  }
  void finish() {
    done = true;
    timer.cancel();
  }
};

}  // namespace

asio::awaitable<bool> send_file_bytes(PlainStream& stream, const FileBody& body,
                                      std::chrono::seconds write_timeout, const Logger& log,
                                      const std::string& remote) {
  tcp::socket& sock = stream.socket();
  beast::error_code ec;
  sock.native_non_blocking(true, ec);
  if (ec) co_return false;
  auto watch = std::make_shared<FileWatch>(stream.get_executor(), sock, write_timeout);
  FileWatch::arm(watch);
  off_t offset = static_cast<off_t>(body.offset);
  uint64_t left = body.length;
  uint64_t since_yield = 0;
  bool ok = true;
  std::string failure;
  while (left > 0) {
    const std::size_t chunk = static_cast<std::size_t>(std::min<uint64_t>(left, 1u << 30));
    const ssize_t n = ::sendfile(sock.native_handle(), body.file->fd(), &offset, chunk);
    if (n > 0) {
      left -= static_cast<uint64_t>(n);
      since_yield += static_cast<uint64_t>(n);
      watch->last_progress = SteadyClock::now();
      if (since_yield >= kFileYieldBytes && left > 0) {
        since_yield = 0;
        co_await asio::post(stream.get_executor(), asio::use_awaitable);
      }
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      since_yield = 0;
      co_await sock.async_wait(tcp::socket::wait_write, redirect(ec));
      if (ec) {
        ok = false;
        break;
      }
      continue;
    }
    // 0: the file is shorter than promised; <0: the peer is gone (EPIPE,
    // ECONNRESET) or the file cannot be read (EIO).
    ok = false;
    failure = n == 0 ? "end of file" : std::strerror(errno);
    break;
  }
  watch->finish();
  if (!failure.empty() && failure != std::strerror(EPIPE) && failure != std::strerror(ECONNRESET))
    log.warn("file reply cut short", {{"remote", remote}, {"error", failure}});
  co_return ok;
}

asio::awaitable<bool> send_file_bytes(TlsStream& stream, const FileBody& body,
                                      std::chrono::seconds write_timeout, const Logger& log,
                                      const std::string& remote) {
  std::vector<char> buf(kFileBufferBytes);
  uint64_t offset = body.offset;
  uint64_t left = body.length;
  beast::error_code ec;
  while (left > 0) {
    const std::size_t want = static_cast<std::size_t>(std::min<uint64_t>(left, buf.size()));
    const ssize_t n = ::pread(body.file->fd(), buf.data(), want, static_cast<off_t>(offset));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      log.warn("file reply cut short",
               {{"remote", remote}, {"error", n < 0 ? std::strerror(errno) : "end of file"}});
      co_return false;
    }
    beast::get_lowest_layer(stream).expires_after(write_timeout);
    co_await asio::async_write(stream, asio::buffer(buf.data(), static_cast<std::size_t>(n)), redirect(ec));
    if (ec) co_return false;
    offset += static_cast<uint64_t>(n);
    left -= static_cast<uint64_t>(n);
  }
  co_return true;
}

}  // namespace detail

Result<std::shared_ptr<OpenFile>> OpenFile::open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int e = errno;
    std::string msg = path + ": " + std::strerror(e);
    if (e == ENOENT || e == ENOTDIR) return Error(Code::kNotFound, msg);
    if (e == EACCES || e == EPERM) return Error(Code::kPermissionDenied, msg);
    return Error(Code::kInternal, msg);
  }
  Result<std::shared_ptr<OpenFile>> file = adopt(fd);
  if (!file) return Error(file.error().code, path + ": " + file.error().message);
  return file;
}

Result<std::shared_ptr<OpenFile>> OpenFile::adopt(int fd) {
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return Error(Code::kInvalidArgument, "not a regular file");
  }
  return std::shared_ptr<OpenFile>(new OpenFile(fd, static_cast<uint64_t>(st.st_size)));
}

OpenFile::~OpenFile() { ::close(fd_); }

}  // namespace kiln::http
