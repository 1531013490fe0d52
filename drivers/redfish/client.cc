#include "drivers/redfish/client.h"

#include <algorithm>
#include <set>

#include "common/crypto.h"
#include "drivers/redfish/discovery.h"
#include "drivers/redfish/errors.h"

namespace kiln::redfish {

namespace {

using http::bhttp::verb;
constexpr int kMaxRedirects = 5;
constexpr int kMaxPages = 1000;

std::string verb_name(verb v) { return std::string(http::bhttp::to_string(v)); }

nlohmann::json login_body(const std::string& user, const std::string& password) {
  return nlohmann::json{{"UserName", user}, {"Password", password}};
}

bool is_redirect(int status, verb method) {
  if (status == 307 || status == 308) return true;
  return (status == 301 || status == 302) && method == verb::get;
}

}  // namespace

bool same_identity(const ClientSettings& a, const ClientSettings& b) {
  return a.origin == b.origin && a.username == b.username && a.password == b.password &&
         a.verify_tls == b.verify_tls && a.ca_file == b.ca_file;
}

RedfishClient::RedfishClient(http::HttpClient& http, BodyParser& parser, ClientSettings settings, Logger log)
    : settings_(std::move(settings)), log_(std::move(log)), http_(http), parser_(parser) {}

void RedfishClient::update(ClientSettings settings) {
  const bool same = same_identity(settings_, settings);
  settings_ = std::move(settings);
  if (!same) {
    mode_ = AuthMode::kUnknown;
    token_.clear();
    session_url_.clear();
    session_refusal_.clear();
    root_.reset();
    cached_system_uri.clear();
  }
}

std::optional<RedfishClient::SessionInfo> RedfishClient::session() const {
  if (mode_ != AuthMode::kSession || token_.empty() || session_url_.empty()) return std::nullopt;
  return SessionInfo{token_, session_url_};
}

std::string RedfishClient::absolute(const std::string& uri) const {
  if (uri.rfind("http://", 0) == 0 || uri.rfind("https://", 0) == 0) return uri;
  if (!uri.empty() && uri[0] == '/') return settings_.origin + uri;
  return settings_.origin + "/" + uri;
}

bool RedfishClient::same_host(const std::string& url) const {
  // Nearly every request is a path on the BMC's own origin (absolute()):
  // that needs no parse. The '/' after the origin keeps "https://10.0.0.1"
  // from matching "https://10.0.0.1.example".
  const std::string& o = settings_.origin;
  if (url.size() > o.size() && url.compare(0, o.size(), o) == 0 && url[o.size()] == '/') return true;
  auto a = http::Url::parse(url);
  auto b = http::Url::parse(settings_.origin + "/");
  return a && b && a->host == b->host;
}

void RedfishClient::add_auth(std::map<std::string, std::string>& headers) const {
  if (mode_ == AuthMode::kSession) {
    headers["X-Auth-Token"] = token_;
  } else if (mode_ == AuthMode::kBasic) {
    headers["Authorization"] = "Basic " + base64_encode(settings_.username + ":" + settings_.password);
  }
}

asio::awaitable<Result<RfResponse>> RedfishClient::raw(verb method, std::string url,
                                                       std::string body,
                                                       std::map<std::string, std::string> headers,
                                                       Deadline deadline,
                                                       std::span<const std::string_view> members) {
  const std::string what = verb_name(method) + " " + url;
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  if (left.count() <= 0) co_return Error(Code::kTimeout, "redfish: deadline passed before " + what);
  http::ClientRequest req;
  req.method = method;
  req.url = url;
  req.headers = std::move(headers);
  req.headers["Accept"] = "application/json";
  req.headers["OData-Version"] = "4.0";
  if (!body.empty()) {
    req.body = std::move(body);
    req.content_type = "application/json";
  }
  req.timeout = std::min(left, settings_.request_timeout);
  req.verify_tls = settings_.verify_tls;
  req.ca_file = settings_.ca_file;
  auto r = co_await http_.request(std::move(req));
  if (!r) co_return Error(r.error().code, "redfish: " + what + ": " + r.error().message);
  RfResponse out;
  out.status = static_cast<int>(r->result_int());
  const bool success = out.status >= 200 && out.status <= 299;
  out.body = co_await parser_.parse(std::move(r->body()), success ? members : std::span<const std::string_view>{});
  out.etag = std::string((*r)[http::bhttp::field::etag]);
  out.location = std::string((*r)[http::bhttp::field::location]);
  out.auth_token = std::string((*r)["X-Auth-Token"]);
  co_return out;
}

asio::awaitable<Result<nlohmann::json>> RedfishClient::service_root(Deadline deadline) {
  if (root_) co_return *root_;
  std::map<std::string, std::string> none;
  const std::string root_url = absolute("/redfish/v1/");
  const std::string no_body;
  auto r = co_await raw(verb::get, root_url, no_body, none, deadline);
  if (!r) co_return r.take_error();
  if ((r->status == 401 || r->status == 403) && mode_ == AuthMode::kUnknown) {
    // Some BMCs protect even the root; Basic is the only thing we can try before login.
    std::map<std::string, std::string> basic;
    basic["Authorization"] = "Basic " + base64_encode(settings_.username + ":" + settings_.password);
    r = co_await raw(verb::get, root_url, no_body, basic, deadline);
    if (!r) co_return r.take_error();
  }
  if (r->status == 401 || r->status == 403) {
    co_return http_error("GET " + settings_.origin + "/redfish/v1/", r->status, r->body);
  }
  if (r->status < 200 || r->status > 299) {
    co_return http_error("GET " + settings_.origin + "/redfish/v1/", r->status, r->body);
  }
  if (!r->body.is_object()) {
    co_return Error(Code::kDriverError,
                    "redfish: " + settings_.origin + "/redfish/v1/ is not a Redfish service root (no JSON object)");
  }
  root_ = r->body;
  co_return *root_;
}

asio::awaitable<Status> RedfishClient::login(Deadline deadline) {
  auto root = co_await service_root(deadline);
  if (!root) co_return root.take_error();
  std::string sessions = link_of(*root, "Links", "Sessions");
  if (sessions.empty()) {
    const std::string svc = link_of(*root, "SessionService");
    if (!svc.empty()) {
      std::map<std::string, std::string> none;
      const std::string svc_url = absolute(svc);
      const std::string no_body;
      auto s = co_await raw(verb::get, svc_url, no_body, none, deadline);
      if (!s) co_return s.take_error();
      if (s->status >= 200 && s->status <= 299) sessions = link_of(s->body, "Sessions");
    }
  }
  if (sessions.empty()) {
    mode_ = AuthMode::kBasic;
    session_refusal_ = "the service has no SessionService";
    log_.info("redfish: no sessions on this BMC, using Basic auth", {{"bmc", settings_.origin}});
    co_return ok_status();
  }
  const std::string url = absolute(sessions);
  std::map<std::string, std::string> none;
  const std::string credentials = login_body(settings_.username, settings_.password).dump();
  auto r = co_await raw(verb::post, url, credentials, none, deadline);
  if (!r) co_return r.take_error();
  if (r->status == 401 || r->status == 403) {
    Error e = http_error("POST " + url, r->status, r->body);
    co_return Error(Code::kUnauthenticated, "redfish: BMC at " + settings_.origin +
                                                " rejected the credentials of user '" +
                                                settings_.username + "' (" + e.message + ")");
  }
  if (r->status >= 200 && r->status <= 299 && !r->auth_token.empty()) {
    mode_ = AuthMode::kSession;
    token_ = r->auth_token;
    std::string where = r->location;
    if (where.empty()) where = odata_id(r->body);
    session_url_ = where.empty() ? std::string() : absolute(where);
    session_refusal_.clear();
    log_.debug("redfish: session opened", {{"bmc", settings_.origin}});
    co_return ok_status();
  }
  // No token, no sessions (404/405/501) or a refusal such as the session
  // limit: carry on with Basic and remember why.
  mode_ = AuthMode::kBasic;
  if (r->status >= 200 && r->status <= 299) {
    session_refusal_ = "login answered without an X-Auth-Token";
  } else {
    session_refusal_ = http_error("POST " + url, r->status, r->body).message;
  }
  log_.warn("redfish: cannot open a session, using Basic auth",
            {{"bmc", settings_.origin}, {"reason", session_refusal_}});
  co_return ok_status();
}

asio::awaitable<Result<RfResponse>> RedfishClient::send(verb method, std::string uri,
                                                        std::string body,
                                                        std::map<std::string, std::string> headers,
                                                        Deadline deadline,
                                                        std::span<const std::string_view> members) {
  if (mode_ == AuthMode::kUnknown) {
    Status s = co_await login(deadline);
    if (!s) co_return s.take_error();
  }
  std::string url = absolute(uri);
  bool relogged = false;
  for (int hop = 0;;) {
    std::map<std::string, std::string> h = headers;
    if (same_host(url)) add_auth(h);
    auto r = co_await raw(method, url, body, h, deadline, members);
    if (!r) co_return r.take_error();
    if (is_redirect(r->status, method) && !r->location.empty()) {
      if (++hop > kMaxRedirects) {
        co_return Error(Code::kDriverError, "redfish: too many redirects from " + absolute(uri));
      }
      if (r->location.rfind("http://", 0) == 0 || r->location.rfind("https://", 0) == 0 ||
          r->location[0] == '/') {
        url = r->location.rfind("/", 0) == 0 ? http::Url::parse(url)->origin() + r->location
                                             : r->location;
      } else {
        co_return Error(Code::kDriverError, "redfish: unusable redirect Location '" + r->location +
                                                "' from " + url);
      }
      continue;
    }
    if (r->status == 401 && mode_ == AuthMode::kSession && !relogged) {
      // The session expired or the BMC forgot it: log in again, once.
      relogged = true;
      log_.info("redfish: session rejected, logging in again", {{"bmc", settings_.origin}});
      mode_ = AuthMode::kUnknown;
      token_.clear();
      session_url_.clear();
      Status s = co_await login(deadline);
      if (!s) co_return s.take_error();
      continue;
    }
    if (r->status == 403 && mode_ == AuthMode::kSession && method == verb::get) {
      // The session proves the credentials: this resource alone is refused
      // (get() makes it kPermissionDenied, which inventory skips).
      co_return r;
    }
    if (r->status == 401 || r->status == 403) {
      Error e = http_error(verb_name(method) + " " + url, r->status, r->body);
      std::string msg = "redfish: BMC at " + settings_.origin + " rejected user '" +
                        settings_.username + "' (" + e.message + ")";
      if (mode_ == AuthMode::kBasic && !session_refusal_.empty()) {
        msg += "; a session could not be opened either: " + session_refusal_;
      }
      co_return Error(Code::kUnauthenticated, std::move(msg));
    }
    co_return r;
  }
}

asio::awaitable<Result<RfResponse>> RedfishClient::get(std::string uri, Deadline deadline,
                                                       std::span<const std::string_view> members) {
  std::map<std::string, std::string> none;
  const std::string no_body;
  auto r = co_await send(verb::get, uri, no_body, none, deadline, members);
  if (!r) co_return r.take_error();
  if (r->status == 403) {
    co_return Error(Code::kPermissionDenied, http_error("GET " + uri, r->status, r->body).message);
  }
  if (r->status < 200 || r->status > 299) co_return http_error("GET " + uri, r->status, r->body);
  if (!r->body.is_object()) {
    co_return Error(Code::kDriverError, "redfish: GET " + uri + " did not return a JSON object");
  }
  co_return r;
}

asio::awaitable<Result<std::vector<std::string>>> RedfishClient::members(std::string uri,
                                                                         Deadline deadline) {
  std::vector<std::string> out;
  std::set<std::string> seen;
  std::string page = uri;
  for (int n = 0; !page.empty(); ++n) {
    if (n >= kMaxPages) {
      co_return Error(Code::kDriverError, "redfish: collection " + uri + " has too many pages");
    }
    auto r = co_await get(page, deadline);
    if (!r) co_return r.take_error();
    std::size_t fresh = 0;
    for (std::string& m : member_uris(r->body)) {
      if (!seen.insert(m).second) continue;
      out.push_back(std::move(m));
      ++fresh;
    }
    // A page with nothing new ends the walk: some BMCs (and captures of them)
    // list every member and still give a nextLink that answers the same page.
    if (fresh == 0 && n > 0) break;
    page = next_link(r->body);
  }
  co_return out;
}

asio::awaitable<void> RedfishClient::logout(Deadline deadline) {
  if (mode_ == AuthMode::kSession && !session_url_.empty()) {
    std::map<std::string, std::string> h;
    h["X-Auth-Token"] = token_;
    const std::string url = session_url_;
    const std::string no_body;
    auto r = co_await raw(verb::delete_, url, no_body, h, deadline);
    if (!r) log_.warn("redfish: logout failed", {{"bmc", settings_.origin}, {"error", r.error().message}});
  }
  mode_ = AuthMode::kUnknown;
  token_.clear();
  session_url_.clear();
}

}  // namespace kiln::redfish
