#include "tools/vbmc/fleet_backend.h"

#include <cstdio>

#include "tools/vbmc/mockup_backend.h"
#include "tools/vbmc/splitmix.h"

namespace kiln::vbmc {

std::string FleetBackend::fleet_machine_id(std::size_t index) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "fleet-%05zu", index);
  return buf;
}

FleetBackend::FleetBackend(std::size_t count, uint64_t seed) {
  machines_.reserve(count);
  index_.reserve(count);
  for (std::size_t i = 0; i < count; ++i) {
    Machine m;
    m.state.id = fleet_machine_id(i);
    m.state.name = m.state.id;
    const uint64_t a = splitmix64(seed * 1000003ULL + i);
    const uint64_t b = splitmix64(a);
    char uuid[40];
    std::snprintf(uuid, sizeof uuid, "%08x-%04x-4%03x-8%03x-%012llx",
                  static_cast<unsigned>(a >> 32), static_cast<unsigned>((a >> 16) & 0xFFFF),
                  static_cast<unsigned>(a & 0xFFF), static_cast<unsigned>((b >> 48) & 0xFFF),
                  static_cast<unsigned long long>(b & 0xFFFFFFFFFFFFULL));
    m.state.uuid = uuid;
    m.state.powered_on = false;
    m.state.boot.mode = "UEFI";
    char mac[24];
    std::snprintf(mac, sizeof mac, "52:54:%02x:%02x:%02x:%02x", static_cast<unsigned>((i >> 24) & 0xFF),
                  static_cast<unsigned>((i >> 16) & 0xFF), static_cast<unsigned>((i >> 8) & 0xFF),
                  static_cast<unsigned>(i & 0xFF));
    m.mac = mac;
    index_.emplace(m.state.id, i);
    machines_.push_back(std::move(m));
  }
}

FleetBackend::Machine* FleetBackend::find(const std::string& id) {
  auto it = index_.find(id);
  return it == index_.end() ? nullptr : &machines_[it->second];
}

asio::awaitable<Result<std::vector<std::string>>> FleetBackend::machines() {
  std::vector<std::string> ids;
  ids.reserve(machines_.size());
  for (const auto& m : machines_) ids.push_back(m.state.id);
  co_return ids;
}

asio::awaitable<Result<MachineState>> FleetBackend::state(std::string id) {
  std::lock_guard<std::mutex> lock(mu_);
  Machine* m = find(id);
  if (m == nullptr) co_return Error(Code::kNotFound, "no system " + id);
  co_return m->state;
}

asio::awaitable<Status> FleetBackend::reset(std::string id, std::string reset_type) {
  std::lock_guard<std::mutex> lock(mu_);
  Machine* m = find(id);
  if (m == nullptr) co_return Error(Code::kNotFound, "no system " + id);
  auto next = MockupBackend::power_after(m->state.powered_on, reset_type);
  if (!next) co_return next.take_error();
  m->state.powered_on = *next;
  co_return ok_status();
}

asio::awaitable<Status> FleetBackend::set_boot(std::string id, BootOverride boot) {
  std::lock_guard<std::mutex> lock(mu_);
  Machine* m = find(id);
  if (m == nullptr) co_return Error(Code::kNotFound, "no system " + id);
  if (!is_known_boot_target(boot.target)) {
    co_return Error(Code::kInvalidArgument, "unknown boot target " + boot.target);
  }
  m->state.boot = std::move(boot);
  co_return ok_status();
}

asio::awaitable<Result<MachineHardware>> FleetBackend::hardware(std::string id) {
  std::string mac;
  {
    std::lock_guard<std::mutex> lock(mu_);
    Machine* m = find(id);
    if (m == nullptr) co_return Error(Code::kNotFound, "no system " + id);
    mac = m->mac;
  }
  MachineHardware h;
  h.cpus = 64;
  h.memory_mib = 512 * 1024;
  MachineDisk disk;
  disk.name = "nvme0n1";
  disk.size_bytes = int64_t{3840} * 1000 * 1000 * 1000;
  h.disks.push_back(disk);
  h.macs.push_back(mac);
  co_return h;
}

// ---- SingleMachineView ---------------------------------------------------------------------------

Error SingleMachineView::not_found(const std::string& id) const {
  return Error(Code::kNotFound, "no system " + id);
}

asio::awaitable<Result<std::vector<std::string>>> SingleMachineView::machines() {
  std::vector<std::string> ids(1, id_);
  co_return ids;
}

asio::awaitable<Result<MachineState>> SingleMachineView::state(std::string id) {
  if (id != id_) co_return not_found(id);
  auto r = co_await inner_.state(id);
  co_return r;
}

asio::awaitable<Status> SingleMachineView::reset(std::string id, std::string reset_type) {
  if (id != id_) co_return not_found(id);
  Status r = co_await inner_.reset(id, reset_type);
  co_return r;
}

asio::awaitable<Status> SingleMachineView::set_boot(std::string id, BootOverride boot) {
  if (id != id_) co_return not_found(id);
  Status r = co_await inner_.set_boot(id, boot);
  co_return r;
}

asio::awaitable<Result<MachineHardware>> SingleMachineView::hardware(std::string id) {
  if (id != id_) co_return not_found(id);
  auto r = co_await inner_.hardware(id);
  co_return r;
}

}  // namespace kiln::vbmc
