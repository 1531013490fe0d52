// RedfishService: the request path (redfish_service.h): faults and latency,
// routing to the session and system handlers, the captured or generated tree,
// paging and the --redirect-prefix move. The documents themselves are in
// redfish_documents.cc.

#include "tools/vbmc/redfish_service.h"

#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "tools/vbmc/redfish_documents.h"

namespace kiln::vbmc {

using namespace redfish_docs;

namespace {

using http::bhttp::verb;

const std::string kSystemsMoved = "/redfish/v1/Systems-moved";

// --redirect-prefix: where a request under Systems/ is sent ("" = not one).
std::string moved_location(const std::string& path, const std::string& query) {
  if (path.rfind(kSystems + "/", 0) != 0) return std::string();
  std::string where = kSystemsMoved + path.substr(kSystems.size());
  if (!query.empty()) where += "?" + query;
  return where;
}

http::Response temporary_redirect(const std::string& location) {
  http::Response r = make_response(307, json());
  r.set(http::bhttp::field::location, location);
  return r;
}

// Systems-moved/... is served as Systems/...: rewrites `path` in place.
void unmove_path(std::string& path) {
  if (path.rfind(kSystemsMoved + "/", 0) == 0) path = kSystems + path.substr(kSystemsMoved.size());
}

void split_target(const std::string& target, std::string& path, std::string& query) {
  const auto q = target.find('?');
  path = target.substr(0, q);
  query = q == std::string::npos ? std::string() : target.substr(q + 1);
  while (path.size() > 1 && path.back() == '/') path.pop_back();
}

}  // namespace

RedfishService::RedfishService(MachineBackend& backend, const MockupTree* tree,
                               RedfishServiceOptions opts, Logger log)
    : backend_(backend), tree_(tree), opts_(std::move(opts)), log_(std::move(log)),
      rng_(std::random_device{}()) {}

std::size_t RedfishService::session_count() const {
  std::lock_guard<std::mutex> lock(mu_);
  return sessions_.size();
}

http::Response RedfishService::error_response(int status, std::string_view detail) const {
  return error(status, status == 413 ? "PayloadTooLarge" : "GeneralError", std::string(detail));
}

bool RedfishService::inject_fault() {
  if (opts_.fault_500_rate <= 0) return false;
  std::lock_guard<std::mutex> lock(mu_);
  std::uniform_real_distribution<double> d(0.0, 1.0);
  return d(rng_) < opts_.fault_500_rate;
}

http::Response RedfishService::paged(const json& resource, const std::string& path,
                                     const std::string& query) const {
  if (opts_.page_size <= 0 || !resource.contains("Members") || !resource["Members"].is_array()) {
    return make_response(200, resource);
  }
  std::size_t skip = 0;
  const auto p = query.find("$skip=");
  if (p != std::string::npos) {
    try {
      skip = static_cast<std::size_t>(std::stoul(query.substr(p + 6)));
    } catch (...) {
      return error(400, "QueryParameterValueTypeError", "The value for the parameter $skip is of a different type than the parameter can accept.");
    }
  }
  json out = resource;
  const json& all = resource["Members"];
  const std::size_t page = static_cast<std::size_t>(opts_.page_size);
  json members = json::array();
  for (std::size_t i = skip; i < all.size() && i < skip + page; ++i) members.push_back(all[i]);
  out["Members"] = members;
  out["Members@odata.count"] = all.size();
  out.erase("Members@odata.nextLink");
  if (skip + page < all.size()) out["Members@odata.nextLink"] = path + "?$skip=" + std::to_string(skip + page);
  return make_response(200, out);
}

asio::awaitable<http::Reply> RedfishService::handle(http::Request& req, const http::RequestInfo&) {
  if (opts_.latency.count() > 0) {
    asio::steady_timer t(co_await asio::this_coro::executor, opts_.latency);
    boost::system::error_code ec;
    co_await t.async_wait(asio::redirect_error(asio::use_awaitable, ec));
  }
  http::Reply reply;
  reply.response = co_await route(req);
  reply.response.version(req.version());
  reply.response.keep_alive(req.keep_alive());
  reply.response.prepare_payload();
  co_return reply;
}

asio::awaitable<http::Response> RedfishService::route(const http::Request& req) {
  std::string path, query;
  split_target(std::string(req.target()), path, query);
  const verb method = req.method();
  if (inject_fault()) {
    co_return error(500, "InternalError",
                    "The request failed due to an internal service error.  The service is still operational.");
  }
  auto forced = opts_.fault_status.find(path);
  if (forced != opts_.fault_status.end() && method == verb::get) {
    co_return error(forced->second, "GeneralError", "fault injected by --fault-status");
  }
  if (path == "/redfish" && method == verb::get) co_return make_response(200, version_pointer());
  if (path == kRoot && method == verb::get) {
    if (tree_) {
      auto root = tree_->load(kRoot);
      if (root) co_return make_response(200, *root);
    }
    co_return make_response(200, generated_root());
  }
  if (path == kSessions && method == verb::post) co_return login(req);
  if (!authenticated(req)) {
    co_return error(401, "NoValidSession",
                    "There is no valid session established with the implementation.");
  }
  if (path == kSessions || path.rfind(kSessions + "/", 0) == 0) {
    if (method == verb::get) co_return sessions_get(path);
    if (method == verb::delete_ && path != kSessions) co_return session_delete(path);
    co_return error(405, "OperationNotAllowed", "The HTTP method is not allowed on this URI.");
  }
  if (path == kSessionService && method == verb::get) co_return make_response(200, session_service());
  if (opts_.redirect_prefix) {
    const std::string where = moved_location(path, query);
    if (!where.empty()) co_return temporary_redirect(where);
    unmove_path(path);
  }

  auto ids = co_await backend_.machines();
  if (!ids) co_return error(500, "InternalError", ids.error().message);
  for (const auto& id : *ids) {
    const std::string uri = kSystems + "/" + id;
    if (path == uri) {
      if (method == verb::get) co_return co_await system_get(id, uri);
      if (method == verb::patch && opts_.settings_object) {
        co_return error(400, "PropertyNotWritable",
                        "The property Boot is changed through the settings object " + uri + "/Settings.");
      }
      if (method == verb::patch) co_return co_await system_patch(req, id, uri, false);
      co_return error(405, "OperationNotAllowed", "The HTTP method is not allowed on " + uri + ".");
    }
    if (opts_.settings_object && path == uri + "/Settings") {
      if (method == verb::get) co_return co_await settings_get(id, uri);
      if (method == verb::patch) co_return co_await system_patch(req, id, uri, true);
      co_return error(405, "OperationNotAllowed", "The HTTP method is not allowed on " + path + ".");
    }
    if (path == uri + "/Actions/ComputerSystem.Reset") {
      if (method == verb::post) co_return co_await system_reset(req, id, uri);
      co_return error(405, "OperationNotAllowed", "Actions are invoked with POST.");
    }
  }
  if (tree_) {
    auto r = tree_->load(path);
    if (r) {
      if (method != verb::get) {
        co_return error(405, "OperationNotAllowed", "This captured resource is read-only.");
      }
      co_return paged(*r, path, query);
    }
    co_return error(404, "ResourceMissingAtURI", "The resource at the URI " + path + " was not found.");
  }
  if (method != verb::get) co_return error(405, "OperationNotAllowed", "The HTTP method is not allowed on this URI.");
  http::Response g = co_await generated(path, *ids);
  if (g.result_int() == 200 && !query.empty()) {
    const json body = json::parse(g.body(), nullptr, false);
    co_return paged(body, path, query);
  }
  co_return g;
}

asio::awaitable<http::Response> RedfishService::generated(const std::string& path,
                                                          const std::vector<std::string>& ids) {
  if (path == kSystems) {
    std::vector<std::string> uris;
    for (const auto& id : ids) uris.push_back(kSystems + "/" + id);
    const json c = collection(kSystems, "ComputerSystemCollection", "Computer Systems", uris);
    co_return paged(c, path, std::string());
  }
  for (const auto& id : ids) {
    const std::string uri = kSystems + "/" + id;
    if (path.rfind(uri + "/", 0) != 0) continue;
    auto hw = co_await backend_.hardware(id);
    if (!hw) co_return error(500, "InternalError", hw.error().message);
    const std::string rest = path.substr(uri.size());
    const json part = generated_part(uri, rest, *hw);
    if (!part.is_null()) co_return paged(part, path, std::string());
  }
  co_return error(404, "ResourceMissingAtURI", "The resource at the URI " + path + " was not found.");
}

}  // namespace kiln::vbmc
