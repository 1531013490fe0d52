#pragma once
// DnsmasqSupervisor: the DHCP/TFTP half of PXE. kilnd runs dnsmasq as its
// child, bound to the provisioning interface only, and keeps it alive and in
// step with the store.
//
// Start-up (start(), blocking, at kilnd start): check the options, stop a
// dnsmasq left behind by an earlier kilnd on this data dir (its pid file),
// write DATA_DIR/dnsmasq/dnsmasq.conf (dnsmasq_config.h), fill hosts/ with the
// PXE ports in the store, start `dnsmasq --keep-in-foreground
// --conf-file=<ours>` (so /etc/dnsmasq.conf is never read) and give it a
// moment: a dnsmasq that exits at once (bad interface, port 67 taken) fails
// start() with the last lines of its log.
//
// Supervision (one coroutine, after run()): every poll_interval it reaps the
// child; a dnsmasq that died is logged with its exit status and started again
// after a backoff (min_backoff doubling to max_backoff; reset once it has
// stayed up for a minute). hosts/ is re-synced from the store when a store
// commit appended a port.* / node.created / node.deleted event
// (notify_events), and every resync_interval anyway; dnsmasq gets SIGHUP when
// a file was removed or rewritten (it picks up new files by itself).
//
// stop() ends supervision and stops dnsmasq (SIGTERM, then SIGKILL). The
// child also dies with kilnd (PR_SET_PDEATHSIG).
//
// Threading: start() and stop() from the main thread; notify_events() from
// any thread (the store's writer); the coroutine runs on the io_context and
// makes its store calls and file I/O on the BlockingPool.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <utility>  // before Asio (docs/coroutines.md)

#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include "common/blocking_pool.h"
#include "common/log.h"
#include "common/result.h"
#include "common/child_process.h"
#include "controller/boot/hosts_dir.h"
#include "controller/store/event_log.h"
#include "controller/store/node_repo.h"

namespace kiln::boot {

namespace asio = boost::asio;

struct DnsmasqOptions {
  std::string dnsmasq = "/usr/sbin/dnsmasq";
  std::string interface;
  std::string range_start, range_end;
  std::string boot_url;     // without a trailing '/'
  bool discovery = false;
  std::string ipxe_dir = "/usr/lib/ipxe";
  std::string state_dir;    // DATA_DIR/dnsmasq
  // How often the child is reaped: the restart latency after a crash.
  std::chrono::milliseconds poll_interval{200};
  // The periodic resync that catches anything an event did not announce.
  std::chrono::milliseconds resync_interval{std::chrono::seconds(30)};
  std::chrono::milliseconds min_backoff{500};
  std::chrono::milliseconds max_backoff{std::chrono::seconds(30)};
  // How long start() watches a new dnsmasq for an immediate exit.
  std::chrono::milliseconds startup_check{std::chrono::milliseconds(500)};
};

class DnsmasqSupervisor {
 public:
  // `nodes` gives the PXE ports, `events` the port changes to re-sync on.
  DnsmasqSupervisor(asio::io_context& io, NodeRepo& nodes, EventLog& events, BlockingPool& db,
                    DnsmasqOptions options, Logger log);
  ~DnsmasqSupervisor();
  DnsmasqSupervisor(const DnsmasqSupervisor&) = delete;
  DnsmasqSupervisor& operator=(const DnsmasqSupervisor&) = delete;

  // See above. Errors: kInvalidArgument naming the flag (no such interface,
  // bad range, dnsmasq or ipxe dir missing), kInternal (files), kUnavailable
  // (dnsmasq exited at once; the message has its last log lines).
  Status start();
  // Starts the supervising coroutine on the io_context (after start()).
  void run();
  // Thread-safe: the store committed events up to `seq`.
  void notify_events(int64_t seq);
  // Asks for a resync at the next poll (thread-safe).
  void request_resync() { resync_requested_.store(true); }
  // Stops supervising and stops dnsmasq. Idempotent; blocks up to ~2 s.
  void stop();

  // The running dnsmasq's pid, or -1 (for tests and logs).
  pid_t pid() const { return pid_.load(); }
  const DnsmasqOptions& options() const { return options_; }
  std::string config_path() const { return options_.state_dir + "/dnsmasq.conf"; }
  std::string log_path() const { return options_.state_dir + "/dnsmasq.log"; }

 private:
  asio::awaitable<void> supervise();
  asio::awaitable<void> resync();
  asio::awaitable<bool> ports_changed_since(int64_t* seq);
  Status spawn_child();
  // Every port's MAC: PXE ports, and ports with pxe=false (DHCP only).
  struct KnownMacs {
    std::set<std::string> pxe;
    std::set<std::string> dhcp_only;
  };
  Result<KnownMacs> known_macs();
  void stop_stale();
  std::string log_tail() const;

  asio::io_context& io_;
  NodeRepo& nodes_;
  EventLog& events_;
  BlockingPool& db_;
  const DnsmasqOptions options_;
  Logger log_;
  HostsDir hosts_;

  std::mutex child_mu_;  // guards child_ (the coroutine and stop())
  ChildProcess child_;
  std::atomic<pid_t> pid_{-1};
  std::atomic<bool> stopping_{false};
  std::atomic<bool> resync_requested_{false};
  std::atomic<int64_t> notified_seq_{0};
  int64_t seen_seq_ = 0;  // events up to here were looked at (coroutine only)
  std::shared_ptr<asio::steady_timer> timer_;
  std::atomic<bool> running_{false};
};

}  // namespace kiln::boot
