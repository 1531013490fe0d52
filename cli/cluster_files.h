#pragma once
// What `kiln cluster up` leaves for the job once every group is ready, in
// one directory:
//
//   cluster.json   the cluster and every node: id, name, group, profile,
//                  kind, addresses, ssh, gpus (addresses and ssh are
//                  empty/null until kilnd reports them)
//   hostfile       MPI: "<address> slots=<gpus, or 1 when none>" per node
//   ssh_config     "Host <node-name>" with HostName and User per node
//   inventory.ini  Ansible: one [group] per spec group
//   known_hosts    each node's SSH host keys (as its OS phoned them home to
//                  kilnd), under its name and addresses; when every node
//                  in ssh_config has keys, ssh_config pins them with
//                  StrictHostKeyChecking yes and UserKnownHostsFile, so
//                  the first connection is verified, never trusted blindly
//
// The node values come from kilnd, which got the addresses from the machine
// itself: they are untrusted. Each is parsed into the writers' types
// (cli/host_fields.h) first; one that does not parse refuses the whole set
// (no file is written) with an error naming the node and the field, e.g.
//   node gpu-01: addresses/0: "fe80::1%eth0\nProxyCommand ..." is not an IP address
// because a file that ssh or Ansible would read differently from what Kiln
// meant is worse than none. cluster.json carries the parsed (canonical)
// values too, so every file agrees.
//
// A node without a reported address cannot be reached, so it gets no
// hostfile line and a comment instead of an ssh_config/inventory entry: the
// files never invent an address. All five files are written under temporary
// names first and renamed into place only once every one was written.

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/result.h"

namespace kiln::cli {

// One node as the API described it (raw, unchecked).
struct ClusterNode {
  std::string id, name, group, profile, kind;
  std::vector<std::string> addresses;
  std::string ssh;  // "user@address", empty when not reported
  int64_t gpus = 0;
  // ssh_host_keys as (type, base64 key), empty when the OS has not posted them.
  std::vector<std::pair<std::string, std::string>> ssh_host_keys;
};

// The five files' texts.
struct ClusterFiles {
  std::string cluster_json, hostfile, ssh_config, inventory, known_hosts;
  bool pinned = false;  // ssh_config pins host keys to known_hosts
};

// Parses every node and renders the files. Errors: kUnprocessable (exit 2)
// with one field "node <label>: <field>" where <field> is id (always
// checked: it must be a host-alias token), name,
// addresses/<i>, ssh or gpus (the label is the node's name when that parses,
// else its id, else the quoted value); a name used by two nodes (compared
// case-insensitively: ssh lowercases the name it connects to, so names
// differing only in case are confusable) is refused the same way, and so is a
// name that is another node's address (ssh and known_hosts would take this
// node for that one); a group name
// that is not a GroupName is refused naming "group <index>"; a host key
// that is not one (common/ssh_host_key.h) names "ssh_host_keys/<i>".
// `known_hosts_path` is where the known_hosts file will be (absolute): when
// every node with an address has host keys, ssh_config pins them to it
// (kInvalidArgument naming "--output-dir" when that path cannot be written
// into ssh_config, cli/ssh_config_writer.h); "" never pins.
Result<ClusterFiles> render_cluster_files(const std::string& cluster, const nlohmann::json& groups,
                                          const std::vector<std::string>& group_names,
                                          const std::vector<ClusterNode>& nodes,
                                          const std::string& known_hosts_path = "");

// render_cluster_files() (pinning to `dir`/known_hosts made absolute), then
// writes the five files into `dir` (created
// when missing). Errors: those of render_cluster_files(), before anything
// is written; kInvalidArgument naming the path that could not be written.
Status write_cluster_files(const std::string& dir, const std::string& cluster, const nlohmann::json& groups,
                           const std::vector<std::string>& group_names, const std::vector<ClusterNode>& nodes);

}  // namespace kiln::cli
