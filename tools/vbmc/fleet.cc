#include "tools/vbmc/fleet.h"

#include <cstdio>
#include <fstream>

#include <boost/asio/ip/address_v4.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "tools/vbmc/splitmix.h"

namespace kiln::vbmc {

namespace {

std::string hex(const ipmi::Bytes& b) {
  static const char* const kHex = "0123456789abcdef";
  std::string out;
  for (uint8_t v : b) {
    out.push_back(kHex[v >> 4]);
    out.push_back(kHex[v & 0xF]);
  }
  return out;
}

// A Redfish-shaped error for requests no fleet BMC answers.
http::Reply refusal(const http::Request& req, int status, const std::string& detail) {
  const nlohmann::json body = {
      {"error", {{"code", "Base.1.8.GeneralError"}, {"message", detail}}}};
  http::Reply r;
  r.response.result(static_cast<unsigned>(status));
  r.response.set(http::bhttp::field::server, "kiln-vbmc");
  r.response.set(http::bhttp::field::content_type, "application/json; charset=utf-8");
  r.response.body() = body.dump();
  r.response.version(req.version());
  r.response.keep_alive(req.keep_alive());
  r.response.prepare_payload();
  return r;
}

// How long a dead BMC holds an HTTP request before giving up on it: longer
// than any client waits.
constexpr std::chrono::hours kDeadHold{1};

}  // namespace

// One BMC: its IPMI side and its Redfish side over the shared fleet back-end.
// Members are destroyed bottom-up: the listener before the IpmiBmc it calls,
// the service before the view it reads.
struct Fleet::Bmc {
  const FleetBmc* plan = nullptr;
  std::unique_ptr<IpmiBmc> ipmi;
  std::unique_ptr<IpmiListener> listener;
  std::unique_ptr<SingleMachineView> view;
  std::unique_ptr<RedfishService> redfish;
};

Fleet::Fleet(asio::io_context& io, FleetOptions opts, std::vector<FleetBmc> plan, Logger log)
    : io_(io), opts_(std::move(opts)), plan_(std::move(plan)), log_(std::move(log)),
      backend_(plan_.size(), opts_.seed) {}

Fleet::~Fleet() { stop(); }

Result<std::unique_ptr<Fleet>> Fleet::start(asio::io_context& io, const FleetOptions& opts,
                                            const std::string& tls_cert_file,
                                            const std::string& tls_key_file, Logger log) {
  auto plan = plan_fleet(opts);
  if (!plan) return plan.take_error();
  std::unique_ptr<Fleet> f(new Fleet(io, opts, std::move(*plan), std::move(log)));
  boost::system::error_code ec;
  f->first_address_ = boost::asio::ip::make_address_v4(opts.address_base, ec).to_uint();

  for (const FleetBmc& p : f->plan_) {
    auto b = std::make_unique<Bmc>();
    b->plan = &p;
    const std::string machine = FleetBackend::fleet_machine_id(p.index);
    if (opts.ipmi) {
      IpmiBmcOptions io_opts;
      io_opts.user = p.username;
      io_opts.password = p.password;
      io_opts.locked_out = p.lockout;
      const ipmi::Bytes guid = ipmi::random_bytes(16);
      std::copy(guid.begin(), guid.end(), io_opts.guid.begin());
      b->ipmi = std::make_unique<IpmiBmc>(f->backend_, machine, io_opts, f->log_.with("bmc", p.name));
    }
    if (opts.redfish) {
      b->view = std::make_unique<SingleMachineView>(f->backend_, machine);
      RedfishServiceOptions ro;
      ro.user = p.username;
      // A locked account refuses the right password too: give the service
      // one nobody knows.
      ro.password = p.lockout ? "locked-" + hex(ipmi::random_bytes(16)) : p.password;
      ro.fault_500_rate = p.http500 ? 1.0 : 0.0;
      if (p.latency) ro.latency = opts.fault_latency;
      b->redfish = std::make_unique<RedfishService>(*b->view, nullptr, ro, f->log_.with("bmc", p.name));
    }
    f->bmcs_.push_back(std::move(b));
  }
  if (opts.ipmi) {
    if (auto s = f->bind_ipmi(); !s) return s.take_error();
  }
  if (opts.redfish) {
    if (auto s = f->start_redfish(tls_cert_file, tls_key_file); !s) return s.take_error();
  }
  return f;
}

Status Fleet::bind_ipmi() {
  // Every BMC binds the same port on its own address. With port 0 the first
  // bind picks one; should another process hold it on a later address, the
  // whole fleet retries with a fresh port.
  constexpr int kAttempts = 8;
  Status last = ok_status();
  for (int attempt = 0; attempt < kAttempts; ++attempt) {
    uint16_t port = opts_.ipmi_port;
    last = ok_status();
    for (std::size_t i = 0; i < bmcs_.size(); ++i) {
      Bmc& b = *bmcs_[i];
      IpmiFaults faults;
      faults.dead = b.plan->dead;
      faults.drop_fraction = opts_.drop_fraction;
      faults.seed = splitmix64(opts_.seed * 7919 + i);
      if (b.plan->latency) faults.latency = opts_.fault_latency;
      auto l = IpmiListener::bind(io_, b.plan->address, port, *b.ipmi, faults, log_.with("bmc", b.plan->name));
      if (!l) {
        last = l.take_error();
        break;
      }
      if (i == 0) port = (*l)->port();
      b.listener = std::move(*l);
    }
    if (last) {
      ipmi_port_ = port;
      for (auto& b : bmcs_) b->listener->start();
      return ok_status();
    }
    for (auto& b : bmcs_) b->listener.reset();
    if (opts_.ipmi_port != 0) break;  // a fixed port: nothing to retry
    log_.debug("fleet: ipmi port taken on some address; retrying", {{"error", last.error().message}});
  }
  return last;
}

Status Fleet::start_redfish(const std::string& cert, const std::string& key) {
  http::ServerOptions so;
  so.host = "0.0.0.0";
  so.port = opts_.redfish_port;
  so.tls_cert_file = cert;
  so.tls_key_file = key;
  so.max_connections = bmcs_.size() * 2 + 64;
  so.idle_timeout = std::chrono::seconds(600);
  server_ = std::make_unique<http::HttpServer>(
      io_, so,
      [this](http::Request& req, const http::RequestInfo& info) { return route(req, info); },
      [this](int status, std::string_view detail) {
        return bmcs_.front()->redfish->error_response(status, detail);
      },
      log_.with("component", "fleet-http"));
  Status s = server_->start();
  if (!s) return s;
  redfish_port_ = server_->port();
  return ok_status();
}

long Fleet::bmc_for_host(const std::string& host) const {
  const std::string addr = host.substr(0, host.find(':'));
  boost::system::error_code ec;
  const auto a = boost::asio::ip::make_address_v4(addr, ec);
  if (ec) return -1;
  const uint32_t v = a.to_uint();
  if (v < first_address_ || v - first_address_ >= bmcs_.size()) return -1;
  return static_cast<long>(v - first_address_);
}

asio::awaitable<http::Reply> Fleet::route(http::Request& req, const http::RequestInfo& info) {
  if (info.remote.rfind("127.", 0) != 0) {
    co_return refusal(req, 403, "this fleet answers loopback clients only");
  }
  const std::string host(req[http::bhttp::field::host]);
  const long idx = bmc_for_host(host);
  if (idx < 0) co_return refusal(req, 404, "no BMC of this fleet has the address " + host);
  Bmc& b = *bmcs_[static_cast<std::size_t>(idx)];
  if (b.plan->dead) {
    asio::steady_timer hold(io_, kDeadHold);
    boost::system::error_code ec;
    co_await hold.async_wait(asio::redirect_error(asio::use_awaitable, ec));
    co_return refusal(req, 503, "this BMC is dead");
  }
  http::Reply r = co_await b.redfish->handle(req, info);
  co_return r;
}

Status Fleet::write_manifest(const std::string& path) const {
  const nlohmann::json m = fleet_manifest(plan_, opts_, ipmi_port_, redfish_port_);
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << m.dump(1) << "\n";
    out.flush();
    if (!out) return Error(Code::kInternal, "cannot write the fleet manifest " + tmp);
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    return Error(Code::kInternal, "cannot rename the fleet manifest to " + path);
  }
  return ok_status();
}

void Fleet::stop() {
  if (server_) server_->stop();
  for (auto& b : bmcs_) {
    if (b->listener) b->listener->stop();
  }
}

}  // namespace kiln::vbmc
