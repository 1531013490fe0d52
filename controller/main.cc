// kilnd: parses flags, builds the objects, runs. Nothing else lives here.
#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <thread>
#include <utility>  // before Asio (docs/coroutines.md)
#include <vector>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>

#include "common/blocking_pool.h"
#include "common/clock.h"
#include "common/crypto.h"
#include "common/http/server.h"
#include "common/log.h"
#include "controller/api/api.h"
#include "controller/conductor/conductor.h"
#include "controller/config.h"
#include "controller/store/store.h"
#include "drivers/driver.h"
#include "drivers/fake/fake_driver.h"
#include "drivers/ipmi/ipmi_driver.h"
#include "drivers/redfish/redfish_driver.h"

using namespace kiln;

int main(int argc, char** argv) {
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

  if (::mkdir(cfg->data_dir.c_str(), 0700) != 0 && errno != EEXIST) {
    std::cerr << "kilnd: cannot create --data-dir " << cfg->data_dir << ": " << std::strerror(errno) << "\n";
    return 1;
  }
  auto secrets = SecretBox::open_key_file(cfg->data_dir + "/kiln.key");
  if (!secrets) {
    std::cerr << "kilnd: " << secrets.error().message << "\n";
    return 1;
  }
  SystemClock clock;
  auto store = open_sqlite_store({.path = cfg->data_dir + "/kiln.db", .clock = &clock});
  if (!store) {
    std::cerr << "kilnd: cannot open the store: " << store.error().message << "\n";
    return 1;
  }
  if (Status s = (*store)->migrate(); !s) {
    std::cerr << "kilnd: migration failed: " << s.error().message << "\n";
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

  DriverRegistry drivers;
  drivers.add(make_fake_driver(io.get_executor()));
  drivers.add(make_ipmi_driver(io.get_executor(), IpmiDriverOptions{}, log.with("driver", "ipmi")));
  drivers.add(make_redfish_driver(io.get_executor(), RedfishDriverOptions{}, log.with("driver", "redfish")));

  ConductorOptions copt;
  copt.default_timeout = cfg->step_timeout;
  for (const auto& [state, secs] : cfg->state_timeouts) copt.timeouts[state] = secs;
  copt.timeout_check_interval = cfg->timeout_check_interval;
  copt.power_sync.interval = cfg->power_sync_interval;
  copt.power_sync.concurrency = cfg->power_sync_concurrency;
  copt.power_sync.max_failures = cfg->power_sync_max_failures;
  Conductor conductor(io, **store, db, drivers, *secrets, clock, copt, log.with("component", "conductor"));

  http::HttpServer* server_ptr = nullptr;
  Api api(ApiDeps{.store = **store,
                  .db = db,
                  .conductor = conductor,
                  .secrets = *secrets,
                  .clock = clock,
                  .log = log.with("component", "api"),
                  .connection_count = [&server_ptr] { return server_ptr ? server_ptr->connection_count() : 0; }});

  http::ServerOptions sopt;
  sopt.host = cfg->listen_host;
  sopt.port = cfg->listen_port;
  sopt.body_limit = cfg->max_body_bytes;
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
        Status s = co_await conductor.start();
        if (!s) {
          log.error("conductor start failed; shutting down", {{"error", s.error().message}});
          server.stop();
          io.stop();
          co_return;
        }
        api.set_ready(true);
      },
      asio::detached);

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
    conductor.stop();
    grace.expires_after(std::chrono::milliseconds(500));
    grace.async_wait([&](const boost::system::error_code&) { io.stop(); });
  });

  std::vector<std::thread> threads;
  for (int i = 1; i < cfg->io_threads; ++i) threads.emplace_back([&io] { io.run(); });
  io.run();
  for (auto& t : threads) t.join();
  db.stop();
  log.info("kilnd stopped");
  return 0;
}
