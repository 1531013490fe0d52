#pragma once
// The world a soak runs in, built through kilnd's API before the chaos starts.
//
//   image     soak-os: a public raw OS image (4 KiB of zeros) tenants deploy
//   tenants   acme (quota 4), globex (3), initech (3) nodes of cpu-lab
//             baremetal, each with a tenant token named "soak-<tenant>"
//   pool      9 fake nodes of profile cpu-lab, made available (manage,
//             provide) for the tenants' allocations: 10 nodes of quota over
//             9 nodes, so some requests are refused for want of nodes;
//             pool-8's deploys always fail (its allocation replaces it, or
//             fails when it cannot)
//   ops       8 fake nodes without a profile, left in enroll for the
//             operator verbs: a range of step and power delays, one whose
//             inspect and clean fail, one whose power fails, one whose every
//             step waits for a file that never appears (each of its
//             operations ends by timeout), one slow one
//   redfish   one node per kiln-vbmc BMC (bmc_fleet.h), with a port, so a
//             provide boots for an agent that never comes (cleaning times
//             out); the faulty BMCs fail or time out every call
//
// build_world() throws std::runtime_error naming the step that failed.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "bench/soak/api_client.h"
#include "bench/soak/bmc_fleet.h"
#include "bench/soak/isolation_probe.h"

namespace kiln::soak {

enum class NodeRole { kPool, kOps, kRedfish };

struct WorldNode {
  std::string id;
  std::string name;
  NodeRole role = NodeRole::kOps;
  std::string note;  // what is special about it ("", "deploy fails", "bmc dead", ...)
};

struct World {
  std::string admin_token;
  std::string image;
  std::string profile;  // the pool's profile, the one the quotas name
  std::vector<TenantLogin> tenants;
  std::map<std::string, int64_t> quotas;  // tenant -> max nodes of the pool's profile
  std::vector<WorldNode> nodes;

  std::vector<const WorldNode*> with_role(NodeRole role) const;
};

// The admin token kilnd is started with (--bootstrap-token).
inline constexpr char kAdminToken[] = "kiln_soak_admin_token_000000001";

// Writes the image file kilnd registers into `image_dir` (one of kilnd's
// --image-dir).
void write_image_file(const std::string& image_dir);

World build_world(ApiClient& api, const BmcFleet& fleet, const std::string& image_dir, uint64_t seed);

}  // namespace kiln::soak
