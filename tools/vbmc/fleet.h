#pragma once
// Fleet: kiln-vbmc's fleet mode at run time — N independent in-memory BMCs
// (see fleet_plan.h for who lives where and with which faults).
//
// Transport choices, for 10,000 BMCs in one process on one io_context:
//  * IPMI: one UDP socket per BMC, bound to the BMC's own loopback address
//    and the fleet's IPMI port. 10,000 sockets fit under the usual
//    RLIMIT_NOFILE hard limit (main raises the soft limit to it), each BMC
//    keeps its own receive loop, session table and fault PRNG, and a driver
//    sees exactly what it sees on a management LAN: one address per BMC.
//  * Redfish: one HTTPS listener on the wildcard address and the fleet's
//    Redfish port; the BMC is the address the client dialled, read from the
//    Host header, and each BMC has its own RedfishService (sessions,
//    credentials, faults) over a one-machine view of the fleet. N listeners
//    would need N descriptors on top of one per live connection, which does
//    not fit 10,000 BMCs under a 20,000 descriptor limit. Because the
//    listener is on the wildcard address, requests from peers outside
//    127.0.0.0/8 are refused (403).
//
// Threading: everything runs on the one io_context passed to start(); stop()
// and the destructor must run on that thread or after it stopped.

#include <memory>
#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>

#include "common/http/server.h"
#include "common/log.h"
#include "common/result.h"
#include "tools/vbmc/fleet_backend.h"
#include "tools/vbmc/fleet_plan.h"
#include "tools/vbmc/ipmi_bmc.h"
#include "tools/vbmc/ipmi_listener.h"
#include "tools/vbmc/redfish_service.h"

namespace kiln::vbmc {

class Fleet {
 public:
  // Plans the fleet, binds every socket and starts serving. `tls_cert_file`
  // and `tls_key_file` are used when opts.redfish. Errors: kInvalidArgument
  // for a bad plan, kUnavailable when sockets cannot be bound (address in
  // use, descriptor limit).
  static Result<std::unique_ptr<Fleet>> start(asio::io_context& io, const FleetOptions& opts,
                                              const std::string& tls_cert_file,
                                              const std::string& tls_key_file, Logger log);
  ~Fleet();
  Fleet(const Fleet&) = delete;
  Fleet& operator=(const Fleet&) = delete;

  uint16_t ipmi_port() const { return ipmi_port_; }
  uint16_t redfish_port() const { return redfish_port_; }
  const std::vector<FleetBmc>& bmcs() const { return plan_; }

  // Writes the manifest (fleet_plan.h) to `path` atomically (temp + rename).
  // Errors: kInternal naming the file.
  Status write_manifest(const std::string& path) const;

  void stop();

 private:
  struct Bmc;
  Fleet(asio::io_context& io, FleetOptions opts, std::vector<FleetBmc> plan, Logger log);
  Status bind_ipmi();
  Status start_redfish(const std::string& cert, const std::string& key);
  asio::awaitable<http::Reply> route(http::Request& req, const http::RequestInfo& info);
  // The BMC whose address `host` (a Host header) names; -1 when none.
  long bmc_for_host(const std::string& host) const;

  asio::io_context& io_;
  FleetOptions opts_;
  std::vector<FleetBmc> plan_;
  Logger log_;
  FleetBackend backend_;
  std::vector<std::unique_ptr<Bmc>> bmcs_;
  std::unique_ptr<http::HttpServer> server_;
  uint32_t first_address_ = 0;
  uint16_t ipmi_port_ = 0;
  uint16_t redfish_port_ = 0;
};

}  // namespace kiln::vbmc
