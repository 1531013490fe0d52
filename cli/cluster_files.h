#pragma once
// What `kiln cluster up` leaves for the job once every group is ready, in
// one directory:
//
//   cluster.json   the cluster and every node: id, name, group, profile,
//                  kind, addresses, ssh, gpus (the API's values; addresses
//                  and ssh are empty/null until kilnd reports them)
//   hostfile       MPI: "<address> slots=<gpus, or 1 when none>" per node
//   ssh_config     "Host <node-name>" with HostName and User per node
//   inventory.ini  Ansible: one [group] per spec group
//
// A node without a reported address cannot be reached, so it gets no
// hostfile line and a comment instead of an ssh_config/inventory entry: the
// files never invent an address. Each file is written whole (temp + rename).

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/result.h"

namespace kiln::cli {

// One node as cluster.json lists it (see above).
struct ClusterNode {
  std::string id, name, group, profile, kind;
  std::vector<std::string> addresses;
  std::string ssh;  // "user@address", empty when not reported
  int64_t gpus = 0;
};

nlohmann::json cluster_document(const std::string& cluster, const nlohmann::json& groups,
                                const std::vector<ClusterNode>& nodes);

// The texts of hostfile, ssh_config and inventory.ini.
std::string hostfile_text(const std::vector<ClusterNode>& nodes);
std::string ssh_config_text(const std::vector<ClusterNode>& nodes);
std::string inventory_text(const std::vector<std::string>& groups, const std::vector<ClusterNode>& nodes);

// Writes the four files into `dir` (created when missing). Errors:
// kInvalidArgument naming the path that could not be written.
Status write_cluster_files(const std::string& dir, const std::string& cluster, const nlohmann::json& groups,
                           const std::vector<std::string>& group_names, const std::vector<ClusterNode>& nodes);

}  // namespace kiln::cli
