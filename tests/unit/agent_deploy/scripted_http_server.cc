#include "tests/unit/agent_deploy/scripted_http_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <memory>
#include <stdexcept>

namespace kiln::test {

namespace {

bool send_all(int fd, const char* d, std::size_t n) {
  while (n > 0) {
    const ssize_t w = ::send(fd, d, n, MSG_NOSIGNAL);
    if (w <= 0) return false;
    d += w;
    n -= static_cast<std::size_t>(w);
  }
  return true;
}

const char* reason(int status) {
  switch (status) {
    case 200: return "OK";
    case 204: return "No Content";
    case 206: return "Partial Content";
    case 401: return "Unauthorized";
    case 404: return "Not Found";
    case 409: return "Conflict";
    case 416: return "Range Not Satisfiable";
    default: return "Status";
  }
}

}  // namespace

std::string ScriptedRequest::header(const std::string& name) const {
  for (const auto& [k, v] : headers)
    if (strcasecmp(k.c_str(), name.c_str()) == 0) return v;
  return {};
}

ScriptedHttpServer::ScriptedHttpServer(Handler handler) : handler_(std::move(handler)) {
  listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  const int one = 1;
  ::setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || ::listen(listen_fd_, 16) != 0)
    throw std::runtime_error("scripted server: bind/listen failed");
  socklen_t len = sizeof addr;
  ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
  port_ = ntohs(addr.sin_port);
  thread_ = std::thread([this] { serve(); });
}

ScriptedHttpServer::~ScriptedHttpServer() {
  stopping_ = true;
  ::shutdown(listen_fd_, SHUT_RDWR);
  thread_.join();
  ::close(listen_fd_);
}

std::string ScriptedHttpServer::url(const std::string& path) const {
  return "http://127.0.0.1:" + std::to_string(port_) + path;
}

std::vector<ScriptedRequest> ScriptedHttpServer::requests() const {
  std::lock_guard<std::mutex> lock(mu_);
  return requests_;
}

void ScriptedHttpServer::serve() {
  while (!stopping_) {
    pollfd p{listen_fd_, POLLIN, 0};
    if (::poll(&p, 1, 50) <= 0) continue;
    const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    handle(fd);
    ::close(fd);
  }
}

void ScriptedHttpServer::handle(int fd) {
  std::string buf;
  char tmp[65536];
  std::size_t header_end;
  while ((header_end = buf.find("\r\n\r\n")) == std::string::npos) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 5000) <= 0) return;
    const ssize_t n = ::recv(fd, tmp, sizeof tmp, 0);
    if (n <= 0) return;
    buf.append(tmp, static_cast<std::size_t>(n));
  }
  ScriptedRequest req;
  std::size_t line_end = buf.find("\r\n");
  const std::string first = buf.substr(0, line_end);
  const auto sp1 = first.find(' '), sp2 = first.rfind(' ');
  req.method = first.substr(0, sp1);
  req.target = first.substr(sp1 + 1, sp2 - sp1 - 1);
  std::size_t pos = line_end + 2;
  while (pos < header_end) {
    const std::size_t e = buf.find("\r\n", pos);
    const std::string h = buf.substr(pos, e - pos);
    const auto colon = h.find(':');
    std::string v = h.substr(colon + 1);
    v.erase(0, v.find_first_not_of(' '));
    req.headers.emplace_back(h.substr(0, colon), v);
    pos = e + 2;
  }
  std::size_t content_length = 0;
  if (auto cl = req.header("Content-Length"); !cl.empty()) content_length = std::stoul(cl);
  req.body = buf.substr(header_end + 4);
  while (req.body.size() < content_length) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 5000) <= 0) return;
    const ssize_t n = ::recv(fd, tmp, sizeof tmp, 0);
    if (n <= 0) return;
    req.body.append(tmp, static_cast<std::size_t>(n));
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    requests_.push_back(req);
  }
  const ScriptedResponse r = handler_(req);
  std::string head = "HTTP/1.1 " + std::to_string(r.status) + " " + reason(r.status) + "\r\n";
  for (const auto& [k, v] : r.headers) head += k + ": " + v + "\r\n";
  if (r.chunked) head += "Transfer-Encoding: chunked\r\n";
  else if (!r.unframed && r.status != 204) head += "Content-Length: " + std::to_string(r.body.size()) + "\r\n";
  head += "Connection: close\r\n\r\n";
  if (!send_all(fd, head.data(), head.size())) return;
  const std::size_t limit =
      r.drop_after >= 0 ? std::min(r.body.size(), static_cast<std::size_t>(r.drop_after)) : r.body.size();
  if (r.chunked) {
    for (std::size_t off = 0; off < limit; off += 1000) {
      const std::size_t n = std::min<std::size_t>(1000, limit - off);
      char size[32];
      std::snprintf(size, sizeof size, "%zx\r\n", n);
      if (!send_all(fd, size, std::strlen(size)) || !send_all(fd, r.body.data() + off, n) || !send_all(fd, "\r\n", 2))
        return;
    }
    if (r.drop_after < 0) send_all(fd, "0\r\n\r\n", 5);
  } else {
    send_all(fd, r.body.data(), limit);
  }
  ::shutdown(fd, SHUT_WR);
}

ScriptedHttpServer::Handler range_file_handler(std::string content, std::vector<long long> drops, std::string bearer) {
  auto state = std::make_shared<std::pair<std::size_t, std::vector<long long>>>(0, std::move(drops));
  auto data = std::make_shared<std::string>(std::move(content));
  return [state, data, bearer](const ScriptedRequest& req) {
    ScriptedResponse r;
    const std::size_t n = state->first++;
    if (!bearer.empty() && req.header("Authorization") != "Bearer " + bearer) {
      r.status = 401;
      r.body = "{}";
      return r;
    }
    std::size_t start = 0;
    const std::string range = req.header("Range");
    if (range.rfind("bytes=", 0) == 0) {
      start = std::stoull(range.substr(6));
      if (start >= data->size()) {
        r.status = 416;
        return r;
      }
      r.status = 206;
      r.headers.emplace_back("Content-Range", "bytes " + std::to_string(start) + "-" +
                                                  std::to_string(data->size() - 1) + "/" + std::to_string(data->size()));
    }
    r.body = data->substr(start);
    if (n < state->second.size()) r.drop_after = state->second[n];
    return r;
  };
}

}  // namespace kiln::test
