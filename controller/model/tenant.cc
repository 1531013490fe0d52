#include "controller/model/tenant.h"

namespace kiln {

int64_t quota_limit(const Tenant& t, const std::string& profile, const std::string& kind) {
  for (const TenantQuota& q : t.quotas)
    if (q.profile == profile && q.kind == kind) return q.max_nodes;
  return 0;
}

}  // namespace kiln
