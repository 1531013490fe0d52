#pragma once
// ApiClient: the CLI's synchronous face of kilnd's REST API.
//
// The CLI is a short-lived, single-threaded program, so each call runs the
// project's asynchronous HttpClient on the client's own io_context until that
// one request completes. The same io_context serves the event stream
// (sse_follower.h), which is why it is exposed.
//
// Errors are values: a problem+json answer becomes an Error whose code is the
// HTTP status's (common/error.h) and whose fields are the problem's `errors`
// (JSON pointers), so exit_code.h can say 2 for a 400 and 4 for "/count";
// transport failures are kUnavailable naming the URL; an answer that is not
// JSON is kInternal. Not thread-safe: one client per thread.

#include <utility>  // before Asio: Boost 1.74 awaitable.hpp uses std::exchange
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include <boost/asio/io_context.hpp>
#include <nlohmann/json.hpp>

#include "cli/config.h"
#include "common/http/client.h"
#include "common/result.h"

namespace kiln::cli {

class ApiClient {
 public:
  explicit ApiClient(Config config);
  ~ApiClient();

  // `path` is "/v1/..." (with any query) or an absolute URL (a list's next).
  Result<nlohmann::json> get(const std::string& path);
  Result<nlohmann::json> post(const std::string& path, const nlohmann::json& body);
  Result<nlohmann::json> put(const std::string& path, const nlohmann::json& body);
  // JSON Merge Patch (application/merge-patch+json).
  Result<nlohmann::json> patch(const std::string& path, const nlohmann::json& body);
  Result<nlohmann::json> del(const std::string& path);

  // GET a list and follow its `next` links; returns {"<key>": [all items]}.
  Result<nlohmann::json> list(const std::string& path, const std::string& key);

  // A request with the URL, token and TLS settings filled in (for streams).
  http::ClientRequest request_for(http::bhttp::verb method, const std::string& path) const;
  // Turns a non-2xx answer into an Error (problem+json when it is one).
  static Error error_from(const http::Response& response);

  boost::asio::io_context& io() { return io_; }
  http::HttpClient& http() { return *http_; }
  const Config& config() const { return config_; }

 private:
  Result<nlohmann::json> call(http::bhttp::verb method, const std::string& path, const nlohmann::json* body,
                              const char* content_type);

  Config config_;
  boost::asio::io_context io_;
  std::unique_ptr<http::HttpClient> http_;
};

// Runs `aw` on `io` until it completes and returns its value. For the CLI's
// one-thread, one-thing-at-a-time use only.
template <typename T>
T run_sync(boost::asio::io_context& io, boost::asio::awaitable<T> aw);

}  // namespace kiln::cli

#include "cli/api_client_inl.h"
