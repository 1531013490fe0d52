#pragma once
// TestServer: an HttpServer on 127.0.0.1:0 with its io_context running on
// background threads, plus a log sink the test can read. The destructor stops
// the server and joins the threads (so a server that fails to drain hangs the
// test visibly rather than leaking).

#include <chrono>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio/io_context.hpp>

#include "common/http/server.h"
#include "common/log.h"
#include "tests/support/wait_until.h"

namespace kiln::http::testing {

class CaptureSink : public LogSink {
 public:
  void write(std::string_view line) override {
    std::lock_guard<std::mutex> lock(mu_);
    lines_.emplace_back(line);
  }
  std::vector<std::string> lines() const {
    std::lock_guard<std::mutex> lock(mu_);
    return lines_;
  }
  // Lines containing every one of `parts`.
  std::vector<std::string> find(std::initializer_list<std::string_view> parts) const {
    std::vector<std::string> out;
    for (const auto& l : lines()) {
      bool all = true;
      for (auto p : parts) all = all && l.find(p) != std::string::npos;
      if (all) out.push_back(l);
    }
    return out;
  }

 private:
  mutable std::mutex mu_;
  std::vector<std::string> lines_;
};

// The error replies a test server produces: status and detail, recognisable.
inline Response test_error_responder(int status, std::string_view detail) {
  Response res{static_cast<bhttp::status>(status), 11};
  res.set(bhttp::field::content_type, "application/problem+json");
  res.body() = "{\"status\":" + std::to_string(status) + ",\"detail\":\"" + std::string(detail) + "\"}";
  return res;
}

inline ServerOptions test_options() {
  ServerOptions o;
  o.host = "127.0.0.1";
  o.port = 0;
  return o;
}

class TestServer {
 public:
  TestServer(ServerOptions options, Handler handler, int threads = 2, LogLevel level = LogLevel::kDebug)
      : sink_(std::make_shared<CaptureSink>()),
        server_(std::make_unique<HttpServer>(io_, std::move(options), std::move(handler),
                                             test_error_responder,
                                             Logger(sink_, level))) {
    auto st = server_->start();
    if (!st) throw std::runtime_error("server start: " + st.error().message);
    for (int i = 0; i < threads; ++i) {
      std::packaged_task<void()> task([this] { io_.run(); });
      done_.push_back(task.get_future());
      threads_.emplace_back(std::move(task));
    }
  }

  ~TestServer() { shutdown(); }

  // Stops the server; true when every io thread returned within `limit`.
  bool shutdown(std::chrono::milliseconds limit = std::chrono::seconds(5)) {
    if (threads_.empty()) return stopped_cleanly_;
    server_->stop();
    stopped_cleanly_ = true;
    const auto deadline = std::chrono::steady_clock::now() + limit;
    for (auto& f : done_) {
      if (f.wait_until(deadline) != std::future_status::ready) stopped_cleanly_ = false;
    }
    if (!stopped_cleanly_) io_.stop();  // do not hang the suite; the test fails instead
    for (auto& t : threads_) t.join();
    threads_.clear();
    return stopped_cleanly_;
  }

  HttpServer& server() { return *server_; }
  uint16_t port() const { return server_->port(); }
  const CaptureSink& log() const { return *sink_; }

 private:
  boost::asio::io_context io_;
  std::shared_ptr<CaptureSink> sink_;
  std::unique_ptr<HttpServer> server_;
  std::vector<std::thread> threads_;
  std::vector<std::future<void>> done_;
  bool stopped_cleanly_ = false;
};

// Polls `pred` every 10 ms until it holds or `limit` passes.
inline bool eventually(const std::function<bool()>& pred,
                       std::chrono::milliseconds limit = std::chrono::seconds(3)) {
  return kiln::testing::wait_until(pred, limit);
}

}  // namespace kiln::http::testing
