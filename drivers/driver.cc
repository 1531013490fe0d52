#include "drivers/driver.h"

namespace kiln {

void DriverRegistry::add(std::unique_ptr<Driver> driver) { drivers_.push_back(std::move(driver)); }

Driver* DriverRegistry::find(std::string_view name) const {
  for (const auto& d : drivers_)
    if (d->name == name) return d.get();
  return nullptr;
}

std::vector<std::string> DriverRegistry::names() const {
  std::vector<std::string> out;
  for (const auto& d : drivers_) out.push_back(d->name);
  return out;
}

namespace {

asio::awaitable<bool> held_before(HeldFn inner, std::chrono::steady_clock::time_point deadline) {
  if (std::chrono::steady_clock::now() >= deadline) co_return false;
  if (!inner) co_return true;
  bool held = co_await inner();
  co_return held;
}

}  // namespace

HeldFn held_until(HeldFn inner, std::chrono::steady_clock::time_point deadline) {
  return [inner, deadline]() { return held_before(inner, deadline); };
}

bool DriverRegistry::is_known_driver_name(std::string_view name) {
  return name == "fake" || name == "redfish" || name == "ipmi" || name == "libvirt";
}

}  // namespace kiln
