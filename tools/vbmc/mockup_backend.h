#pragma once
// MockupTree and MockupBackend: a captured Redfish service served from disk.
//
// A tree is what the DMTF Redfish Mockup Creator writes: one index.json per
// resource, laid out by URI. Two layouts are accepted: DIR/redfish/v1/...
// (the creator's own) and DIR/... where DIR itself is /redfish/v1 (DMTF's
// published mockups).
//
// The tree is read-only; what a client changes lives in memory in the
// backend: each ComputerSystem's PowerState and Boot override start from the
// captured values, Reset actions and Boot PATCHes change them, and the
// Redfish front-end overlays them on the captured resource.

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "tools/vbmc/backend.h"

namespace kiln::vbmc {

class MockupTree {
 public:
  // Errors: kInvalidArgument when DIR holds neither layout.
  static Result<std::unique_ptr<MockupTree>> open(const std::string& dir);

  // The resource at `uri` ("/redfish/v1/Systems/1", trailing slash ignored);
  // nullopt when the tree has none (or the URI tries to leave the tree).
  std::optional<nlohmann::json> load(const std::string& uri) const;

 private:
  explicit MockupTree(std::string v1_dir) : v1_dir_(std::move(v1_dir)) {}
  std::string v1_dir_;  // the directory that is /redfish/v1
};

class MockupBackend : public MachineBackend {
 public:
  // Reads the Systems collection and each system's PowerState and Boot.
  // Errors: kInvalidArgument when the tree has no Systems collection.
  static Result<std::unique_ptr<MockupBackend>> create(const MockupTree& tree);

  asio::awaitable<Result<std::vector<std::string>>> machines() override;
  asio::awaitable<Result<MachineState>> state(std::string id) override;
  asio::awaitable<Status> reset(std::string id, std::string reset_type) override;
  asio::awaitable<Status> set_boot(std::string id, BootOverride boot) override;
  asio::awaitable<Result<MachineHardware>> hardware(std::string id) override;

  // Pure state transition of a reset (exposed for tests): the power state
  // after `reset_type` from `on`. Errors: kInvalidArgument for unknown types.
  static Result<bool> power_after(bool on, const std::string& reset_type);

 private:
  struct Machine {
    MachineState state;
    MachineHardware hardware;
  };
  std::vector<std::string> ids_;
  mutable std::mutex mu_;  // guards machines_
  std::map<std::string, Machine> machines_;
};

}  // namespace kiln::vbmc
