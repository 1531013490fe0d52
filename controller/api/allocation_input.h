#pragma once
// The bodies of POST /v1/allocations and PUT /v1/allocations/{id}/lease,
// read and checked (pure; fuzzed by fuzz/api_bodies). What needs the store
// (the tenant, profile and image exist and may be used) is the route's check.

#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "common/result.h"
#include "controller/model/allocation.h"

namespace kiln::api {

// Most nodes one allocation may ask for; larger requests are a typo.
inline constexpr int64_t kMaxAllocationCount = 1000;
// Lease bounds: a minute (shorter cannot even deploy) to a year.
inline constexpr int64_t kMinLeaseSeconds = 60;
inline constexpr int64_t kMaxLeaseSeconds = 366LL * 24 * 3600;
// user_data is the tenant's cloud-config: the config drive is small.
inline constexpr std::size_t kMaxUserDataBytes = 64 * 1024;
inline constexpr std::size_t kMaxSshKeys = 64;

struct AllocationRequest {
  Allocation allocation;              // name (may be empty), profile, kind, count, image, keys, ...
  std::optional<std::string> tenant;  // staff name the tenant; a tenant token may not
};

// {"name"?, "tenant"?, "profile", "kind", "count", "image", "ssh_keys",
//  "user_data"?, "traits"?, "lease_seconds"?}. kInvalidArgument listing every
// bad field by JSON pointer (/count, /ssh_keys/0 with the key's problem,
// /lease_seconds, unknown fields, ...).
Result<AllocationRequest> parse_allocation_create(const nlohmann::json& body);

// {"lease_seconds"}: the new lease, counted from now. kInvalidArgument naming
// /lease_seconds.
Result<int64_t> parse_lease(const nlohmann::json& body);

}  // namespace kiln::api
