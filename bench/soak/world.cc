#include "bench/soak/world.h"

#include <fstream>
#include <random>
#include <stdexcept>
#include <thread>

#include "bench/soak/api_values.h"
#include "tests/support/wait_until.h"

namespace kiln::soak {

namespace {

using nlohmann::json;

constexpr char kImageName[] = "soak-os";
constexpr char kImageFile[] = "soak-os.img";
// sha256 of 4096 zero bytes
constexpr char kImageSha256[] = "ad7facb2586fc6e966c004d7d1d16b024f5805ff7cb47c7a85dabd8b48892ca7";
constexpr char kProfile[] = "cpu-lab";
constexpr int kPoolSize = 9;
constexpr int kOpsSize = 8;

// A setup call that must answer `want`.
json must(ApiClient& api, std::string_view method, const std::string& target, const json& body, int want,
          const std::string& what, const std::string& content_type = "application/json") {
  Reply r = api.call(method, target, body, kAdminToken, content_type);
  if (!r.reached || r.status != want)
    throw std::runtime_error("setting up the soak: " + what + ": " + std::string(method) + " " + target + " -> " +
                             (r.reached ? std::to_string(r.status) + " " + r.text.substr(0, 500) : "no kilnd answered"));
  return r.body;
}

// Creates a node and returns its id.
std::string create_node(ApiClient& api, const json& body) {
  return str(must(api, "POST", "/v1/nodes", body, 201, "enrolling " + str(body["name"]))["id"]);
}

// Waits until every node of `ids` is `state` and free; throws naming the
// ones that are not.
void wait_state(ApiClient& api, const std::vector<std::string>& ids, const std::string& state) {
  std::string missing;
  bool ok = testing::wait_until(
      [&] {
        Reply r = api.get("/v1/nodes?limit=1000", kAdminToken);
        if (!r.reached || r.status != 200) return false;
        std::map<std::string, json> by_id;
        for (const json& n : r.body["nodes"]) by_id[str(n["id"])] = n;
        missing.clear();
        for (const std::string& id : ids) {
          const json& n = by_id[id];
          if (str(n.value("provision_state", json())) != state || !n.value("reservation", json()).is_null())
            missing += " " + str(n.value("name", json())) + "=" + str(n.value("provision_state", json())) + "(" +
                       str(n.value("last_error", json())) + ")";
        }
        return missing.empty();
      },
      std::chrono::seconds(180), std::chrono::milliseconds(500));
  if (!ok) throw std::runtime_error("setting up the soak: nodes not " + state + " after 180 s:" + missing);
}

void tenants(ApiClient& api, World& w) {
  const std::vector<std::pair<std::string, int64_t>> all = {{"acme", 4}, {"globex", 3}, {"initech", 3}};
  for (const auto& [name, quota] : all) {
    must(api, "POST", "/v1/tenants",
         {{"name", name}, {"quotas", json::array({{{"profile", kProfile}, {"kind", "baremetal"}, {"max_nodes", quota}}})}},
         201, "tenant " + name);
    json t = must(api, "POST", "/v1/tokens", {{"name", "soak-" + name}, {"role", "tenant"}, {"tenant", name}}, 201,
                  "token of " + name);
    w.tenants.push_back({name, str(t["token"])});
    w.quotas[name] = quota;
  }
}

void pool(ApiClient& api, World& w, std::mt19937_64& rng) {
  std::vector<std::string> ids;
  for (int i = 0; i < kPoolSize; ++i) {
    const std::string name = "pool-" + std::to_string(i);
    json options = {{"step_delay_ms", std::uniform_int_distribution<int>(200, 1200)(rng)},
                    {"power_delay_ms", std::uniform_int_distribution<int>(100, 500)(rng)}};
    std::string note;
    if (i == kPoolSize - 1) {
      options["fail"] = json::array({"deploy"});
      note = "deploy fails";
    }
    const std::string id = create_node(api, {{"name", name}, {"profile", kProfile},
                                             {"bmc", {{"driver", "fake"}, {"address", "fake-" + name}, {"options", options}}}});
    w.nodes.push_back({id, name, NodeRole::kPool, note});
    ids.push_back(id);
  }
  for (const std::string& id : ids)
    must(api, "PUT", "/v1/nodes/" + id + "/states/provision", {{"target", "manage"}}, 202, "managing pool node " + id);
  wait_state(api, ids, "manageable");
  for (const std::string& id : ids)
    must(api, "PUT", "/v1/nodes/" + id + "/states/provision", {{"target", "provide"}}, 202, "providing pool node " + id);
  wait_state(api, ids, "available");
}

void ops(ApiClient& api, World& w, std::mt19937_64& rng) {
  for (int i = 0; i < kOpsSize; ++i) {
    const std::string name = "ops-" + std::to_string(i);
    json options = {{"step_delay_ms", std::uniform_int_distribution<int>(200, 2000)(rng)},
                    {"power_delay_ms", std::uniform_int_distribution<int>(100, 1500)(rng)}};
    std::string note;
    if (i == 4) {
      options["fail"] = json::array({"inspect", "clean"});
      note = "inspect and clean fail";
    } else if (i == 5) {
      options["fail"] = json::array({"power"});
      note = "power fails";
    } else if (i == 6) {
      options["hold_until_file"] = "/nonexistent/kiln-soak-hold";
      note = "every step hangs until its timeout";
    } else if (i == 7) {
      options["step_delay_ms"] = 6000;
      note = "slow";
    }
    const std::string id = create_node(api, {{"name", name}, {"bmc", {{"driver", "fake"}, {"address", "fake-" + name},
                                                                      {"options", options}}}});
    w.nodes.push_back({id, name, NodeRole::kOps, note});
  }
}

void redfish(ApiClient& api, World& w, const BmcFleet& fleet) {
  int i = 0;
  for (const FleetBmc& b : fleet.bmcs()) {
    const std::string name = "rf-" + b.name;
    char mac[18];
    std::snprintf(mac, sizeof mac, "52:54:00:77:%02x:%02x", (i >> 8) & 0xff, i & 0xff);
    ++i;
    const std::string id = create_node(
        api, {{"name", name},
              {"ports", json::array({{{"address", mac}}})},
              {"bmc", {{"driver", "redfish"}, {"address", b.address}, {"username", b.username}, {"password", b.password},
                       {"system_id", b.system_id}, {"verify_tls", false}, {"options", {{"request_timeout_s", 2}}}}}});
    w.nodes.push_back({id, name, NodeRole::kRedfish, b.fault.empty() ? std::string() : "bmc " + b.fault});
  }
}

}  // namespace

std::vector<const WorldNode*> World::with_role(NodeRole role) const {
  std::vector<const WorldNode*> out;
  for (const WorldNode& n : nodes)
    if (n.role == role) out.push_back(&n);
  return out;
}

void write_image_file(const std::string& image_dir) {
  std::ofstream(image_dir + "/" + kImageFile) << std::string(4096, '\0');
}

World build_world(ApiClient& api, const BmcFleet& fleet, const std::string& image_dir, uint64_t seed) {
  std::mt19937_64 rng(seed);
  World w;
  w.admin_token = kAdminToken;
  w.image = kImageName;
  w.profile = kProfile;
  must(api, "POST", "/v1/images",
       {{"name", kImageName}, {"kind", "os"}, {"format", "raw"}, {"source", image_dir + "/" + kImageFile},
        {"public", true}, {"size", 4096}, {"sha256", kImageSha256}},
       201, "registering the image");
  tenants(api, w);
  pool(api, w, rng);
  ops(api, w, rng);
  redfish(api, w, fleet);
  return w;
}

}  // namespace kiln::soak
