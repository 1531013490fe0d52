#pragma once
// RedfishClient: one BMC's Redfish service as seen by the driver.
//
// A client owns at most one Redfish session with its BMC and speaks through
// the driver's HttpClient, which every BMC's client shares: one connection
// pool bounded over the whole fleet, one TLS context per trust setting, and
// the TLS sessions that let a BMC whose connection was closed resume instead
// of a full handshake. Bodies are parsed by the driver's BodyParser (large
// ones off the I/O threads). It hides the transport rules real BMCs impose:
//
//  * Authentication. On first use it reads the service root (which the
//    standard lets anyone read), finds the Sessions collection from
//    Links.Sessions or SessionService.Sessions, and logs in with a POST of
//    {UserName, Password}; 200, 201 and 204 are all success (BMCs differ), the
//    X-Auth-Token header is the credential and the Location header (or the
//    body's @odata.id) the session to DELETE later. When the service has no
//    sessions (no link, 404/405/501) or refuses to open one for another reason
//    (session limit reached, 500), requests fall back to HTTP Basic, and the
//    refusal is kept so a later 401 can explain itself. 401/403 on login means
//    the credentials are wrong: kUnauthenticated, no fallback.
//  * Session expiry. A 401 on a request made with a session drops it, logs in
//    again once and repeats the request.
//  * Redirects. 307/308 (and 301/302 for GET) are followed up to 5 hops with
//    the same method and body. Credentials go only to the BMC's own host.
//  * Deadlines. Every request runs under min(request_timeout, time left to
//    the caller's deadline); a deadline already passed is kTimeout before any
//    I/O.
//
// Threading: not thread-safe. The driver runs every call for one BMC on that
// BMC's strand, one at a time (see redfish_driver.cc).

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>  // before Asio: Boost 1.74 awaitable.hpp uses std::exchange
#include <vector>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <nlohmann/json.hpp>

#include "common/http/client.h"
#include "common/log.h"
#include "common/result.h"
#include "drivers/redfish/body_parser.h"

namespace kiln::redfish {

namespace asio = boost::asio;
using Clock = std::chrono::steady_clock;
using Deadline = Clock::time_point;

struct ClientSettings {
  std::string origin;    // "https://host:port"
  std::string username;
  std::string password;  // never logged
  bool verify_tls = true;
  std::string ca_file;   // PEM bundle; empty = system trust store
  // Upper bound of one HTTP exchange (connect + TLS + write + read).
  std::chrono::milliseconds request_timeout{30000};
};

bool same_identity(const ClientSettings& a, const ClientSettings& b);

// One answer, whatever its status.
struct RfResponse {
  int status = 0;
  nlohmann::json body;   // null when the body is empty or not JSON
  std::string etag;      // the ETag header, "" when absent
  std::string location;  // the Location header, "" when absent
  std::string auth_token;  // X-Auth-Token header (login answers)
};

enum class AuthMode { kUnknown, kSession, kBasic };

class RedfishClient {
 public:
  // `http` and `parser` are borrowed and must outlive the client.
  RedfishClient(http::HttpClient& http, BodyParser& parser, ClientSettings settings, Logger log);
  RedfishClient(const RedfishClient&) = delete;
  RedfishClient& operator=(const RedfishClient&) = delete;

  const ClientSettings& settings() const { return settings_; }
  // New settings for the same BMC. When the user, password or TLS policy
  // changed, the session and the cached discovery are forgotten (no logout:
  // the old credentials may no longer be valid).
  void update(ClientSettings settings);

  // Sends one authenticated request and returns the answer whatever its
  // status, except a final 401/403 which is kUnauthenticated with the BMC's
  // words. `uri` is a path ("/redfish/v1/Systems/1") or an absolute URL.
  // `headers` are extra request headers (If-Match). A non-empty `body` is
  // sent as application/json. Errors: kTimeout, kUnavailable (connect/TLS),
  // kUnauthenticated, kInvalidArgument (bad URI), kDriverError (redirect loop).
  // `members`, when given, names the only top-level members of a 2xx JSON
  // object body the caller reads (BodyParser::parse); other answers keep
  // their whole body, for the error they carry.
  asio::awaitable<Result<RfResponse>> send(http::bhttp::verb method, std::string uri,
                                           std::string body,
                                           std::map<std::string, std::string> headers,
                                           Deadline deadline, std::span<const std::string_view> members = {});

  // GET that wants a 2xx JSON object; any other status becomes http_error()
  // (kNotFound for 404, kDriverError with the BMC's words otherwise). A 403
  // to a client holding a session is kPermissionDenied: the credentials were
  // good enough to log in, so only this resource is refused.
  // `members` as for send().
  asio::awaitable<Result<RfResponse>> get(std::string uri, Deadline deadline,
                                          std::span<const std::string_view> members = {});

  // Every member @odata.id of a collection, each once, following
  // Members@odata.nextLink pages until a page brings no new member (a nextLink
  // that answers the same page again) or 1000 pages have been read.
  asio::awaitable<Result<std::vector<std::string>>> members(std::string uri, Deadline deadline);

  // The service root, read once and cached.
  asio::awaitable<Result<nlohmann::json>> service_root(Deadline deadline);

  // Deletes the session (best effort) and forgets it.
  asio::awaitable<void> logout(Deadline deadline);

  // The open session, for a logout the driver makes at shutdown.
  struct SessionInfo {
    std::string token;
    std::string url;  // absolute
  };
  std::optional<SessionInfo> session() const;
  AuthMode auth_mode() const { return mode_; }

  // The host ComputerSystem found by discovery for the system id in
  // cached_system_for, cached across calls (discovery.cc fills and clears it).
  std::string cached_system_uri;
  std::string cached_system_for;

 private:
  asio::awaitable<Result<RfResponse>> raw(http::bhttp::verb method, std::string url,
                                          std::string body,
                                          std::map<std::string, std::string> headers,
                                          Deadline deadline, std::span<const std::string_view> members = {});
  asio::awaitable<Status> login(Deadline deadline);
  std::string absolute(const std::string& uri) const;
  bool same_host(const std::string& url) const;
  void add_auth(std::map<std::string, std::string>& headers) const;

  ClientSettings settings_;
  Logger log_;
  http::HttpClient& http_;
  BodyParser& parser_;
  std::optional<nlohmann::json> root_;
  AuthMode mode_ = AuthMode::kUnknown;
  std::string token_;
  std::string session_url_;
  std::string session_refusal_;  // why a session could not be opened (for Basic's 401)
};

}  // namespace kiln::redfish
