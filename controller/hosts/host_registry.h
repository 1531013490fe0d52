#pragma once
// HostRegistry: kilnd's hypervisor hosts at run time.
//
// One HostConnection per registered host. A connect opens it, discovers the
// host's capacity (discover_capacity) and records the outcome in the store:
// status `ready` with the capacity, or `unreachable` with the reason. A
// check notices dropped connections (the keep-alive / close callback), marks
// the host unreachable at once with the reason, and reconnects with
// exponential backoff (initial_backoff doubling to max_backoff); a
// successful reconnect re-discovers capacity and marks the host ready again.
//
// When checks run. The check loop sleeps until something can be due: a
// drop libvirt reports (the close callback wakes it at once), the end of a
// failed connect's backoff, a host met for the first time; and, while any
// host is known (or always, between kilnd sharing a store), check_interval
// after the last check, the safety net for a drop libvirt did not report
// and the way a host registered through another kilnd is found. With no
// host known on a sole kilnd (every host is registered through it, which
// wakes the loop) it never wakes: an idle kilnd without hypervisors does no
// work here. A host the store has but this registry has not met yet is
// connected in the background on its first use (connection()).
//
// Connects never block a caller. libvirt's open has no deadline of its own
// and cannot be cancelled: a qemu+ssh:// or qemu+tcp:// peer that accepts and
// never answers holds it for minutes or for ever. So each connect (open and
// discovery) runs on a thread of its own, at most max_connects of them at
// once across all hosts and one per host; a coroutine on the I/O executor
// waits for it without blocking. When connect_timeout passes first, the host
// is recorded `unreachable` ("connect timed out ...") and the attempt is left
// to finish in the background; its late outcome is recorded when it comes. A
// hung attempt keeps its slot until libvirt returns, which bounds the threads
// that a set of dead hosts can pin; the rest of libvirt's work (the `virt`
// pool) never waits behind it. Such a thread touches only the host's
// connection and shared counters, never the registry, so it may outlive it.
//
// A deleted host (forget()) is done with: its connection is closed, a
// connect in flight drops its result (closing what it opened), and neither
// the check loop nor connect_in_background() opens it again.
//
// It is also the libvirt driver's DomainDirectory: a node's domain is where
// its VirtualMachine row says.
//
// Threading: public coroutines run on kilnd's I/O executor; store calls run
// on the `virt` BlockingPool. The connection map is under a mutex never held
// across a blocking call.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <utility>  // before Asio (docs/coroutines.md)

#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>

#include "common/blocking_pool.h"
#include "common/crypto.h"
#include "common/log.h"
#include "controller/store/host_store.h"
#include "drivers/libvirt/connection.h"
#include "drivers/libvirt/libvirt_driver.h"

namespace kiln {

struct HostRegistryOptions {
  // The longest the check loop sleeps while there is something to check
  // (above: "When checks run"). Drops libvirt reports are seen at once; one
  // it does not is seen within this, as is, between kilnd sharing a store,
  // a host registered through another kilnd.
  std::chrono::milliseconds check_interval{std::chrono::seconds(60)};
  std::chrono::milliseconds initial_backoff{std::chrono::seconds(1)};
  std::chrono::milliseconds max_backoff{std::chrono::seconds(60)};
  // How long a connect (open and discovery) may take before the host is
  // shown unreachable. Long enough for an ssh handshake over a slow link,
  // short enough that an operator sees a dead URI within a minute.
  std::chrono::milliseconds connect_timeout{std::chrono::seconds(30)};
  // Connect threads alive at once across all hosts. A hung open keeps its
  // thread until libvirt gives up, so this is the most a set of dead hosts
  // can pin; hosts past it wait (and time out) for a free slot.
  int max_connects = 8;
  // This is the only kilnd on its store (SQLite): every host is registered
  // through it (connect_in_background), so with none known the loop sleeps
  // until one is. Otherwise the loop looks for hosts registered elsewhere
  // every check_interval.
  bool sole = false;
};

// Blocking: capabilities, node info and NVIDIA PCI devices of `conn`.
Result<HostCapacity> discover_capacity(_virConnect* conn, Logger& log);

class HostRegistry final : public libvirt::DomainDirectory {
 public:
  // `io`, `store`, `virt` and `secrets` must outlive the registry (connect
  // threads left running past it do not use them).
  HostRegistry(asio::io_context& io, HostStore& store, BlockingPool& virt, const SecretBox& secrets,
               HostRegistryOptions options, Logger log);
  ~HostRegistry() override;

  // Checks every stored host once (starting their connects, without waiting
  // for them), then starts the check loop.
  asio::awaitable<void> start();
  // Ends the check loop and every wait; connects in flight finish unseen.
  void stop();

  // Starts connecting the host in the background, ignoring backoff, and
  // returns at once: for request handlers. Any thread. No-op while a connect
  // of the host is in flight, after forget(), or after stop(). The outcome
  // lands in the store (`ready` or `unreachable` with the reason).
  void connect_in_background(const std::string& host_id);
  // Connects the host now, ignoring backoff, and waits for the outcome or
  // connect_timeout (a connect already in flight is waited for, not
  // repeated). Returns the host as stored after; kNotFound when it is gone.
  // Waits up to connect_timeout: never call it from a request handler.
  asio::awaitable<Result<Host>> connect(std::string host_id);
  // Stops all work for a deleted host (see above). Any thread.
  void forget(const std::string& host_id);
  // One pass of the check loop (tests call it directly). Starts connects but
  // does not wait for them.
  asio::awaitable<void> check_all();
  // Passes of check_all() begun so far (start()'s, the loop's, the tests').
  int checks_for_test() const { return checks_.load(); }

  // Blocking: the host's open connection, or kUnavailable with the reason
  // (a host in the store that this registry has not met is connected in the
  // background meanwhile). kNotFound when the store has no such host.
  Result<libvirt::ConnPtr> connection(const std::string& host_id);
  // Test hooks: drops the host's connection as a dead peer would; connects
  // started so far (each one a libvirt open), for all hosts.
  void drop_for_test(const std::string& host_id);
  int connects_started_for_test() const { return connects_started_.load(); }

  Result<std::optional<libvirt::DomainLocation>> locate(const std::string& node_id) override;

 public:
  struct StatusUpdate;  // a store status write (host_registry.cc)

 private:
  struct Entry {
    std::string id;
    std::shared_ptr<libvirt::HostConnection> conn;
    std::atomic<bool> gone{false};  // set by forget(); read by connect threads
    std::mutex m;                   // guards the fields below
    bool connecting = false;        // a connect coroutine owns the host
    std::chrono::steady_clock::time_point next_attempt{};
    std::chrono::milliseconds backoff{0};
    bool was_ready = false;
  };
  // Shared with connect threads, which may outlive the registry.
  struct Slots {
    std::atomic<int> in_use{0};
  };
  // How a connection's drop (libvirt's event-loop thread) wakes the loop;
  // shared with the connections, which may outlive the registry: the
  // destructor empties it.
  struct DropWake {
    std::mutex m;
    std::function<void()> wake;  // guarded by m
  };

  // The host's entry (created on first use); null after forget().
  std::shared_ptr<Entry> entry_for(const Host& h);
  // Marks the entry connecting and spawns attempt(); false when it already was.
  bool begin_connect(const std::shared_ptr<Entry>& e, const Host& h);
  // One connect: waits for a slot, runs open + discovery on a thread of its
  // own, records timeout and outcome. Clears e->connecting when done.
  asio::awaitable<void> attempt(std::shared_ptr<Entry> e, std::string host_name);
  asio::awaitable<void> connect_later(std::string host_id);
  asio::awaitable<void> record(StatusUpdate u);
  asio::awaitable<void> pause(std::chrono::milliseconds d);
  asio::awaitable<void> loop();
  // When the loop must check next (see "When checks run"); nullopt: only
  // when woken. Any thread.
  std::optional<std::chrono::steady_clock::time_point> next_check() const;
  // Wakes the loop: `check` makes it check at once, otherwise it only plans
  // its sleep again (a backoff ended sooner than it sleeps). Any thread.
  void wake(bool check);

  asio::io_context& io_;
  HostStore& store_;
  BlockingPool& virt_;
  const SecretBox& secrets_;
  const HostRegistryOptions opt_;
  Logger log_;
  // The loop and its timer run on this strand; wake() posts the timer's
  // cancel here, so a wake-up cannot slip between the loop's look at its
  // flags and the start of its wait.
  asio::strand<asio::io_context::executor_type> strand_;
  asio::steady_timer timer_;
  std::atomic<bool> stopped_{false};
  std::atomic<bool> check_now_{false};  // set by wake(true) before the cancel is posted
  std::atomic<int> checks_{0};
  std::atomic<int64_t> last_check_ns_{0};  // steady clock, when check_all() last began
  std::shared_ptr<DropWake> drop_wake_ = std::make_shared<DropWake>();
  std::shared_ptr<Slots> slots_ = std::make_shared<Slots>();
  std::atomic<int> connects_started_{0};
  mutable std::mutex mu_;
  std::map<std::string, std::shared_ptr<Entry>> entries_;  // by host id; guarded by mu_
  std::set<std::string> forgotten_;                        // deleted host ids; guarded by mu_
};

}  // namespace kiln
