#pragma once
// ApiClient: the soak's way to call kilnd's API, whichever instance is up.
//
// Each call goes to a live instance of the cluster (a random one, so the
// instances of a PostgreSQL cluster share the load as a balancer would
// spread it); a connection that fails (the instance was just killed) is
// tried once on another live instance, and a call that reaches none comes
// back with reached == false: the caller counts it and goes on, as a client
// of a controller that is restarting would.
//
// Every answer kilnd gives is held to one rule here: no 5xx but 503 (which
// a recovering kilnd may give). Anything else is recorded as a violation of
// api-no-server-errors with the request and the body.
//
// Not thread-safe: one driving thread. Each request has a 10 s deadline.

#include <cstdint>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "bench/soak/findings.h"
#include "bench/soak/kilnd_cluster.h"

namespace kiln::testing {
class HttpTestClient;
}

namespace kiln::soak {

struct Reply {
  bool reached = false;  // false: no live instance answered
  int status = 0;
  nlohmann::json body;   // parsed when the body is JSON, else null
  std::string text;      // the raw body
  std::size_t instance = 0;
};

class ApiClient {
 public:
  ApiClient(KilndCluster& cluster, Findings& findings, uint64_t seed);
  ~ApiClient();

  // `body` is sent as JSON unless null; `token` as a bearer token;
  // `content_type` for the body (PATCH takes application/merge-patch+json).
  Reply call(std::string_view method, const std::string& target, const nlohmann::json& body,
             const std::string& token, const std::string& content_type = "application/json");
  Reply get(const std::string& target, const std::string& token) { return call("GET", target, nullptr, token); }

  int64_t requests() const { return requests_; }
  int64_t unreached() const { return unreached_; }

 private:
  testing::HttpTestClient& client_for(const KilndCluster::Endpoint& e);

  KilndCluster& cluster_;
  Findings& findings_;
  std::mt19937_64 rng_;
  // One client per instance, replaced when the instance's port changes (a
  // restart listens on a new port).
  std::map<std::size_t, std::pair<uint16_t, std::unique_ptr<testing::HttpTestClient>>> clients_;
  int64_t requests_ = 0;
  int64_t unreached_ = 0;
};

}  // namespace kiln::soak
