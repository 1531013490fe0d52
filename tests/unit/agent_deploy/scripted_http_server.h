#pragma once
// A tiny blocking HTTP/1.1 server for agent tests (image downloads, a fake
// kilnd). It binds 127.0.0.1 port 0, serves one connection at a time on its
// own thread, and answers each request with whatever the test's handler
// returns — including replies that misbehave on purpose: a body cut off after
// N bytes (the connection is closed mid-body), chunked framing, no framing.
// Every request is recorded so the test can check what the agent sent.

#include <atomic>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace kiln::test {

struct ScriptedRequest {
  std::string method;
  std::string target;  // "/v1/agent/lookup"
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
  std::string header(const std::string& name) const;  // case-insensitive, "" when absent
};

struct ScriptedResponse {
  int status = 200;
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
  bool chunked = false;             // Transfer-Encoding: chunked (chunks of 1000 bytes)
  bool unframed = false;            // neither Content-Length nor chunked: body ends at close
  long long drop_after = -1;        // >= 0: close the connection after this many body bytes
};

class ScriptedHttpServer {
 public:
  using Handler = std::function<ScriptedResponse(const ScriptedRequest&)>;
  explicit ScriptedHttpServer(Handler handler);
  ~ScriptedHttpServer();
  ScriptedHttpServer(const ScriptedHttpServer&) = delete;
  ScriptedHttpServer& operator=(const ScriptedHttpServer&) = delete;

  int port() const { return port_; }
  std::string url(const std::string& path = "") const;
  std::vector<ScriptedRequest> requests() const;

 private:
  void serve();
  void handle(int fd);

  Handler handler_;
  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stopping_{false};
  mutable std::mutex mu_;
  std::vector<ScriptedRequest> requests_;
  std::thread thread_;
};

// A handler serving `content` at any path with Range support (206 with
// Content-Range for "bytes=N-"). `drops` lists, per connection in order, how
// many body bytes to send before cutting the connection (-1: send it all).
ScriptedHttpServer::Handler range_file_handler(std::string content, std::vector<long long> drops = {},
                                               std::string bearer = "");

}  // namespace kiln::test
