#include "controller/api/allocation_input.h"

#include <vector>

#include "common/ids.h"
#include "controller/api/json_input.h"
#include "controller/api/tenant_input.h"
#include "controller/model/states.h"
#include "controller/tenancy/ssh_key.h"

namespace kiln::api {

using nlohmann::json;

namespace {

void check_lease(const std::optional<int64_t>& lease, std::vector<FieldError>& errors) {
  if (lease && (*lease < kMinLeaseSeconds || *lease > kMaxLeaseSeconds))
    errors.push_back({"/lease_seconds", "must be an integer from " + std::to_string(kMinLeaseSeconds) + " to " +
                                            std::to_string(kMaxLeaseSeconds)});
}

}  // namespace

Result<AllocationRequest> parse_allocation_create(const json& body) {
  std::vector<FieldError> errors;
  ObjectReader r(body, "", errors);
  AllocationRequest out;
  Allocation& a = out.allocation;
  if (auto name = r.string("name")) {
    if (!is_resource_name(*name))
      errors.push_back({"/name", "must be 1-63 characters of a-z, 0-9, '-' and '_', starting with a letter or digit"});
    // A reference is an id or a name (GET /v1/allocations/{id|name}): a
    // name that looks like an id could shadow, or be shadowed by, another
    // allocation's id.
    else if (is_uuid(*name))
      errors.push_back({"/name", "must not look like a UUID (allocations are looked up by id or name)"});
    a.name = *name;
  }
  if (auto tenant = r.string("tenant")) {
    if (!is_resource_name(*tenant)) errors.push_back({"/tenant", "is not a tenant name"});
    out.tenant = *tenant;
  }
  if (auto profile = r.string("profile", true)) {
    if (profile->empty() || profile->size() > 128) errors.push_back({"/profile", "must be 1-128 characters"});
    a.profile = *profile;
  }
  if (auto kind = r.string("kind", true)) {
    if (std::optional<NodeKind> k = parse_node_kind(*kind)) a.kind = *k;
    else errors.push_back({"/kind", "must be baremetal or virtual"});
  }
  std::optional<int64_t> count = r.integer("count");
  if (r.is_object() && !count && !(body.contains("count") && !body["count"].is_null()))
    errors.push_back({"/count", "is required"});
  if (count && (*count < 1 || *count > kMaxAllocationCount))
    errors.push_back({"/count", "must be an integer from 1 to " + std::to_string(kMaxAllocationCount)});
  a.count = count.value_or(0);
  if (auto image = r.string("image", true)) {
    if (image->empty() || image->size() > 255) errors.push_back({"/image", "must be 1-255 characters"});
    a.image = *image;
  }
  if (r.is_object() && !r.has("ssh_keys")) {
    errors.push_back({"/ssh_keys", "is required: at least one OpenSSH public key to log in with"});
  } else if (auto keys = r.string_array("ssh_keys")) {
    if (keys->empty()) errors.push_back({"/ssh_keys", "must have at least one key"});
    if (keys->size() > kMaxSshKeys)
      errors.push_back({"/ssh_keys", "must have at most " + std::to_string(kMaxSshKeys) + " keys"});
    for (std::size_t i = 0; i < keys->size() && i < kMaxSshKeys; ++i) {
      Status k = check_ssh_public_key((*keys)[i], "/ssh_keys/" + std::to_string(i));
      if (!k)
        for (const FieldError& f : k.error().fields) errors.push_back(f);
    }
    a.ssh_keys = *keys;
  }
  if (auto user_data = r.string("user_data")) {
    if (user_data->size() > kMaxUserDataBytes)
      errors.push_back({"/user_data", "must be at most " + std::to_string(kMaxUserDataBytes) + " bytes"});
    a.user_data = *user_data;
  }
  if (auto traits = r.string_array("traits")) {
    if (traits->size() > 64) errors.push_back({"/traits", "must have at most 64 entries"});
    for (std::size_t i = 0; i < traits->size(); ++i)
      if ((*traits)[i].empty() || (*traits)[i].size() > 255)
        errors.push_back({"/traits/" + std::to_string(i), "must be 1-255 characters"});
    a.traits = *traits;
  }
  std::optional<int64_t> lease = r.integer("lease_seconds");
  check_lease(lease, errors);
  a.lease_seconds = lease.value_or(0);
  r.finish();
  if (!errors.empty()) return invalid_fields(std::move(errors));
  return out;
}

Result<int64_t> parse_lease(const json& body) {
  std::vector<FieldError> errors;
  ObjectReader r(body, "", errors);
  std::optional<int64_t> lease = r.integer("lease_seconds");
  if (r.is_object() && !lease && errors.empty()) errors.push_back({"/lease_seconds", "is required"});
  check_lease(lease, errors);
  r.finish();
  if (!errors.empty()) return invalid_fields(std::move(errors));
  return *lease;
}

}  // namespace kiln::api
