#pragma once
// RedfishService: the Redfish front-end of kiln-vbmc, as an HttpServer
// Handler (request in, reply out; it never sees a socket).
//
// What it serves:
//  * With a MockupTree: every captured resource as captured (GET only), with
//    each ComputerSystem's PowerState and Boot overlaid from the back-end.
//  * Without (libvirt): a small generated tree per machine: service root,
//    Systems, the ComputerSystem (Reset action with its allowable values,
//    Boot with its allowable targets), Processors, Memory,
//    EthernetInterfaces (MACs), Storage/1/Drives.
//  * Both: SessionService and its Sessions (POST logs in and answers 201 with
//    X-Auth-Token and Location; DELETE logs out; at most `max_sessions`, then
//    503 Base SessionLimitExceeded), Basic auth as well; everything but the
//    service root and login needs one of the two (401 otherwise).
//  * ComputerSystem.Reset (POST, 204; 400 ActionParameterValueNotInList for a
//    type not allowed) and PATCH of Boot on the system (honours If-Match: a
//    stale or weak ETag gets 412).
//
// Test knobs: `fault_status` answers GETs of one path with a fixed error
// status (a BMC that fails one member of a collection); `latency` delays every answer; `fault_500_rate` answers that
// fraction of requests 500 InternalError; `page_size` pages every collection
// with Members@odata.nextLink; `allowed_reset_types` replaces what systems
// allow; `etag_quirk` "weak" hands out W/"x" ETags and refuses them in
// If-Match (only the strong "x" matches), "always-412" refuses every
// If-Match — the behaviours real BMCs show that the driver must survive.
// `settings_object` gives each ComputerSystem "@Redfish.Settings" pointing at
// <system>/Settings (GET: the pending Boot; PATCH: Boot, applied at once) and
// refuses PATCH on the system itself (400 PropertyNotWritable).
// `redirect_prefix` answers every request under /redfish/v1/Systems/ with
// 307 to the same path under /redfish/v1/Systems-moved/, which serves it.
//
// Threading: handle() may run concurrently; sessions and the fault RNG are
// guarded by a mutex; the back-end guards itself.

#include <chrono>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "common/http/server.h"
#include "common/log.h"
#include "tools/vbmc/backend.h"
#include "tools/vbmc/mockup_backend.h"

namespace kiln::vbmc {

struct RedfishServiceOptions {
  std::string user = "admin";
  std::string password = "password";
  int max_sessions = 16;
  double fault_500_rate = 0.0;                 // 0..1
  std::chrono::milliseconds latency{0};
  std::vector<std::string> allowed_reset_types;  // empty = what the system says
  std::string etag_quirk = "none";             // none | weak | always-412
  int page_size = 0;                           // 0 = unpaged
  bool settings_object = false;                // Boot PATCHed via @Redfish.Settings only
  bool redirect_prefix = false;                // 307 Systems/... -> Systems-moved/...
  std::map<std::string, int> fault_status;     // path -> status every GET of it answers
};

class RedfishService {
 public:
  // `tree` may be null (generated tree); both must outlive the service.
  RedfishService(MachineBackend& backend, const MockupTree* tree, RedfishServiceOptions opts,
                 Logger log);

  asio::awaitable<http::Reply> handle(http::Request& req, const http::RequestInfo& info);
  // Redfish-shaped error bodies for the server's own errors (413, 503...).
  http::Response error_response(int status, std::string_view detail) const;

  std::size_t session_count() const;

 private:
  struct Session {
    std::string id;
    std::string token;
  };

  asio::awaitable<http::Response> route(const http::Request& req);
  asio::awaitable<http::Response> system_get(const std::string& id, const std::string& uri);
  asio::awaitable<http::Response> system_patch(const http::Request& req, const std::string& id,
                                               const std::string& uri, bool settings);
  asio::awaitable<http::Response> settings_get(const std::string& id, const std::string& uri);
  asio::awaitable<http::Response> system_reset(const http::Request& req, const std::string& id,
                                               const std::string& uri);
  asio::awaitable<http::Response> generated(const std::string& path, const std::vector<std::string>& ids);

  http::Response login(const http::Request& req);
  http::Response sessions_get(const std::string& path) const;
  http::Response session_delete(const std::string& path);
  bool authenticated(const http::Request& req) const;
  bool inject_fault();
  std::vector<std::string> allowed_resets(const std::string& system_uri) const;
  std::string etag_for(const MachineState& s) const;
  http::Response paged(const nlohmann::json& resource, const std::string& path,
                       const std::string& query) const;

  MachineBackend& backend_;
  const MockupTree* tree_;
  RedfishServiceOptions opts_;
  Logger log_;
  // A generated system's body and what it was made from (its ETag, the
  // hardware, the reset types): a fleet answers a power sweep's GET of every
  // system, and building and dumping the document each time was a third of
  // the fleet's CPU, on the cores of the controller it is measuring.
  struct RenderedSystem {
    std::string made_of;
    std::string body;
  };
  std::optional<std::string> rendered_system(const std::string& uri, const std::string& made_of) const;
  void keep_rendered_system(const std::string& uri, std::string made_of, std::string body);

  mutable std::mutex mu_;  // guards sessions_, next_session_, rng_, rendered_
  std::map<std::string, Session> sessions_;  // by token
  std::map<std::string, RenderedSystem> rendered_;  // by system URI
  int next_session_ = 1;
  std::mt19937 rng_;
};

}  // namespace kiln::vbmc
