// RedfishService: SessionService and authentication (redfish_service.h).
//
// A session is a random token handed out by POST .../Sessions (login) and
// dropped by DELETE of its URI; every request but the service root and login
// carries one (X-Auth-Token) or Basic credentials. sessions_ is guarded by mu_.

#include "tools/vbmc/redfish_service.h"

#include <algorithm>

#include "common/crypto.h"
#include "common/ids.h"
#include "tools/vbmc/redfish_documents.h"

namespace kiln::vbmc {

using namespace redfish_docs;

bool RedfishService::authenticated(const http::Request& req) const {
  const std::string token = header(req, "X-Auth-Token");
  if (!token.empty()) {
    std::lock_guard<std::mutex> lock(mu_);
    return sessions_.count(token) > 0;
  }
  const std::string auth = header(req, "Authorization");
  if (auth.rfind("Basic ", 0) != 0) return false;
  auto decoded = base64_decode(auth.substr(6));
  if (!decoded) return false;
  const std::string expected = opts_.user + ":" + opts_.password;
  return constant_time_equal(*decoded, expected);
}

http::Response RedfishService::login(const http::Request& req) {
  const json body = json::parse(req.body(), nullptr, false);
  if (!body.is_object() || !body.contains("UserName") || !body.contains("Password")) {
    return error(400, "PropertyMissing", "The property UserName or Password is a required property and must be included in the request.");
  }
  if (!body["UserName"].is_string() || !body["Password"].is_string() ||
      !constant_time_equal(body["UserName"].get<std::string>(), opts_.user) ||
      !constant_time_equal(body["Password"].get<std::string>(), opts_.password)) {
    log_.info("vbmc: login refused");
    return error(401, "ResourceAtUriUnauthorized",
                 "While accessing the resource at " + kSessions +
                     ", the service received an authorization error: invalid user name or password.");
  }
  Session s;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (static_cast<int>(sessions_.size()) >= opts_.max_sessions) {
      return error(503, "SessionLimitExceeded",
                   "The session establishment failed due to the number of simultaneous sessions "
                   "exceeding the limit of the implementation.");
    }
    s.id = std::to_string(next_session_++);
    s.token = random_hex(16);
    sessions_[s.token] = s;
  }
  http::Response r = make_response(201, session_resource(s.id, opts_.user));
  r.set("X-Auth-Token", s.token);
  r.set(http::bhttp::field::location, kSessions + "/" + s.id);
  log_.info("vbmc: session opened", {{"session", s.id}});
  return r;
}

http::Response RedfishService::sessions_get(const std::string& path) const {
  std::lock_guard<std::mutex> lock(mu_);
  if (path == kSessions) {
    std::vector<std::string> uris;
    for (const auto& kv : sessions_) uris.push_back(kSessions + "/" + kv.second.id);
    std::sort(uris.begin(), uris.end());
    return make_response(200, collection(kSessions, "SessionCollection", "Sessions", uris));
  }
  for (const auto& kv : sessions_) {
    if (path == kSessions + "/" + kv.second.id) {
      return make_response(200, session_resource(kv.second.id, opts_.user));
    }
  }
  return error(404, "ResourceMissingAtURI", "The resource at the URI " + path + " was not found.");
}

http::Response RedfishService::session_delete(const std::string& path) {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto it = sessions_.begin(); it != sessions_.end(); ++it) {
    if (path == kSessions + "/" + it->second.id) {
      log_.info("vbmc: session closed", {{"session", it->second.id}});
      sessions_.erase(it);
      return make_response(204, json());
    }
  }
  return error(404, "ResourceMissingAtURI", "The resource at the URI " + path + " was not found.");
}

}  // namespace kiln::vbmc
