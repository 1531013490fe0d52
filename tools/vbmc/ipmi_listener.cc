#include "tools/vbmc/ipmi_listener.h"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "tools/vbmc/splitmix.h"

namespace kiln::vbmc {

IpmiListener::IpmiListener(asio::io_context& io, IpmiBmc& bmc, IpmiFaults faults, Logger log)
    : socket_(io),
      delay_(io),
      bmc_(bmc),
      faults_(faults),
      log_(std::move(log)),
      rng_state_(faults.seed),
      alive_(std::make_shared<bool>(true)) {}

Result<std::unique_ptr<IpmiListener>> IpmiListener::bind(asio::io_context& io,
                                                         const std::string& host, uint16_t port,
                                                         IpmiBmc& bmc, IpmiFaults faults,
                                                         Logger log) {
  boost::system::error_code ec;
  const auto addr = asio::ip::make_address(host, ec);
  if (ec) return Error(Code::kInvalidArgument, "ipmi listen host '" + host + "' is not an IP address");
  std::unique_ptr<IpmiListener> l(new IpmiListener(io, bmc, faults, std::move(log)));
  const asio::ip::udp::endpoint ep(addr, port);
  l->socket_.open(ep.protocol(), ec);
  if (!ec) l->socket_.bind(ep, ec);
  if (ec) {
    return Error(Code::kUnavailable,
                 "ipmi listen " + host + ":" + std::to_string(port) + ": " + ec.message());
  }
  l->port_ = l->socket_.local_endpoint(ec).port();
  return l;
}

IpmiListener::~IpmiListener() {
  *alive_ = false;
  boost::system::error_code ec;
  socket_.close(ec);
}

void IpmiListener::start() {
  asio::co_spawn(socket_.get_executor(), serve(), asio::detached);
}

void IpmiListener::stop() {
  boost::system::error_code ec;
  socket_.close(ec);
  delay_.cancel();
}

bool IpmiListener::lose() {
  if (faults_.drop_fraction <= 0) return false;
  const double u = static_cast<double>(next_random(rng_state_) >> 11) * 0x1.0p-53;
  return u < faults_.drop_fraction;
}

asio::awaitable<void> IpmiListener::serve() {
  const std::shared_ptr<bool> alive = alive_;
  ipmi::Bytes buf(ipmi::kMaxDatagram + 1);
  asio::ip::udp::endpoint from;
  for (;;) {
    boost::system::error_code ec;
    const size_t n = co_await socket_.async_receive_from(
        asio::buffer(buf), from, asio::redirect_error(asio::use_awaitable, ec));
    if (!*alive) co_return;
    if (ec == asio::error::operation_aborted || ec == asio::error::bad_descriptor ||
        !socket_.is_open()) {
      co_return;
    }
    if (ec) continue;  // e.g. ICMP errors surfacing on the socket: keep serving
    ++in_;
    if (faults_.dead) continue;
    if (lose()) {
      ++dropped_;
      continue;
    }
    const ipmi::ByteView datagram(buf.data(), n);
    std::optional<ipmi::Bytes> reply = co_await bmc_.handle(datagram);
    if (!*alive) co_return;
    if (!reply || reply->empty()) continue;
    if (faults_.latency.count() > 0) {
      delay_.expires_after(faults_.latency);
      co_await delay_.async_wait(asio::redirect_error(asio::use_awaitable, ec));
      if (!*alive || !socket_.is_open()) co_return;
    }
    if (lose()) {
      ++dropped_;
      continue;
    }
    socket_.send_to(asio::buffer(*reply), from, 0, ec);
    if (ec) log_.debug("ipmi: send failed", {{"error", ec.message()}});
  }
}

}  // namespace kiln::vbmc
