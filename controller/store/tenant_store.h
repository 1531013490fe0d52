#pragma once
// TenantStore: tenants and their quotas (controller/model/tenant.h).
//
// Threading and errors as NodeStore (controller/store/store.h): every method
// is safe from any thread and blocks on disk I/O.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/result.h"
#include "controller/model/tenant.h"

namespace kiln {

// Nodes a tenant holds, per (profile, kind).
using TenantUsage = std::map<std::pair<std::string, NodeKind>, int64_t>;

class TenantStore {
 public:
  virtual ~TenantStore() = default;

  // Inserts `tenant` with its quotas; created_at, updated_at and version are
  // set here. kConflict naming "/name" when the name is taken.
  virtual Result<Tenant> create_tenant(const Tenant& tenant) = 0;
  // kNotFound when there is no such tenant.
  virtual Result<Tenant> get_tenant(std::string_view name) = 0;
  // Every tenant, by name.
  virtual Result<std::vector<Tenant>> list_tenants() = 0;
  // Replaces display_name and the whole quota list of tenant.name, when its
  // version is `expected_version`. kNotFound; kPreconditionFailed on another
  // version.
  virtual Result<Tenant> replace_tenant(const Tenant& tenant, int64_t expected_version) = 0;
  // Deletes the tenant, its quotas and its API tokens (a token of a deleted
  // tenant must not come back to life if the name is reused) in one
  // transaction. kNotFound; kConflict when any node is still assigned to it
  // or an allocation of it is live (neither released nor failed).
  virtual Status delete_tenant(std::string_view name) = 0;
  // The nodes assigned to tenant `name`, counted per (profile, kind).
  virtual Result<TenantUsage> tenant_usage(std::string_view name) = 0;
  // tenant_usage of every tenant holding a node, in one query (for lists).
  virtual Result<std::map<std::string, TenantUsage>> usage_by_tenant() = 0;
};

}  // namespace kiln
