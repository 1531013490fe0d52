#pragma once
// HostRegistry: kilnd's hypervisor hosts at run time (issue 7).
//
// One HostConnection per registered host. connect() opens it, discovers the
// host's capacity (discover_capacity) and records the outcome in the store:
// status `ready` with the capacity, or `unreachable` with libvirt's message.
// A periodic check (every check_interval) notices dropped connections (the
// keep-alive / close callback), marks the host unreachable at once with the
// reason, and reconnects with exponential backoff (initial_backoff doubling
// to max_backoff); a successful reconnect re-discovers capacity and marks
// the host ready again.
//
// It is also the libvirt driver's DomainDirectory: a node's domain is where
// its VirtualMachine row says.
//
// Threading: public coroutines run on kilnd's I/O executor; libvirt and store
// calls run on the `virt` BlockingPool. The connection map is under a mutex
// never held across a blocking call.

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>  // before Asio (docs/coroutines.md)

#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include "common/blocking_pool.h"
#include "common/crypto.h"
#include "common/log.h"
#include "controller/store/store.h"
#include "drivers/libvirt/connection.h"
#include "drivers/libvirt/libvirt_driver.h"

namespace kiln {

struct HostRegistryOptions {
  // How often connections are checked: a dropped host is seen within this.
  std::chrono::milliseconds check_interval{std::chrono::seconds(5)};
  std::chrono::milliseconds initial_backoff{std::chrono::seconds(1)};
  std::chrono::milliseconds max_backoff{std::chrono::seconds(60)};
};

// Blocking: capabilities, node info and NVIDIA PCI devices of `conn`.
Result<HostCapacity> discover_capacity(_virConnect* conn, Logger& log);

class HostRegistry final : public libvirt::DomainDirectory {
 public:
  HostRegistry(asio::io_context& io, NodeStore& store, BlockingPool& virt, const SecretBox& secrets,
               HostRegistryOptions options, Logger log);
  ~HostRegistry() override;

  // Connects every stored host (outcomes recorded), then starts the check loop.
  asio::awaitable<void> start();
  void stop();

  // Connects (or reconnects) the host now, ignoring backoff, discovers its
  // capacity and records the outcome. Returns the host as stored after it.
  asio::awaitable<Result<Host>> connect(std::string host_id);
  // Closes and forgets the host's connection (after it was deleted).
  void forget(const std::string& host_id);
  // One pass of the check loop (tests call it directly).
  asio::awaitable<void> check_all();

  // Blocking: the host's open connection, or kUnavailable with the reason.
  Result<libvirt::ConnPtr> connection(const std::string& host_id);
  // Test hook: drops the host's connection as a dead peer would.
  void drop_for_test(const std::string& host_id);

  Result<std::optional<libvirt::DomainLocation>> locate(const std::string& node_id) override;

 private:
  struct Entry {
    std::mutex m;  // serializes connects of one host; guards the fields below
    std::shared_ptr<libvirt::HostConnection> conn;
    std::chrono::steady_clock::time_point next_attempt{};
    std::chrono::milliseconds backoff{0};
    bool was_ready = false;
  };
  // Blocking body of connect(): open, discover, record.
  Result<Host> connect_blocking(const std::string& host_id, bool respect_backoff);
  std::shared_ptr<Entry> entry_for(const Host& h);
  asio::awaitable<void> loop();

  asio::io_context& io_;
  NodeStore& store_;
  BlockingPool& virt_;
  const SecretBox& secrets_;
  const HostRegistryOptions opt_;
  Logger log_;
  asio::steady_timer timer_;
  std::atomic<bool> stopped_{false};
  std::mutex mu_;
  std::map<std::string, std::shared_ptr<Entry>> entries_;  // by host id; guarded by mu_
};

}  // namespace kiln
