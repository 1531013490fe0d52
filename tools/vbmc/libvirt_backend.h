#pragma once
// LibvirtBackend: one machine per libvirt domain.
//
// Power maps to the domain lifecycle (On: virDomainCreate, ForceOff:
// virDomainDestroy, GracefulShutdown: virDomainShutdown, ForceRestart:
// virDomainReset, GracefulRestart: virDomainReboot, PowerCycle: destroy then
// create, Nmi: virDomainInjectNMI). The boot override rewrites the persistent
// definition's <os><boot dev=.../> order (Pxe: network first, Hdd: hd first)
// and redefines the domain (a restart of a running domain whose boot order has
// changed since it started is a destroy + create, so the new order takes effect as
// on a real BMC; qemu keeps its start-time order across virDomainReset);
// libvirt has no one-shot boot device, so "Once" is
// applied like "Continuous" and reported as requested, and the requested
// BootSourceOverrideMode is remembered and reported, not applied (the
// domain's firmware is not changed). Hardware comes from the domain XML.
//
// libvirt calls block, so they run on a small thread pool (two threads); the
// connection is shared by the pool threads (libvirt connections are
// thread-safe). common/blocking_pool.h is not used: under GCC 12 its run()
// frees the caller's executor early (a closure temporary inside co_await; ASan
// caught it here), so this file has its own offload written to the rules.

#include <map>
#include <memory>
#include <mutex>
#include <string>

#include <boost/asio/thread_pool.hpp>

#include "tools/vbmc/backend.h"

namespace kiln::vbmc {

class LibvirtBackend : public MachineBackend {
 public:
  // Opens `uri` (test:///default, qemu:///system). Errors: kUnavailable with
  // libvirt's message.
  static Result<std::unique_ptr<LibvirtBackend>> open(const std::string& uri);
  ~LibvirtBackend() override;

  asio::awaitable<Result<std::vector<std::string>>> machines() override;
  asio::awaitable<Result<MachineState>> state(std::string id) override;
  asio::awaitable<Status> reset(std::string id, std::string reset_type) override;
  asio::awaitable<Status> set_boot(std::string id, BootOverride boot) override;
  asio::awaitable<Result<MachineHardware>> hardware(std::string id) override;

 private:
  struct Impl;
  explicit LibvirtBackend(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
  asio::thread_pool pool_{2};
};

}  // namespace kiln::vbmc
