// kiln-vbmc: a virtual BMC serving Redfish over HTTPS (and IPMI lanplus over
// UDP with --ipmi-listen) for libvirt domains (--libvirt-uri) or a captured
// Redfish tree (--mockup), or a fleet of in-memory BMCs (--fleet N). Parses
// flags, builds the back-end, the certificate and the servers, prints where
// they listen and runs until SIGINT/SIGTERM.


#include <cctype>
#include <csignal>
#include <future>
#include <cstdio>
#include <iostream>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/use_future.hpp>

#include "common/fd_limit.h"
#include "common/http/server.h"
#include "common/log.h"
#include "tools/vbmc/fleet.h"
#include "tools/vbmc/ipmi_bmc.h"
#include "tools/vbmc/ipmi_listener.h"
#include "tools/vbmc/libvirt_backend.h"
#include "tools/vbmc/mockup_backend.h"
#include "tools/vbmc/options.h"
#include "tools/vbmc/redfish_service.h"
#include "tools/vbmc/tls_cert.h"

namespace {

using namespace kiln;
namespace asio = boost::asio;


// The machine the IPMI side fronts: `wanted` by id or name, else the first.
asio::awaitable<Result<std::string>> pick_machine(vbmc::MachineBackend& backend, std::string wanted) {
  auto ids = co_await backend.machines();
  if (!ids) co_return ids.take_error();
  if (ids->empty()) co_return Error(Code::kNotFound, "the back-end has no machines to serve over IPMI");
  if (wanted.empty()) co_return ids->front();
  for (const std::string& id : *ids) {
    if (id == wanted) co_return id;
    auto st = co_await backend.state(id);
    if (st && st->name == wanted) co_return id;
  }
  co_return Error(Code::kNotFound, "--ipmi-system: no machine with id or name " + wanted);
}

// The system GUID from a UUID's hex digits (random when it has not 32).
std::array<uint8_t, 16> guid_from_uuid(const std::string& uuid) {
  std::array<uint8_t, 16> g{};
  std::string hex;
  for (char c : uuid) {
    if (std::isxdigit(static_cast<unsigned char>(c))) hex.push_back(c);
  }
  if (hex.size() != 32) {
    const ipmi::Bytes r = ipmi::random_bytes(16);
    std::copy(r.begin(), r.end(), g.begin());
    return g;
  }
  for (size_t i = 0; i < 16; ++i) g[i] = static_cast<uint8_t>(std::stoi(hex.substr(2 * i, 2), nullptr, 16));
  return g;
}

// Runs `io` (already serving) until `f` is ready: start-up steps that are coroutines.
template <typename T>
void run_until_ready(asio::io_context& io, std::future<T>& f) {
  while (f.wait_for(std::chrono::seconds(0)) != std::future_status::ready) io.run_one();
}

std::string shown(const std::string& host) {
  return host.find(':') != std::string::npos ? "[" + host + "]" : host;
}

int run_fleet(const vbmc::VbmcOptions& opts, const Logger& log) {
  std::unique_ptr<vbmc::TempCert> cert;
  if (opts.fleet.redfish) {
    auto c = vbmc::TempCert::generate("127.0.0.1");
    if (!c) {
      std::cerr << "kiln-vbmc: " << c.error().message << "\n";
      return 1;
    }
    cert = std::move(*c);
  }
  boost::asio::io_context io(1);
  auto fleet = vbmc::Fleet::start(io, opts.fleet, cert ? cert->cert_file() : std::string(),
                                  cert ? cert->key_file() : std::string(), log.with("component", "fleet"));
  if (!fleet) {
    std::cerr << "kiln-vbmc: " << fleet.error().message << "\n";
    return fleet.error().code == Code::kInvalidArgument ? 2 : 1;
  }
  Status written = (*fleet)->write_manifest(opts.fleet.manifest_path);
  if (!written) {
    std::cerr << "kiln-vbmc: " << written.error().message << "\n";
    return 1;
  }
  const auto& bmcs = (*fleet)->bmcs();
  std::cout << "fleet ready: " << bmcs.size() << " BMCs " << bmcs.front().address << ".."
            << bmcs.back().address;
  if (opts.fleet.ipmi) std::cout << " ipmi udp port " << (*fleet)->ipmi_port();
  if (opts.fleet.redfish) std::cout << " redfish https port " << (*fleet)->redfish_port();
  std::cout << " manifest " << opts.fleet.manifest_path << std::endl;

  boost::asio::signal_set signals(io, SIGINT, SIGTERM);
  signals.async_wait([&](const boost::system::error_code&, int) {
    (*fleet)->stop();
    io.stop();
  });
  io.run();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  auto opts = vbmc::parse_vbmc_args(args);
  if (!opts) {
    std::cerr << "kiln-vbmc: " << opts.error().message << " (see --help)\n";
    return 2;
  }
  if (opts->help) {
    std::cout << vbmc::vbmc_usage();
    return 0;
  }
  Logger log(opts->log_level);
  std::signal(SIGPIPE, SIG_IGN);  // a reader of our stdout may go away
  (void)raise_fd_limit();
  if (opts->fleet.count > 0) return run_fleet(*opts, log);

  std::unique_ptr<vbmc::MockupTree> tree;
  std::unique_ptr<vbmc::MachineBackend> backend;
  if (!opts->mockup_dir.empty()) {
    auto t = vbmc::MockupTree::open(opts->mockup_dir);
    if (!t) {
      std::cerr << "kiln-vbmc: " << t.error().message << "\n";
      return 2;
    }
    tree = std::move(*t);
    auto b = vbmc::MockupBackend::create(*tree);
    if (!b) {
      std::cerr << "kiln-vbmc: " << b.error().message << "\n";
      return 2;
    }
    backend = std::move(*b);
  } else {
    auto b = vbmc::LibvirtBackend::open(opts->libvirt_uri);
    if (!b) {
      std::cerr << "kiln-vbmc: " << b.error().message << "\n";
      return 1;
    }
    backend = std::move(*b);
  }

  auto cert = vbmc::TempCert::generate(opts->listen_host);
  if (!cert) {
    std::cerr << "kiln-vbmc: " << cert.error().message << "\n";
    return 1;
  }

  boost::asio::io_context io;
  vbmc::RedfishService service(*backend, tree.get(), opts->redfish, log.with("component", "vbmc"));
  http::ServerOptions so;
  so.host = opts->listen_host;
  so.port = opts->listen_port;
  so.tls_cert_file = (*cert)->cert_file();
  so.tls_key_file = (*cert)->key_file();
  http::HttpServer server(
      io, so,
      [&service](http::Request& req, const http::RequestInfo& info) { return service.handle(req, info); },
      [&service](int status, std::string_view detail) { return service.error_response(status, detail); },
      log.with("component", "vbmc-http"));
  Status started = server.start();
  if (!started) {
    std::cerr << "kiln-vbmc: " << started.error().message << "\n";
    return 1;
  }

  std::unique_ptr<vbmc::IpmiBmc> ipmi_bmc;
  std::unique_ptr<vbmc::IpmiListener> ipmi_listener;
  if (opts->ipmi) {
    auto picked = boost::asio::co_spawn(io, pick_machine(*backend, opts->ipmi_system),
                                        boost::asio::use_future);
    run_until_ready(io, picked);
    Result<std::string> machine = picked.get();
    if (!machine) {
      std::cerr << "kiln-vbmc: " << machine.error().message << "\n";
      return machine.error().code == Code::kNotFound ? 2 : 1;
    }
    auto state = boost::asio::co_spawn(io, backend->state(*machine), boost::asio::use_future);
    run_until_ready(io, state);
    Result<vbmc::MachineState> st = state.get();
    vbmc::IpmiBmcOptions io_opts;
    io_opts.user = opts->redfish.user;
    io_opts.password = opts->redfish.password;
    io_opts.guid = guid_from_uuid(st ? st->uuid : std::string());
    ipmi_bmc = std::make_unique<vbmc::IpmiBmc>(*backend, *machine, io_opts, log.with("component", "vbmc-ipmi"));
    auto l = vbmc::IpmiListener::bind(io, opts->ipmi_host, opts->ipmi_port, *ipmi_bmc, vbmc::IpmiFaults{},
                                      log.with("component", "vbmc-ipmi"));
    if (!l) {
      std::cerr << "kiln-vbmc: " << l.error().message << "\n";
      return l.error().code == Code::kInvalidArgument ? 2 : 1;
    }
    ipmi_listener = std::move(*l);
    ipmi_listener->start();
    std::cout << "ipmi listening on " << shown(opts->ipmi_host) << ":" << ipmi_listener->port() << std::endl;
  }
  std::cout << "redfish listening on https://" << shown(opts->listen_host) << ":" << server.port() << std::endl;

  boost::asio::signal_set signals(io, SIGINT, SIGTERM);
  signals.async_wait([&](const boost::system::error_code&, int) {
    server.stop();
    if (ipmi_listener) ipmi_listener->stop();
    io.stop();
  });
  io.run();
  return 0;
}
