#pragma once
// The spec of `kiln cluster up -f cluster.yaml` (schemas/cluster.schema.json
// is the same contract as a JSON Schema, for editors and other tools):
//
//   name: ci-smoke            # the cluster; allocations are named <name>-<group>
//   lease_seconds: 3600       # optional: the reaper releases it if the job dies
//   ssh_keys: ["ssh-ed25519 AAAA... ci@example"]
//   user_data: |              # optional: the tenant's cloud-init user-data, every node
//     #cloud-config
//     runcmd: [[touch, /etc/ci-ready]]
//   groups:
//     - {name: workers, profile: h100-sxm-8x, kind: baremetal, count: 2, image: ubuntu-22.04}
//     - {name: dev, profile: h100-vm-1x, kind: virtual, count: 1, image: ubuntu-22.04, traits: []}
//
// A cluster's allocations are found by their names alone (`cluster down
// NAME` and `cluster list` keep no state outside kilnd), so the name must say
// where the cluster ends. It is <name>-<group> when the group's name has no
// '-' (the common case, and the only one before group names could have
// one), else <name>--<group>. Neither name may hold "--" or end in '-', so
// split_allocation_name() cuts at the first "--" when there is one, else at
// the last '-', and gets back exactly the two names.
//
// Checked here, before anything is created: every problem is one FieldError
// whose field is the spec path ("groups[0].count") and whose message says
// what is expected ("must be an integer >= 1"); unknown fields are refused
// (a typo such as `cuont` must not silently mean the default). Pure; any thread.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/result.h"

namespace kiln::cli {

struct ClusterGroup {
  std::string name;
  std::string profile;
  std::string kind;  // baremetal | virtual
  int64_t count = 0;
  std::string image;
  std::vector<std::string> traits;
};

struct ClusterSpec {
  std::string name;
  std::optional<int64_t> lease_seconds;
  std::vector<std::string> ssh_keys;
  std::optional<std::string> user_data;  // sent as each allocation's user_data
  std::vector<ClusterGroup> groups;

  std::string allocation_name(const ClusterGroup& g) const;
};

// An allocation name split into the cluster and group it was made for.
struct ClusterPart {
  std::string cluster;
  std::string group;
};

// Errors: kInvalidArgument carrying one FieldError per problem found.
Result<ClusterSpec> parse_cluster_spec(const nlohmann::json& doc);

// The cluster and group of an allocation named `allocation_name`; nullopt
// when the name has no '-' and so was not made by `cluster up`.
std::optional<ClusterPart> split_allocation_name(const std::string& allocation_name);

}  // namespace kiln::cli
