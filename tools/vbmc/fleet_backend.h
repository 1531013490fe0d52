#pragma once
// FleetBackend: N in-memory machines for kiln-vbmc's fleet mode, and
// SingleMachineView, which shows one machine of any back-end as a back-end of
// its own (so each fleet BMC's Redfish service lists only its machine).
//
// A fleet machine has a power state, a boot override and a small fixed
// inventory (CPUs, memory, one disk, one MAC derived from its index). Resets
// follow MockupBackend::power_after. Everything is memory: a reset or boot
// change costs a map lookup, which is what lets one process stand in for
// ten thousand BMCs.
//
// Threading: methods may be called from any thread; a mutex guards the
// machines.

#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "tools/vbmc/backend.h"

namespace kiln::vbmc {

class FleetBackend : public MachineBackend {
 public:
  // `count` machines with ids fleet_machine_id(0..count-1), all powered off,
  // no boot override. `seed` varies the generated UUIDs and MACs.
  FleetBackend(std::size_t count, uint64_t seed);

  static std::string fleet_machine_id(std::size_t index);

  asio::awaitable<Result<std::vector<std::string>>> machines() override;
  asio::awaitable<Result<MachineState>> state(std::string id) override;
  asio::awaitable<Status> reset(std::string id, std::string reset_type) override;
  asio::awaitable<Status> set_boot(std::string id, BootOverride boot) override;
  asio::awaitable<Result<MachineHardware>> hardware(std::string id) override;

  // Synchronous read for tests and the manifest.
  std::size_t size() const { return machines_.size(); }

 private:
  struct Machine {
    MachineState state;
    std::string mac;
  };
  Machine* find(const std::string& id);

  mutable std::mutex mu_;  // guards machines_ (the vector's elements)
  std::vector<Machine> machines_;
  std::unordered_map<std::string, std::size_t> index_;  // id -> position, fixed after construction
};

class SingleMachineView : public MachineBackend {
 public:
  // `inner` must outlive the view.
  SingleMachineView(MachineBackend& inner, std::string id) : inner_(inner), id_(std::move(id)) {}

  asio::awaitable<Result<std::vector<std::string>>> machines() override;
  asio::awaitable<Result<MachineState>> state(std::string id) override;
  asio::awaitable<Status> reset(std::string id, std::string reset_type) override;
  asio::awaitable<Status> set_boot(std::string id, BootOverride boot) override;
  asio::awaitable<Result<MachineHardware>> hardware(std::string id) override;

 private:
  Error not_found(const std::string& id) const;
  MachineBackend& inner_;
  std::string id_;
};

}  // namespace kiln::vbmc
