#pragma once
// kilnd's configuration: one plain struct, defaults inline with the reason,
// filled in main.cc from flags and KILN_* environment variables (flags win).

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/log.h"
#include "common/result.h"
#include "controller/boot/url_guard.h"
#include "controller/model/states.h"

namespace kiln {

struct KilndConfig {
  // Loopback by default: an API that drives BMCs must be exposed on purpose.
  std::string listen_host = "127.0.0.1";
  uint16_t listen_port = 8080;
  // Holds kiln.db (SQLite) and kiln.key (the secret-sealing key, 0600).
  std::string data_dir = "./var";
  // The secret-sealing key (32 bytes, 0600); empty: DATA_DIR/kiln.key. Every
  // instance that shares a database must have the same key (key_check).
  std::string key_file;
  // Empty: SQLite in data_dir. Else a postgresql:// URL (may hold a password:
  // never logged).
  std::string database;
  // Creates this admin token when no admin token exists yet (first start).
  std::string bootstrap_token;
  std::string tls_cert, tls_key;
  LogLevel log_level = LogLevel::kInfo;
  // I/O threads. Two matches the small controllers this runs on; BMC and HTTP
  // I/O is asynchronous, so threads are not needed for concurrency.
  int io_threads = 2;
  // Threads for blocking store calls. SQLite has one writer; extra threads
  // serve reads concurrently (WAL).
  int db_threads = 4;
  // How long a node may stay in a transient state (design default: 30 min).
  std::chrono::seconds step_timeout{std::chrono::minutes(30)};
  // Per-state overrides from --timeout STATE=SECONDS.
  std::map<ProvisionState, std::chrono::seconds> state_timeouts;
  // How soon a failed pass of the timeout job is retried and, between
  // several kilnd, how often it looks for operations handed to this one
  // (ConductorOptions::timeout_check_interval). Deadlines and conductor
  // deaths wake the job themselves.
  std::chrono::milliseconds timeout_check_interval{std::chrono::seconds(2)};
  // While an allocation is still moving, the allocation engine passes over
  // the allocations in flight at least this often (the retry of what a store
  // error or a busy node left undone); events and lease ends wake it at once,
  // and with nothing moving it sleeps (allocation_engine.h).
  std::chrono::milliseconds allocation_interval{std::chrono::seconds(1)};
  // Power sync: seconds between sweeps (0 = off), BMC calls in flight, and
  // failed sweeps in a row before a node is faulted. See power_sync.h.
  std::chrono::seconds power_sync_interval{60};
  std::size_t power_sync_concurrency = 256;
  int power_sync_max_failures = 3;
  // Conductor membership (controller/conductor/membership.h): how often this
  // kilnd heartbeats, and the silence after which a conductor is dead and
  // its nodes move. A few heartbeats fit in one timeout. Heartbeat unset:
  // the membership's default, 2 s among PostgreSQL peers and 60 s alone on
  // SQLite, where no one judges it (MembershipOptions::heartbeat()).
  std::optional<std::chrono::milliseconds> heartbeat_interval;
  std::chrono::milliseconds conductor_timeout{std::chrono::seconds(10)};
  // The API URL registered for this conductor (GET /v1/conductors). Empty:
  // http(s)://<listen host>:<actual port>, decided once the server listens.
  std::string advertise_url;
  // Base URL nodes use to reach kilnd's HTTP server (agents, write_image
  // URLs; docs/agent-protocol.md). Empty: http://<listen host>:<actual port>
  // (the PXE address when PXE is on), decided once the server listens.
  std::string boot_url;
  // PXE (controller/boot, docs/agent-protocol.md): on when pxe_interface is
  // set; kilnd then runs dnsmasq bound to that interface only.
  std::string pxe_interface;
  std::string pxe_range_start, pxe_range_end;  // --pxe-range START,END (required with PXE)
  std::string pxe_address;                     // kilnd's IPv4 there; default: the interface's first
  bool pxe_discovery = false;                  // answer unknown MACs too
  std::string dnsmasq = "/usr/sbin/dnsmasq";
  std::string ipxe_dir = "/usr/lib/ipxe";      // Debian's ipxe package
  // The ramdisk image iPXE boots for agent work.
  std::string deploy_ramdisk = "deploy-ramdisk";
  // Lease binding (docs/agent-protocol.md, "Trust"): per-MAC boot scripts and
  // NoCloud seeds go only to the address DHCP leased to the MAC. "auto": bind
  // to the lease file kilnd knows (it runs dnsmasq, or --dhcp-leases), and
  // with none refuse them all (fail closed, warned at start-up); "on": refuse
  // to start without a lease file; "off": serve anyone (a lab whose DHCP
  // server kilnd cannot read; a conscious choice, logged as a warning).
  std::string lease_binding = "auto";
  // A dnsmasq lease file to bind to; default DATA_DIR/dnsmasq/leases with PXE.
  std::string dhcp_leases;
  // nccl_multinode (controller/agent/collective_rendezvous.h): "nccl", or
  // "tcp", the test-only collective that proves the rendezvous without GPUs.
  std::string multinode_collective = "nccl";
  // How long a validating node waits for the rest of its allocation.
  std::chrono::seconds multinode_assemble_timeout{600};
  // Where registered local image files may lie (--image-dir, repeatable);
  // empty: DATA_DIR/images. Nothing else on the host can be named as an image.
  std::vector<std::string> image_dirs;
  // Addresses image downloads may reach although the deny list refuses them
  // (loopback, link-local, metadata): --image-url-allow CIDR, repeatable.
  std::vector<boot::Cidr> image_url_allow;
  // The portal's built files (web/dist, from `make build`), served at "/".
  // Empty: the web/dist of the source tree kilnd was built from. A missing
  // directory leaves the portal off (logged); the API is unaffected.
  std::string web_dir;
  // Largest request body accepted (413 beyond).
  std::size_t max_body_bytes = 4 * 1024 * 1024;
  // Largest image upload (PUT /v1/images/{id}/content, streamed to disk, so
  // not bound by max_body_bytes): a generous OS image with room to spare.
  uint64_t image_upload_max = uint64_t{64} << 30;
};

// Parses the environment (KILN_*) and then argv (flags win). Sets *help when
// --help was given. kInvalidArgument naming the flag on anything malformed.
Result<KilndConfig> parse_kilnd_config(int argc, char** argv, bool* help);
std::string kilnd_usage();

}  // namespace kiln
