#include "stream_proxy.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <stdexcept>

namespace kiln::testing {

StreamProxy::StreamProxy(uint16_t upstream_port) : upstream_(upstream_port) {
  listener_ = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  if (::bind(listener_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(listener_, 16) != 0)
    throw std::runtime_error("proxy: cannot listen");
  socklen_t len = sizeof a;
  ::getsockname(listener_, reinterpret_cast<sockaddr*>(&a), &len);
  port_ = ntohs(a.sin_port);
  acceptor_ = std::thread([this] { accept_loop(); });
}

StreamProxy::~StreamProxy() {
  stopping_ = true;
  ::shutdown(listener_, SHUT_RDWR);
  ::close(listener_);
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (Link* l : links_) {
      ::shutdown(l->client, SHUT_RDWR);
      ::shutdown(l->upstream, SHUT_RDWR);
    }
  }
  acceptor_.join();
  for (auto& t : threads_) t.join();
  for (Link* l : links_) {
    ::close(l->client);
    ::close(l->upstream);
    delete l;
  }
}

void StreamProxy::accept_loop() {
  while (!stopping_) {
    pollfd p{listener_, POLLIN, 0};
    if (::poll(&p, 1, 100) <= 0) continue;
    const int c = ::accept(listener_, nullptr, nullptr);
    if (c < 0) continue;
    const int u = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(upstream_);
    if (::connect(u, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
      ::close(c);
      ::close(u);
      continue;
    }
    auto* link = new Link{c, u, "", false};
    std::lock_guard<std::mutex> lock(mu_);
    links_.push_back(link);
    threads_.emplace_back([this, link] { pump(link); });
  }
}

void StreamProxy::pump(Link* link) {
  char buf[16384];
  for (;;) {
    pollfd p[2] = {{link->client, POLLIN, 0}, {link->upstream, POLLIN, 0}};
    if (::poll(p, 2, 200) < 0) return;
    if (stopping_) return;
    for (int i = 0; i < 2; ++i) {
      if (!(p[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      const ssize_t n = ::recv(p[i].fd, buf, sizeof buf, 0);
      if (n <= 0) {
        ::shutdown(link->client, SHUT_RDWR);
        ::shutdown(link->upstream, SHUT_RDWR);
        return;
      }
      if (i == 0) {
        std::lock_guard<std::mutex> lock(mu_);
        if (link->head.size() < 4096) {
          link->head.append(buf, static_cast<std::size_t>(n));
          link->stream = link->head.rfind("GET /v1/events/stream", 0) == 0;
        }
      }
      if (i == 1) {
        std::lock_guard<std::mutex> lock(mu_);
        if (link->stream) {
          // Each SSE event kilnd sends starts with its "id:" line.
          std::string seen = link->tail + std::string(buf, static_cast<std::size_t>(n));
          for (std::size_t at = 0; (at = seen.find("\nid:", at)) != std::string::npos; ++at) ++stream_events_;
          link->tail = seen.substr(seen.size() > 4 ? seen.size() - 4 : 0);
        }
      }
      const int to = i == 0 ? link->upstream : link->client;
      if (::send(to, buf, static_cast<std::size_t>(n), MSG_NOSIGNAL) != n) {
        ::shutdown(link->client, SHUT_RDWR);
        ::shutdown(link->upstream, SHUT_RDWR);
        return;
      }
    }
  }
}

int StreamProxy::drop_streams() {
  std::lock_guard<std::mutex> lock(mu_);
  int n = 0;
  for (Link* l : links_) {
    if (!l->stream) continue;
    ::shutdown(l->client, SHUT_RDWR);
    ::shutdown(l->upstream, SHUT_RDWR);
    l->stream = false;  // counted once
    ++n;
  }
  return n;
}

int StreamProxy::stream_events() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stream_events_;
}

std::vector<std::string> StreamProxy::stream_requests() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::string> out;
  for (const Link* l : links_)
    if (l->head.rfind("GET /v1/events/stream", 0) == 0) out.push_back(l->head);
  return out;
}

}  // namespace kiln::testing
