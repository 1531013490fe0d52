// kilnd: parses flags, builds the objects, runs. Nothing else lives here.
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <atomic>
#include <cstring>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>  // before Asio (docs/coroutines.md)
#include <vector>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>

#include "common/blocking_pool.h"
#include "common/clock.h"
#include "common/crypto.h"
#include "common/fd_limit.h"
#include "common/http/server.h"
#include "common/log.h"
#include "controller/agent/agent_broker.h"
#include "controller/agent/lease_address_learner.h"
#include "controller/agent/agent_channel.h"
#include "controller/api/api.h"
#include "controller/api/portal.h"
#include "controller/api/profile_input.h"
#include "controller/ironic/ironic_api.h"
#include "controller/ironic/ironic_provision_request.h"
#include "controller/boot/boot_script.h"
#include "controller/boot/dnsmasq_supervisor.h"
#include "controller/boot/host_info.h"
#include "controller/boot/image_dirs.h"
#include "controller/boot/image_converter.h"
#include "controller/boot/image_fetcher.h"
#include "controller/conductor/conductor.h"
#include "controller/conductor/membership.h"
#include "controller/migrate_store.h"
#include "controller/backup.h"  // also kKeyCheckText, the key_check row's sealed text
#include "controller/store/data_dir_lock.h"
#include "controller/store/open_store.h"
#include "controller/conductor/tenant_access.h"
#include "controller/tenancy/allocation_engine.h"
#include "controller/config.h"
#include "controller/store/store.h"
#include "drivers/driver.h"
#include "drivers/fake/fake_driver.h"
#include "drivers/ipmi/ipmi_driver.h"
#include "drivers/redfish/redfish_driver.h"
#include "controller/hosts/host_registry.h"
#include "controller/hosts/virtual_machines.h"
#include "drivers/libvirt/libvirt_driver.h"

using namespace kiln;

namespace {

// `p` made absolute against the working directory (not resolved: symlinks
// stay as the operator wrote them).
std::string absolute_path(const std::string& p) {
  if (!p.empty() && p.front() == '/') return p;
  char buf[PATH_MAX];
  if (::getcwd(buf, sizeof buf) == nullptr) return p;
  return std::string(buf) + "/" + p;
}

// This machine's host name, as its conductor registers it ("localhost" when
// the system has none to give).
std::string host_name() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0 || buf[0] == '\0') return "localhost";
  return buf;
}

// The addresses a --listen host stands for ("localhost" is both loopbacks).
std::vector<boost::asio::ip::address> listen_addresses(const std::string& host) {
  namespace ip = boost::asio::ip;
  if (host == "localhost") return {ip::make_address("127.0.0.1"), ip::make_address("::1")};
  boost::system::error_code ec;
  ip::address a = ip::make_address(host, ec);
  if (ec) return {};
  return {a};
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::string_view(argv[1]) == "migrate-store") return kiln::migrate_store_main(argc - 1, argv + 1);
  if (argc > 1 && std::string_view(argv[1]) == "backup") return kiln::backup_main(argc - 1, argv + 1);
  if (argc > 1 && std::string_view(argv[1]) == "restore") return kiln::restore_main(argc - 1, argv + 1);
  bool help = false;
  auto cfg = parse_kilnd_config(argc, argv, &help);
  if (help) {
    std::cout << kilnd_usage();
    return 0;
  }
  if (!cfg) {
    std::cerr << "kilnd: " << cfg.error().message << "\n";
    return 2;
  }
  Logger log = Logger(cfg->log_level).with("component", "kilnd");
  // A descriptor per IPMI BMC and per kept Redfish connection (fd_limit.h).
  const std::size_t fds = raise_fd_limit();
  log.debug("descriptor limit", {{"soft", std::to_string(fds)}});

  if (::mkdir(cfg->data_dir.c_str(), 0700) != 0 && errno != EEXIST) {
    std::cerr << "kilnd: cannot create --data-dir " << cfg->data_dir << ": " << std::strerror(errno) << "\n";
    return 1;
  }
  // The data dir holds the sealing key and the database: nobody else's to
  // read, also when it was created by hand or by an older kilnd.
  if (::chmod(cfg->data_dir.c_str(), 0700) != 0) {
    std::cerr << "kilnd: cannot make --data-dir " << cfg->data_dir << " private: " << std::strerror(errno) << "\n";
    return 1;
  }
  // One kilnd per SQLite database (data_dir_lock.h); held until exit.
  std::optional<DataDirLock> dir_lock;
  if (cfg->database.empty()) {
    auto lock = DataDirLock::acquire(cfg->data_dir);
    if (!lock) {
      std::cerr << "kilnd: " << lock.error().message << "\n";
      return 1;
    }
    dir_lock.emplace(std::move(*lock));
  }
  const std::string key_file = cfg->key_file.empty() ? cfg->data_dir + "/kiln.key" : cfg->key_file;
  auto secrets = SecretBox::open_key_file(key_file);
  if (!secrets) {
    std::cerr << "kilnd: " << secrets.error().message << "\n";
    return 1;
  }
  SystemClock clock;
  auto store = open_store({.database = cfg->database,
                           .data_dir = cfg->data_dir,
                           .connections = cfg->db_threads + 4,
                           .clock = &clock});
  if (!store) {
    std::cerr << "kilnd: cannot open the store: " << store.error().message << "\n";
    return 1;
  }
  if (Status s = (*store)->migrate(); !s) {
    std::cerr << "kilnd: migration failed: " << s.error().message << "\n";
    return 1;
  }
  // The key must open what this database already holds (015_key_check.sql).
  {
    Result<std::string> check = (*store)->key_check(secrets->seal(kKeyCheckText));
    if (!check) {
      std::cerr << "kilnd: cannot read the key check: " << check.error().message << "\n";
      return 1;
    }
    Result<std::string> opened = secrets->open(*check);
    if (!opened || *opened != kKeyCheckText) {
      std::cerr << "kilnd: the key in " << key_file
                << " is not the key this database's secrets were sealed with: every kilnd on one database"
                   " needs the same --key-file\n";
      return 1;
    }
  }
  for (const char* f : {"/kiln.db", "/kiln.db-wal", "/kiln.db-shm"}) {
    const std::string path = cfg->data_dir + f;
    if (::chmod(path.c_str(), 0600) != 0 && errno != ENOENT) {
      std::cerr << "kilnd: cannot make " << path << " private: " << std::strerror(errno) << "\n";
      return 1;
    }
  }
  // The shipped hardware profiles (schemas/profiles): created once, never
  // overwriting an operator's edits or resurrecting a deleted one.
  if (Result<std::vector<std::string>> seeded = api::seed_default_profiles(**store); !seeded) {
    std::cerr << "kilnd: default profiles: " << seeded.error().message << "\n";
    return 1;
  }
  if (!cfg->bootstrap_token.empty()) {
    if (Status s = bootstrap_admin_token(**store, cfg->bootstrap_token, clock); !s) {
      std::cerr << "kilnd: bootstrap token: " << s.error().message << "\n";
      return 1;
    }
  }

  asio::io_context io(cfg->io_threads);
  BlockingPool db(static_cast<std::size_t>(cfg->db_threads));

  // Bare-metal drivers: the BMC for power and boot device, kiln-agent (via
  // the broker) for inspect, clean, deploy and validate. The fake driver
  // keeps its own fakes.
  AgentBroker agent_broker(**store, db, clock, *secrets, AgentBrokerOptions{}, log.with("component", "agent"));
  // nccl_multinode across an allocation: kilnd is the rendezvous.
  CollectiveOptions collective_options;
  collective_options.collective = cfg->multinode_collective;
  collective_options.assemble_timeout = cfg->multinode_assemble_timeout;
  if (cfg->multinode_collective == "tcp")
    log.warn("nccl_multinode uses the test-only tcp collective: its figures do not measure the GPU fabric");
  CollectiveRendezvous rendezvous(agent_broker, **store, db, collective_options, log.with("component", "multinode"));
  DriverRegistry drivers;
  drivers.add(make_fake_driver(io.get_executor()));
  auto ipmi = make_ipmi_driver(io.get_executor(), IpmiDriverOptions{}, log.with("driver", "ipmi"));
  add_agent_capabilities(*ipmi, agent_broker, **store, db, &rendezvous);
  drivers.add(std::move(ipmi));
  auto redfish = make_redfish_driver(io.get_executor(), RedfishDriverOptions{}, log.with("driver", "redfish"));
  add_agent_capabilities(*redfish, agent_broker, **store, db, &rendezvous);
  drivers.add(std::move(redfish));
  // Virtual nodes: libvirt for power, the virtual driver over
  // VirtualMachines for the domain's lifecycle, the OS's kiln-agent (via the
  // broker) for the OS-booted signal and validation. libvirt is blocking: its calls run on their own pool.
  BlockingPool virt(4);
  HostRegistryOptions hopt;
  // SQLite: one kilnd per data dir, so every host is registered through this one.
  hopt.sole = cfg->database.empty();
  HostRegistry host_registry(io, **store, virt, *secrets, hopt, log.with("component", "hosts"));
  VirtualMachines virtual_machines(**store, virt, host_registry, log.with("component", "virt"));
  auto lv = libvirt::make_libvirt_driver(virt, host_registry, log.with("driver", "libvirt"));
  {
    Driver in_band;
    add_agent_capabilities(in_band, agent_broker, **store, db, &rendezvous);
    lv->agent = std::move(in_band.agent);
    lv->validate = std::move(in_band.validate);
  }
  add_virtual_capabilities(*lv, virtual_machines);
  drivers.add(std::move(lv));

  // This kilnd as a conductor (membership.h). SQLite has one kilnd per data
  // directory, so every other registration there is a previous process.
  MembershipOptions mopt;
  mopt.host = host_name();
  mopt.heartbeat_interval = cfg->heartbeat_interval;  // unset: the mode's default
  mopt.timeout = cfg->conductor_timeout;
  // SQLite: one kilnd per data dir (data_dir_lock.h), so any other registration is a
  // previous process and no peer watches this one's heartbeat (it acts whatever the
  // heartbeat's age, which comes once a minute). PostgreSQL: the others are live peers.
  mopt.sole = cfg->database.empty();
  Membership membership(io, **store, db, clock, mopt, log.with("component", "membership"));

  ConductorOptions copt;
  copt.membership = &membership;
  copt.default_timeout = cfg->step_timeout;
  for (const auto& [state, secs] : cfg->state_timeouts) copt.timeouts[state] = secs;
  copt.timeout_check_interval = cfg->timeout_check_interval;
  copt.power_sync.interval = cfg->power_sync_interval;
  copt.power_sync.concurrency = cfg->power_sync_concurrency;
  copt.power_sync.max_failures = cfg->power_sync_max_failures;
  // A deploying member's config drive carries its allocation's keys and user data.
  copt.tenant_access = tenant_access_from(**store, db);
  // A deploy through the Ironic API may bring its own config drive.
  copt.own_config_drive = ironic::own_config_drive;
  copt.phone_home = [&agent_broker](std::string id) { return agent_broker.phone_home_url(std::move(id)); };
  copt.phone_home_wait = [&agent_broker](std::string id, HeldCheck held) {
    return agent_broker.wait_for_phone_home(std::move(id), std::move(held));
  };
  Conductor conductor(io, **store, db, drivers, *secrets, clock, copt, log.with("component", "conductor"));
  AllocationEngineOptions aopt;
  aopt.interval = cfg->allocation_interval;
  aopt.membership = &membership;  // a ring change moves allocations too
  AllocationEngine allocations(io, **store, db, conductor, clock, aopt, log.with("component", "allocations"));

  // Boot chain and images (controller/boot). The boot URL is known once the
  // server listens; dnsmasq is started then too (when --pxe-interface).
  boot::BootSettings boot_settings;
  boot_settings.deploy_ramdisk = cfg->deploy_ramdisk;
  const std::string own_images = absolute_path(cfg->data_dir) + "/images";
  std::vector<std::string> image_dirs_given;
  for (const std::string& d : cfg->image_dirs) image_dirs_given.push_back(absolute_path(d));
  if (image_dirs_given.empty()) image_dirs_given.push_back(own_images);
  Result<std::shared_ptr<boot::ImageDirs>> image_dirs = boot::ImageDirs::open(image_dirs_given, own_images);
  if (!image_dirs) {
    std::cerr << "kilnd: " << image_dirs.error().message << "\n";
    return 2;
  }
  boot::ImageFetcher image_fetcher(io, **store, db, own_images, log.with("component", "images"),
                                   cfg->image_url_allow);
  boot::ImageConverterOptions conv_opt;
  conv_opt.images_dir = own_images;
  boot::ImageConverter image_converter(io, **store, **image_dirs, conv_opt, log.with("component", "images"));
  image_fetcher.convert_with(&image_converter);
  std::unique_ptr<boot::DnsmasqSupervisor> dnsmasq;
  std::atomic<boot::DnsmasqSupervisor*> dnsmasq_ptr{nullptr};
  // A deployed node's addresses from the DHCP leases of its ports, for an OS
  // that runs no kiln-agent (lease_address_learner.h): the same file lease
  // binding reads, whatever --lease-binding says (binding decides who gets
  // boot data; this only reads where a node is).
  std::unique_ptr<LeaseAddressLearner> leased_addresses;
  {
    std::string leases = !cfg->dhcp_leases.empty()     ? cfg->dhcp_leases
                         : !cfg->pxe_interface.empty() ? cfg->data_dir + "/dnsmasq/leases"
                                                       : std::string();
    if (!leases.empty())
      leased_addresses = std::make_unique<LeaseAddressLearner>(io, **store, **store, db, clock, leases,
                                                               LeaseAddressLearnerOptions{},
                                                               log.with("component", "dhcp-addresses"));
  }

  // The portal: read once; without it (not built) the API runs as before.
  const std::string web_dir = cfg->web_dir.empty() ? std::string(KILN_SOURCE_WEB_DIR) : cfg->web_dir;
  std::optional<api::PortalAssets> portal;
  if (Result<api::PortalAssets> files = api::PortalAssets::load(web_dir)) {
    portal = std::move(*files);
    log.info("portal served at /", {{"dir", web_dir}, {"files", std::to_string(portal->file_count())}});
  } else {
    log.warn("portal not served", {{"error", files.error().message}});
  }

  http::HttpServer* server_ptr = nullptr;
  Api api(ApiDeps{.store = **store,
                  .db = db,
                  .conductor = conductor,
                  .secrets = *secrets,
                  .clock = clock,
                  .log = log.with("component", "api"),
                  .connection_count = [&server_ptr] { return server_ptr ? server_ptr->connection_count() : 0; },
                  .agent_broker = &agent_broker,
                  .agents = &agent_broker,  // the broker is the AgentAuthority of the boot chain
                  .leased_addresses = leased_addresses.get(),
                  .boot = &boot_settings,
                  .image_fetcher = &image_fetcher,
                  .image_dirs = image_dirs->get(),
                  .image_converter = &image_converter,
                  .image_upload_max = cfg->image_upload_max,
                  .on_events = [&dnsmasq_ptr, &allocations, &conductor](int64_t seq) {
                    if (boot::DnsmasqSupervisor* d = dnsmasq_ptr.load()) d->notify_events(seq);
                    // Another instance may have handed this one an operation.
                    conductor.kick();
                    // A node moved (deployed, failed, cleaned): the allocations
                    // waiting on it need not wait for the next interval.
                    allocations.kick();
                  },
                  .hosts = &host_registry,
                  .nocloud_base_url = [&boot_settings] { return boot_settings.boot_url; },
                  .allocations = &allocations,
                  .portal = portal ? &*portal : nullptr});

  // Ironic's API for Ironic's clients, on the same listener and tokens.
  ironic::IronicApi ironic_api(api);

  http::ServerOptions sopt;
  sopt.host = cfg->listen_host;
  sopt.port = cfg->listen_port;
  sopt.body_limit = cfg->max_body_bytes;
  // Image uploads stream their body to disk (api.h, streamed_body).
  sopt.streamed_body = [&api](const http::RequestHeader& h) { return api.streamed_body(h); };
  sopt.tls_cert_file = cfg->tls_cert;
  sopt.tls_key_file = cfg->tls_key;
  http::HttpServer server(
      io, sopt,
      [&api](http::Request& req, const http::RequestInfo& info) { return api.handle(req, info); },
      [&api](int status, std::string_view detail) { return api.error_response(status, detail); },
      log.with("component", "http"));
  server_ptr = &server;
  if (Status s = server.start(); !s) {
    std::cerr << "kilnd: cannot listen on " << cfg->listen_host << ":" << cfg->listen_port << ": "
              << s.error().message << "\n";
    return 1;
  }
  std::string host = cfg->listen_host.find(':') != std::string::npos ? "[" + cfg->listen_host + "]" : cfg->listen_host;
  // Image downloads must never reach kilnd itself (url_guard.h).
  for (const boost::asio::ip::address& a : listen_addresses(cfg->listen_host))
    image_fetcher.policy().add_own_listener(a, server.port());
  std::string pxe_address = cfg->pxe_address;
  if (!cfg->pxe_interface.empty() && pxe_address.empty()) {
    if (auto a = boot::interface_ipv4(cfg->pxe_interface)) pxe_address = *a;
    else {
      std::cerr << "kilnd: --pxe-interface " << cfg->pxe_interface
                << " has no IPv4 address (give --pxe-address or configure the interface)\n";
      return 1;
    }
  }
  std::string boot_url = cfg->boot_url;
  // The server speaks either TLS or plain HTTP, so the default URL follows it.
  const std::string scheme = server.tls() ? "https://" : "http://";
  if (boot_url.empty() && !pxe_address.empty()) {
    boot_url = scheme + pxe_address + ":" + std::to_string(server.port());
  } else if (boot_url.empty()) {
    bool wildcard = cfg->listen_host == "0.0.0.0" || cfg->listen_host == "::";
    boot_url = scheme + (wildcard ? std::string("127.0.0.1") : host) + ":" + std::to_string(server.port());
  }
  while (boot_url.size() > 1 && boot_url.back() == '/') boot_url.pop_back();
  agent_broker.set_boot_url(boot_url);
  boot_settings.boot_url = boot_url;
  virtual_machines.set_boot_url(boot_url);
  // The agent pins kilnd's certificate (docs/agent-protocol.md, "TLS"): its
  // SHA-256 goes on the ramdisk's command line and beside the os secret.
  if (server.tls()) {
    Result<std::string> pin = certificate_file_sha256(cfg->tls_cert);
    if (!pin) {
      std::cerr << "kilnd: --tls-cert: " << pin.error().message << "\n";
      return 1;
    }
    boot_settings.tls_sha256 = *pin;
    agent_broker.set_tls_pin(*pin);
  }
  // Lease binding (docs/agent-protocol.md, "Trust"): fail closed unless the
  // operator chose otherwise.
  if (cfg->lease_binding == "off") {
    boot_settings.binding = boot::LeaseBinding::kOff;
    log.warn("lease binding is off (--lease-binding off): any machine that can reach kilnd may fetch per-MAC boot "
             "scripts and NoCloud seeds, with their boot tokens and deploy secrets; use this in a lab only",
             {{"lease_binding", cfg->lease_binding}});
  } else {
    if (!cfg->dhcp_leases.empty()) boot_settings.lease_file = cfg->dhcp_leases;
    else if (!cfg->pxe_interface.empty()) boot_settings.lease_file = cfg->data_dir + "/dnsmasq/leases";
    if (boot_settings.lease_file.empty()) {
      boot_settings.binding = boot::LeaseBinding::kUnbound;
      log.warn("no DHCP lease file to bind boot data to: per-MAC boot scripts and NoCloud seeds are refused (404). "
               "Give kilnd --pxe-interface (it runs dnsmasq) or --dhcp-leases FILE (the lease file of the DHCP "
               "server that serves the nodes); --lease-binding off serves them to anyone (lab only)",
               {{"lease_binding", cfg->lease_binding}});
    } else {
      boot_settings.binding = boot::LeaseBinding::kLeaseFile;
      log.info("lease binding on", {{"lease_file", boot_settings.lease_file}});
    }
  }
  if (Status s = image_fetcher.start(); !s) {
    std::cerr << "kilnd: images: " << s.error().message << "\n";
    return 1;
  }
  if (Status s = image_converter.start(); !s) {
    std::cerr << "kilnd: images: " << s.error().message << "\n";
    return 1;
  }
  if (!cfg->pxe_interface.empty()) {
    boot::DnsmasqOptions dopt;
    dopt.dnsmasq = cfg->dnsmasq;
    dopt.interface = cfg->pxe_interface;
    dopt.range_start = cfg->pxe_range_start;
    dopt.range_end = cfg->pxe_range_end;
    dopt.boot_url = boot_url;
    dopt.discovery = cfg->pxe_discovery;
    dopt.ipxe_dir = cfg->ipxe_dir;
    dopt.state_dir = cfg->data_dir + "/dnsmasq";
    dnsmasq = std::make_unique<boot::DnsmasqSupervisor>(io, **store, **store, db, dopt,
                                                        log.with("component", "dnsmasq"));
    if (Status s = dnsmasq->start(); !s) {
      std::cerr << "kilnd: PXE: " << s.error().message << "\n";
      return 1;
    }
    dnsmasq_ptr.store(dnsmasq.get());
    dnsmasq->run();
    if (cfg->listen_host == "127.0.0.1" || cfg->listen_host == "::1" || cfg->listen_host == "localhost")
      log.warn("PXE is on but the API listens on loopback only: nodes cannot fetch their boot scripts",
               {{"listen", cfg->listen_host}, {"boot_url", boot_url}});
  }
  {
    bool wildcard = cfg->listen_host == "0.0.0.0" || cfg->listen_host == "::";
    membership.set_api_url(!cfg->advertise_url.empty()
                               ? cfg->advertise_url
                               : scheme + (wildcard ? mopt.host : host) + ":" + std::to_string(server.port()));
  }
  std::printf("listening on %s:%u\n", host.c_str(), static_cast<unsigned>(server.port()));
  std::fflush(stdout);
  log.info("kilnd started", {{"listen", host + ":" + std::to_string(server.port())},
                             {"tls", server.tls() ? "on" : "off"},
                             {"data_dir", cfg->data_dir}});

  // Recovery first, then readiness: /readyz says 503 until nodes left in
  // flight by a previous run have been resumed or failed.
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        Status s = co_await membership.start();
        if (s) s = co_await conductor.start();
        if (!s) {
          log.error("conductor start failed; shutting down", {{"error", s.error().message}});
          server.stop();
          io.stop();
          co_return;
        }
        // Allocations after recovery: the engine judges members by their
        // nodes' states, which recovery has just settled.
        allocations.start();
        api.set_ready(true);
      },
      asio::detached);
  // Hypervisor hosts connect in the background: a slow or dead one must not
  // hold up readiness (it is marked unreachable and retried with backoff).
  asio::co_spawn(io, [&]() -> asio::awaitable<void> { co_await host_registry.start(); }, asio::detached);
  if (leased_addresses) leased_addresses->run();

  // Graceful shutdown: stop accepting, end streams, stop jobs; give in-flight
  // requests a moment, then stop. Operations still running hold their
  // reservations and are recovered by the next start.
  asio::signal_set signals(io, SIGINT, SIGTERM);
  asio::steady_timer grace(io);
  signals.async_wait([&](const boost::system::error_code& ec, int sig) {
    if (ec) return;
    log.info("shutting down", {{"signal", std::to_string(sig)}});
    api.set_ready(false);
    api.shutdown();
    server.stop();
    allocations.stop();
    conductor.stop();
    host_registry.stop();
    agent_broker.shutdown();  // after the conductor: its waits end without failing nodes
    if (leased_addresses) leased_addresses->stop();
    rendezvous.shutdown();
    if (dnsmasq) dnsmasq->stop();
    image_fetcher.stop();
    image_converter.stop();
    grace.expires_after(std::chrono::milliseconds(500));
    grace.async_wait([&](const boost::system::error_code&) { io.stop(); });
  });

  std::vector<std::thread> threads;
  for (int i = 1; i < cfg->io_threads; ++i) threads.emplace_back([&io] { io.run(); });
  io.run();
  for (auto& t : threads) t.join();
  // A clean stop: the others take this conductor's nodes at their next
  // refresh instead of after the heartbeat timeout.
  if (Status s = membership.stop(); !s) log.warn("conductor not marked stopped", {{"error", s.error().message}});
  dnsmasq_ptr.store(nullptr);
  if (dnsmasq) dnsmasq->stop();
  image_fetcher.stop();
  virt.stop();
  db.stop();
  log.info("kilnd stopped");
  return 0;
}
