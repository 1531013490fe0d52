#pragma once
// Ansible INI inventory text: one `[group]` per group, one line per reachable
// node,
//
//   [workers]
//   w0 ansible_host=10.0.0.5 ansible_user=ubuntu
//   # w1: no address reported yet
//
// Ansible's INI reader splits a host line with shlex, treats `key=value` as a
// variable, `[a:b]` in a name as a host range, `name:port` as a port, `#`/`;`
// as a comment and `[` at a line start as a group; the parsed types
// (cli/host_fields.h) carry none of those characters, so every value stays
// one token. Pure and thread-compatible.

#include <optional>
#include <string>
#include <vector>

#include "cli/host_fields.h"

namespace kiln::cli {

struct InventoryHost {
  HostAlias name;
  std::optional<IpLiteral> address;  // empty: a comment, no host line
  std::optional<LoginName> user;
};

struct InventoryGroup {
  GroupName name;
  std::vector<InventoryHost> hosts;
};

std::string inventory_text(const std::vector<InventoryGroup>& groups);

}  // namespace kiln::cli
