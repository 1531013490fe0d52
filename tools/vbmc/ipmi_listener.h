#pragma once
// IpmiListener: one UDP socket in front of one IpmiBmc — the transport half
// of a virtual BMC's IPMI side. A receive loop hands each datagram to the BMC
// and sends its answer back to the sender, one datagram at a time (a BMC is
// a small serial machine; a slow back-end call delays only this BMC).
//
// Fault injection for fleet benchmarks and tests, per listener:
//  * drop_fraction: each datagram, inbound and outbound, is lost with this
//    probability, drawn from a small PRNG seeded with `seed` (deterministic
//    for a given packet sequence);
//  * latency: every answer waits this long before it is sent;
//  * dead: the BMC answers nothing at all (the socket stays bound, so the
//    console sees silence, not "port unreachable").
//
// Threading: start() spawns the loop on the io_context; stop() closes the
// socket (from the io_context's thread, or after it stopped). The IpmiBmc
// must outlive the listener's loop.

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>  // before Asio: Boost 1.74 awaitable.hpp uses std::exchange

#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/udp.hpp>
#include <boost/asio/steady_timer.hpp>

#include "common/log.h"
#include "common/result.h"
#include "tools/vbmc/ipmi_bmc.h"

namespace kiln::vbmc {

struct IpmiFaults {
  double drop_fraction = 0.0;  // 0..1
  uint64_t seed = 1;
  std::chrono::milliseconds latency{0};
  bool dead = false;
};

class IpmiListener {
 public:
  // Binds UDP `host`:`port` (port 0 = any free one). Errors: kInvalidArgument
  // for a bad host, kUnavailable when the address cannot be bound (in use).
  static Result<std::unique_ptr<IpmiListener>> bind(asio::io_context& io, const std::string& host,
                                                    uint16_t port, IpmiBmc& bmc,
                                                    IpmiFaults faults, Logger log);
  ~IpmiListener();
  IpmiListener(const IpmiListener&) = delete;
  IpmiListener& operator=(const IpmiListener&) = delete;

  uint16_t port() const { return port_; }
  void start();
  void stop();

  uint64_t datagrams_in() const { return in_; }
  uint64_t datagrams_dropped() const { return dropped_; }

 private:
  IpmiListener(asio::io_context& io, IpmiBmc& bmc, IpmiFaults faults, Logger log);
  asio::awaitable<void> serve();
  bool lose();  // one draw of the drop PRNG

  asio::ip::udp::socket socket_;
  asio::steady_timer delay_;
  IpmiBmc& bmc_;
  IpmiFaults faults_;
  Logger log_;
  uint16_t port_ = 0;
  uint64_t rng_state_;
  uint64_t in_ = 0;
  uint64_t dropped_ = 0;
  // Shared with the loop so a loop still parked in a receive after the
  // listener is gone sees `stopped` and leaves without touching it.
  std::shared_ptr<bool> alive_;
};

}  // namespace kiln::vbmc
