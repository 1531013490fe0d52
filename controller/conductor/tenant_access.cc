#include "controller/conductor/tenant_access.h"

namespace kiln {

TenantAccessLookup tenant_access_from(AllocationStore& store, BlockingPool& db) {
  return [&store, &db](std::string id) -> asio::awaitable<Result<TenantAccess>> {
    // Any tenant's: kilnd itself asks, by id ("" = no tenant filter).
    Result<Allocation> a = co_await db.run([&] { return store.get_allocation(id, ""); });
    if (!a) co_return a.take_error();
    TenantAccess access;
    access.ssh_keys = a->ssh_keys;
    access.user_data = a->user_data;
    co_return access;
  };
}

}  // namespace kiln
