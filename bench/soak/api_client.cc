#include "bench/soak/api_client.h"

#include <algorithm>
#include <chrono>

#include "tests/support/http_test_client.h"

namespace kiln::soak {

ApiClient::ApiClient(KilndCluster& cluster, Findings& findings, uint64_t seed)
    : cluster_(cluster), findings_(findings), rng_(seed) {}

ApiClient::~ApiClient() = default;

testing::HttpTestClient& ApiClient::client_for(const KilndCluster::Endpoint& e) {
  auto& slot = clients_[e.instance];
  if (!slot.second || slot.first != e.port) {
    slot.first = e.port;
    slot.second = std::make_unique<testing::HttpTestClient>("127.0.0.1", e.port, false, std::chrono::seconds(10));
  }
  return *slot.second;
}

Reply ApiClient::call(std::string_view method, const std::string& target, const nlohmann::json& body,
                      const std::string& token, const std::string& content_type) {
  ++requests_;
  std::vector<KilndCluster::Endpoint> live = cluster_.live();
  std::shuffle(live.begin(), live.end(), rng_);
  testing::Headers headers = {{"Authorization", "Bearer " + token}};
  if (!body.is_null()) headers["Content-Type"] = content_type;
  Reply reply;
  for (std::size_t i = 0; i < live.size() && i < 2; ++i) {
    testing::HttpTestClient& c = client_for(live[i]);
    try {
      testing::TestResponse r = c.request(method, target, body.is_null() ? std::string() : body.dump(), headers);
      reply.reached = true;
      reply.status = r.status;
      reply.text = std::move(r.body);
      reply.instance = live[i].instance;
      reply.body = nlohmann::json::parse(reply.text, nullptr, /*allow_exceptions=*/false);
      if (reply.body.is_discarded()) reply.body = nullptr;
      break;
    } catch (const std::exception&) {
      c.close();  // killed under us, or a deadline: the next call reconnects
    }
  }
  if (!reply.reached) {
    ++unreached_;
    return reply;
  }
  if (reply.status >= 500 && reply.status != 503)
    findings_.broken(invariant::kApiNoServerErrors,
                     std::string(method) + " " + target + " on kilnd " + std::to_string(reply.instance) + " -> " +
                         std::to_string(reply.status) + " " + reply.text.substr(0, 400));
  return reply;
}

}  // namespace kiln::soak
