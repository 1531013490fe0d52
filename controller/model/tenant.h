#pragma once
// Tenant: who nodes are handed to (docs/tenancy.md). Named by `name`, the key
// nodes, tokens and events carry in their `tenant` field. Quotas cap the
// nodes of one profile and kind a tenant may hold; a profile and kind with no
// quota row is zero nodes.

#include <cstdint>
#include <string>
#include <vector>

#include "controller/model/states.h"  // NodeKind

namespace kiln {

struct TenantQuota {
  std::string profile;
  NodeKind kind = NodeKind::kBaremetal;
  int64_t max_nodes = 0;  // >= 0
};

struct Tenant {
  std::string name;          // key: 1-63 of [a-z0-9-], starting with a letter or digit
  std::string display_name;  // free text for people, may be empty
  std::vector<TenantQuota> quotas;  // at most one per (profile, kind)
  int64_t created_at = 0;    // ms since the epoch
  int64_t updated_at = 0;
  int64_t version = 0;       // bumped by every change; the ETag
};

}  // namespace kiln
