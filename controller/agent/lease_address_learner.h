#pragma once
// LeaseAddressLearner: a deployed node's addresses from this kilnd's DHCP
// leases, for an OS that runs no kiln-agent (a distro cloud image with
// cloud-init) and so never reports any. Without it such a node shows no
// `addresses` and no `ssh` login, `kiln cluster up` writes an empty hostfile
// and the portal says "not reachable yet".
//
// What is recorded. The node's `addresses` by LeaseIndex::node_addresses
// (controller/boot/lease_addresses.h: current leases of its ports' MACs,
// canonical, bounded, never an address the file gives someone else), with
// address_source "dhcp", its `ssh` login (the image's ssh_user) and a
// node.addresses event {addresses, ssh, source} carrying the node's tenant.
// Only while the node's OS is up and its deploy is the current one
// (learns_leased_addresses), and never over an agent's report (Node's
// AddressSource says why the agent wins). Each write is conditional on the
// node's version as it was read, so a node that moved on meanwhile (an
// undeploy began, an agent reported) is left alone.
//
// Why these addresses cannot leak into the next tenant's view: forget(),
// which starts every boot attempt (undeploy's cleaning included), empties
// addresses, address_source and ssh whatever their source, and no state
// after it is one this class writes in until the next deploy's OS is up.
//
// When the lease file is read (the design choice):
//  - at the phone-home post (learn(node_id), from api/phone_home_routes.cc):
//    the caller was just bound to one of the node's leases, the OS is up
//    by definition, and the tenant is waiting for the address;
//  - by the sweep (run()): whenever the file changes (dnsmasq rewrites it on
//    every lease and renewal; a stat per poll_interval), and every
//    resync_interval anyway, because a node turns active, or a lease
//    expires, without the file changing. A sweep reads and indexes the file
//    once and lists the active nodes a page at a time.
// The sweep writes only what differs, so an idle fleet costs a stat a
// second and a list of the active nodes every resync_interval.
//
// Threading: learn() and run() on any I/O thread; the file, the store and
// stat() run on the BlockingPool. stop() from any thread (idempotent); the
// loop ends at its next wake-up.

#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <string>
#include <utility>  // before Asio (docs/coroutines.md)

#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include "common/blocking_pool.h"
#include "common/clock.h"
#include "common/log.h"
#include "common/result.h"
#include "controller/model/node.h"
#include "controller/store/catalogue_store.h"
#include "controller/store/node_repo.h"

namespace kiln {

namespace boot {
class LeaseIndex;
}

namespace asio = boost::asio;

struct LeaseAddressLearnerOptions {
  // How often the lease file is stat()ed for a change: a new lease shows
  // within about this.
  std::chrono::milliseconds poll_interval{1000};
  // The sweep that catches what no file change announces (a node turned
  // active, a lease expired).
  std::chrono::milliseconds resync_interval{std::chrono::seconds(10)};
};

// Whether kilnd records DHCP addresses for `node` as it is now: its OS is up
// in the current deploy: active, or deploying / validating once the OS has
// phoned home (non-empty ssh_host_keys: forget() emptied them when the
// deploy began). Nothing before that (the deploy ramdisk holds the same
// MAC's lease), nothing in any other state.
bool learns_leased_addresses(const Node& node);

class LeaseAddressLearner {
 public:
  // `lease_file`: dnsmasq's (--pxe-interface) or the operator's
  // (--dhcp-leases). `nodes` (read and written), `images` (whether a
  // node's image runs kiln-agent) and `db` must outlive the learner.
  LeaseAddressLearner(asio::io_context& io, NodeRepo& nodes, CatalogueStore& images, BlockingPool& db,
                      const Clock& clock, std::string lease_file, LeaseAddressLearnerOptions options, Logger log);

  // Reads the lease file and records `node_id`'s DHCP addresses as above.
  // true when it wrote them, false when there was nothing to change or the
  // node is not one to learn for now (not deployed, agent-reported, moved
  // on meanwhile). Errors: the store's (kNotFound for an unknown node);
  // kInvalidArgument / kInternal when the lease file cannot be parsed or
  // read (nothing is written then: fail closed).
  asio::awaitable<Result<bool>> learn(std::string node_id);
  // The same for a node already read, against a file already indexed.
  asio::awaitable<Result<bool>> learn(const Node& node, const boot::LeaseIndex& leases, int64_t now_s);
  // One pass over every node the rule above allows (a page at a time).
  // Errors as learn(); a node whose write fails is logged and skipped.
  asio::awaitable<Status> sweep();

  // Starts the loop on `io` (co_spawn); once.
  void run();
  // Ends the loop at its next wake-up (the timer is cancelled). Idempotent.
  void stop();
  // After stop(), waits until the loop has ended, so the learner may be
  // destroyed while `io` still runs. From a thread that is not running
  // `io`. Returns at once when run() was never called.
  void join();

  const std::string& lease_file() const { return lease_file_; }

 private:
  asio::awaitable<void> loop();

  asio::io_context& io_;
  NodeRepo& nodes_;
  CatalogueStore& images_;
  BlockingPool& db_;
  const Clock& clock_;
  const std::string lease_file_;
  const LeaseAddressLearnerOptions opt_;
  Logger log_;
  std::atomic<bool> stopping_{false};
  std::atomic<bool> running_{false};
  std::shared_ptr<asio::steady_timer> timer_;
  std::promise<void> ended_;  // set when the loop's coroutine completes
};

}  // namespace kiln
