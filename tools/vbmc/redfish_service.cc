#include "tools/vbmc/redfish_service.h"

#include <algorithm>

#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "common/crypto.h"
#include "common/ids.h"

namespace kiln::vbmc {

namespace {

using http::bhttp::verb;
using nlohmann::json;

const std::string kRoot = "/redfish/v1";
const std::string kSystems = "/redfish/v1/Systems";
const std::string kSessionService = "/redfish/v1/SessionService";
const std::string kSessions = "/redfish/v1/SessionService/Sessions";
const std::string kRegistryPrefix = "Base.1.8.";

std::string str(const json& j, const char* key, const char* fallback = "") {
  if (!j.is_object()) return fallback;
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string(fallback);
}

json error_body(const std::string& message_id, const std::string& message) {
  return json{{"error",
               {{"code", kRegistryPrefix + message_id},
                {"message", message},
                {"@Message.ExtendedInfo",
                 json::array({{{"@odata.type", "#Message.v1_1_1.Message"},
                               {"MessageId", kRegistryPrefix + message_id},
                               {"Message", message},
                               {"Severity", "Critical"},
                               {"Resolution", "See the message."}}})}}}};
}

http::Response make_response(int status, const json& body) {
  http::Response r;
  r.result(static_cast<unsigned>(status));
  r.set(http::bhttp::field::server, "kiln-vbmc");
  r.set("OData-Version", "4.0");
  if (!body.is_null()) {
    r.set(http::bhttp::field::content_type, "application/json; charset=utf-8");
    r.body() = body.dump(2);
  }
  return r;
}

http::Response error(int status, const std::string& message_id, const std::string& message) {
  return make_response(status, error_body(message_id, message));
}

json link(const std::string& uri) { return json{{"@odata.id", uri}}; }

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

void add_settings_link(json& sys, const std::string& uri) {
  sys["@Redfish.Settings"] = {{"@odata.type", "#Settings.v1_3_5.Settings"},
                              {"SettingsObject", link(uri + "/Settings")}};
}

json settings_resource(const BootOverride& boot, const std::string& uri, const std::string& etag) {
  return json{{"@odata.id", uri + "/Settings"},
              {"@odata.type", "#ComputerSystem.v1_20_0.ComputerSystem"},
              {"@odata.etag", etag},
              {"Id", "Settings"},
              {"Name", "Pending settings of " + uri},
              {"Boot",
               {{"BootSourceOverrideTarget", boot.target},
                {"BootSourceOverrideEnabled", boot.enabled},
                {"BootSourceOverrideMode", boot.mode}}}};
}

json version_pointer() { return json{{"v1", "/redfish/v1/"}}; }

std::vector<std::string> default_boot_targets() { return {"None", "Pxe", "Hdd", "Cd", "UefiHttp"}; }

json collection(const std::string& uri, const std::string& type, const std::string& name,
                const std::vector<std::string>& members) {
  json m = json::array();
  for (const auto& u : members) m.push_back(link(u));
  return json{{"@odata.id", uri},
              {"@odata.type", "#" + type + "." + type},
              {"Name", name},
              {"Members@odata.count", members.size()},
              {"Members", m}};
}

json generated_root() {
  return json{{"@odata.id", kRoot},
              {"@odata.type", "#ServiceRoot.v1_5_0.ServiceRoot"},
              {"Id", "RootService"},
              {"Name", "Kiln virtual BMC"},
              {"RedfishVersion", "1.11.0"},
              {"Systems", link(kSystems)},
              {"SessionService", link(kSessionService)},
              {"Links", {{"Sessions", link(kSessions)}}}};
}

json session_service() {
  return json{{"@odata.id", kSessionService},
              {"@odata.type", "#SessionService.v1_1_8.SessionService"},
              {"Id", "SessionService"},
              {"Name", "Session Service"},
              {"ServiceEnabled", true},
              {"SessionTimeout", 1800},
              {"Sessions", link(kSessions)}};
}

json session_resource(const std::string& id, const std::string& user) {
  return json{{"@odata.id", kSessions + "/" + id},
              {"@odata.type", "#Session.v1_3_0.Session"},
              {"Id", id},
              {"Name", "User Session"},
              {"UserName", user}};
}

json string_list(const std::vector<std::string>& v) {
  json a = json::array();
  for (const auto& s : v) a.push_back(s);
  return a;
}

json generated_system(const MachineState& s, const MachineHardware& h, const std::string& uri,
                      const std::vector<std::string>& resets, const std::string& etag) {
  return json{
      {"@odata.id", uri},
      {"@odata.type", "#ComputerSystem.v1_14_0.ComputerSystem"},
      {"@odata.etag", etag},
      {"Id", s.id},
      {"Name", s.name},
      {"UUID", s.uuid},
      {"SystemType", "Virtual"},
      {"Manufacturer", "Kiln"},
      {"Model", "libvirt domain"},
      {"SerialNumber", s.uuid},
      {"PowerState", s.powered_on ? "On" : "Off"},
      {"Status", {{"State", "Enabled"}, {"Health", "OK"}}},
      {"ProcessorSummary", {{"Count", h.cpus}, {"Model", "Virtual CPU"}}},
      {"MemorySummary", {{"TotalSystemMemoryGiB", static_cast<double>(h.memory_mib) / 1024.0}}},
      {"Boot",
       {{"BootSourceOverrideTarget", s.boot.target},
        {"BootSourceOverrideEnabled", s.boot.enabled},
        {"BootSourceOverrideMode", s.boot.mode},
        {"BootSourceOverrideTarget@Redfish.AllowableValues", json::array({"None", "Pxe", "Hdd", "Cd", "UefiHttp"})}}},
      {"Processors", link(uri + "/Processors")},
      {"Memory", link(uri + "/Memory")},
      {"EthernetInterfaces", link(uri + "/EthernetInterfaces")},
      {"Storage", link(uri + "/Storage")},
      {"Actions",
       {{"#ComputerSystem.Reset",
         {{"target", uri + "/Actions/ComputerSystem.Reset"},
          {"ResetType@Redfish.AllowableValues", string_list(resets)}}}}}};
}

// A sub-resource of a generated system (`rest` is the path below the system).
// Null when there is none.
json generated_part(const std::string& uri, const std::string& rest, const MachineHardware& h) {
  if (rest == "/Processors") {
    return collection(uri + rest, "ProcessorCollection", "Processors", {uri + rest + "/CPU0"});
  }
  if (rest == "/Processors/CPU0") {
    return json{{"@odata.id", uri + rest},
                {"@odata.type", "#Processor.v1_7_0.Processor"},
                {"Id", "CPU0"},
                {"Name", "Virtual CPU"},
                {"ProcessorType", "CPU"},
                {"ProcessorArchitecture", "x86"},
                {"Model", "Virtual CPU"},
                {"TotalCores", h.cpus},
                {"TotalThreads", h.cpus},
                {"Status", {{"State", "Enabled"}, {"Health", "OK"}}}};
  }
  if (rest == "/Memory") {
    return collection(uri + rest, "MemoryCollection", "Memory", {uri + rest + "/DIMM0"});
  }
  if (rest == "/Memory/DIMM0") {
    return json{{"@odata.id", uri + rest},
                {"@odata.type", "#Memory.v1_7_0.Memory"},
                {"Id", "DIMM0"},
                {"Name", "Virtual memory"},
                {"CapacityMiB", h.memory_mib},
                {"Status", {{"State", "Enabled"}, {"Health", "OK"}}}};
  }
  if (rest == "/EthernetInterfaces") {
    std::vector<std::string> m;
    for (std::size_t i = 0; i < h.macs.size(); ++i) m.push_back(uri + rest + "/nic" + std::to_string(i));
    return collection(uri + rest, "EthernetInterfaceCollection", "Ethernet Interfaces", m);
  }
  for (std::size_t i = 0; i < h.macs.size(); ++i) {
    if (rest == "/EthernetInterfaces/nic" + std::to_string(i)) {
      return json{{"@odata.id", uri + rest},
                  {"@odata.type", "#EthernetInterface.v1_6_0.EthernetInterface"},
                  {"Id", "nic" + std::to_string(i)},
                  {"Name", "nic" + std::to_string(i)},
                  {"MACAddress", h.macs[i]},
                  {"PermanentMACAddress", h.macs[i]},
                  {"Status", {{"State", "Enabled"}, {"Health", "OK"}}}};
    }
  }
  if (rest == "/Storage") return collection(uri + rest, "StorageCollection", "Storage", {uri + rest + "/1"});
  if (rest == "/Storage/1") {
    json drives = json::array();
    for (std::size_t i = 0; i < h.disks.size(); ++i) drives.push_back(link(uri + rest + "/Drives/" + std::to_string(i)));
    return json{{"@odata.id", uri + rest},
                {"@odata.type", "#Storage.v1_8_0.Storage"},
                {"Id", "1"},
                {"Name", "Virtual storage"},
                {"Drives", drives},
                {"Drives@odata.count", h.disks.size()}};
  }
  for (std::size_t i = 0; i < h.disks.size(); ++i) {
    if (rest == "/Storage/1/Drives/" + std::to_string(i)) {
      json cap = h.disks[i].size_bytes > 0 ? json(h.disks[i].size_bytes) : json();
      return json{{"@odata.id", uri + rest},
                  {"@odata.type", "#Drive.v1_9_0.Drive"},
                  {"Id", std::to_string(i)},
                  {"Name", h.disks[i].name},
                  {"Model", "Virtual disk"},
                  {"CapacityBytes", cap},
                  {"MediaType", "SSD"},
                  {"Protocol", "PCIe"},
                  {"Status", {{"State", "Enabled"}, {"Health", "OK"}}}};
    }
  }
  return nullptr;
}

// Overlays the back-end's power and boot on a captured system resource.
json overlay_system(json sys, const MachineState& s, const std::string& etag,
                    const std::vector<std::string>& forced_resets) {
  sys["PowerState"] = s.powered_on ? "On" : "Off";
  if (!sys.contains("Boot") || !sys["Boot"].is_object()) sys["Boot"] = json::object();
  sys["Boot"]["BootSourceOverrideTarget"] = s.boot.target;
  sys["Boot"]["BootSourceOverrideEnabled"] = s.boot.enabled;
  sys["Boot"]["BootSourceOverrideMode"] = s.boot.mode;
  sys["@odata.etag"] = etag;
  if (!forced_resets.empty() && sys.contains("Actions") && sys["Actions"].contains("#ComputerSystem.Reset")) {
    json& a = sys["Actions"]["#ComputerSystem.Reset"];
    a.erase("@Redfish.ActionInfo");
    a["ResetType@Redfish.AllowableValues"] = string_list(forced_resets);
  }
  return sys;
}

std::vector<std::string> json_strings(const json& j) {
  std::vector<std::string> out;
  if (!j.is_array()) return out;
  for (const auto& v : j)
    if (v.is_string()) out.push_back(v.get<std::string>());
  return out;
}

void split_target(const std::string& target, std::string& path, std::string& query) {
  const auto q = target.find('?');
  path = target.substr(0, q);
  query = q == std::string::npos ? std::string() : target.substr(q + 1);
  while (path.size() > 1 && path.back() == '/') path.pop_back();
}

std::string header(const http::Request& req, const char* name) {
  auto it = req.find(name);
  return it == req.end() ? std::string() : std::string(it->value());
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

std::vector<std::string> RedfishService::allowed_resets(const std::string& system_uri) const {
  if (!opts_.allowed_reset_types.empty()) return opts_.allowed_reset_types;
  if (tree_) {
    auto sys = tree_->load(system_uri);
    if (sys && sys->contains("Actions") && (*sys)["Actions"].contains("#ComputerSystem.Reset")) {
      const json& a = (*sys)["Actions"]["#ComputerSystem.Reset"];
      auto v = json_strings(a.value("ResetType@Redfish.AllowableValues", json()));
      if (!v.empty()) return v;
      auto info = tree_->load(str(a, "@Redfish.ActionInfo"));
      if (info && info->contains("Parameters")) {
        for (const auto& p : (*info)["Parameters"]) {
          if (str(p, "Name") == "ResetType") {
            auto w = json_strings(p.value("AllowableValues", json()));
            if (!w.empty()) return w;
          }
        }
      }
    }
  }
  return standard_reset_types();
}

std::string RedfishService::etag_for(const MachineState& s) const {
  const std::string tag = "\"" +
                          sha256_hex(s.id + "|" + (s.powered_on ? "on" : "off") + "|" + s.boot.target +
                                     "|" + s.boot.enabled + "|" + s.boot.mode)
                              .substr(0, 16) +
                          "\"";
  return opts_.etag_quirk == "weak" ? "W/" + tag : tag;
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

asio::awaitable<http::Response> RedfishService::system_get(const std::string& id,
                                                           const std::string& uri) {
  auto st = co_await backend_.state(id);
  if (!st) co_return error(st.error().code == Code::kNotFound ? 404 : 500, "InternalError", st.error().message);
  const std::string etag = etag_for(*st);
  json body;
  if (tree_) {
    auto captured = tree_->load(uri);
    if (!captured) co_return error(404, "ResourceMissingAtURI", "The resource at the URI " + uri + " was not found.");
    body = overlay_system(std::move(*captured), *st, etag, opts_.allowed_reset_types);
  } else {
    auto hw = co_await backend_.hardware(id);
    if (!hw) co_return error(500, "InternalError", hw.error().message);
    body = generated_system(*st, *hw, uri, allowed_resets(uri), etag);
  }
  if (opts_.settings_object) add_settings_link(body, uri);
  http::Response r = make_response(200, body);
  r.set(http::bhttp::field::etag, etag);
  co_return r;
}

asio::awaitable<http::Response> RedfishService::settings_get(const std::string& id,
                                                             const std::string& uri) {
  auto st = co_await backend_.state(id);
  if (!st) co_return error(st.error().code == Code::kNotFound ? 404 : 500, "InternalError", st.error().message);
  const std::string etag = etag_for(*st);
  http::Response r = make_response(200, settings_resource(st->boot, uri, etag));
  r.set(http::bhttp::field::etag, etag);
  co_return r;
}

// PATCH of Boot on the system, or (settings) on its settings object, where
// the pending values are applied at once.
asio::awaitable<http::Response> RedfishService::system_patch(const http::Request& req,
                                                             const std::string& id,
                                                             const std::string& uri, bool settings) {
  auto st = co_await backend_.state(id);
  if (!st) co_return error(500, "InternalError", st.error().message);
  const std::string etag = etag_for(*st);
  const std::string if_match = header(req, "If-Match");
  if (!if_match.empty()) {
    bool match = if_match == "*";
    if (opts_.etag_quirk == "weak") match = match || if_match == etag.substr(2);  // strong form only
    else if (opts_.etag_quirk == "none") match = match || if_match == etag;
    if (!match) {
      co_return error(412, "PreconditionFailed",
                      "The ETag supplied did not match the ETag required to change this resource.");
    }
  }
  const json body = json::parse(req.body(), nullptr, false);
  if (!body.is_object()) co_return error(400, "MalformedJSON", "The request body submitted was malformed JSON and could not be parsed by the receiving service.");
  if (!body.contains("Boot") || !body["Boot"].is_object()) {
    co_return error(400, "PropertyNotWritable", "Only the Boot property of this system can be changed.");
  }
  const json& boot = body["Boot"];
  BootOverride next = st->boot;
  std::vector<std::string> targets = default_boot_targets();
  if (tree_) {
    auto captured = tree_->load(uri);
    if (captured && captured->contains("Boot")) {
      auto v = json_strings((*captured)["Boot"].value("BootSourceOverrideTarget@Redfish.AllowableValues", json()));
      if (!v.empty()) targets = v;
    }
  }
  if (boot.contains("BootSourceOverrideTarget")) {
    const std::string t = str(boot, "BootSourceOverrideTarget");
    if (std::find(targets.begin(), targets.end(), t) == targets.end()) {
      co_return error(400, "PropertyValueNotInList",
                      "The value '" + t + "' for the property BootSourceOverrideTarget is not in the list of acceptable values.");
    }
    next.target = t;
  }
  if (boot.contains("BootSourceOverrideEnabled")) {
    const std::string e = str(boot, "BootSourceOverrideEnabled");
    if (e != "Once" && e != "Continuous" && e != "Disabled") {
      co_return error(400, "PropertyValueNotInList",
                      "The value '" + e + "' for the property BootSourceOverrideEnabled is not in the list of acceptable values.");
    }
    next.enabled = e;
  }
  if (boot.contains("BootSourceOverrideMode")) {
    const std::string m = str(boot, "BootSourceOverrideMode");
    if (m != "UEFI" && m != "Legacy") {
      co_return error(400, "PropertyValueNotInList",
                      "The value '" + m + "' for the property BootSourceOverrideMode is not in the list of acceptable values.");
    }
    next.mode = m;
  }
  Status s = co_await backend_.set_boot(id, next);
  if (!s) co_return error(s.error().code == Code::kInvalidArgument ? 400 : 500, "GeneralError", s.error().message);
  log_.info("vbmc: boot override", {{"system", id}, {"target", next.target}, {"enabled", next.enabled}, {"mode", next.mode}});
  if (settings) co_return co_await settings_get(id, uri);
  co_return co_await system_get(id, uri);
}

asio::awaitable<http::Response> RedfishService::system_reset(const http::Request& req,
                                                             const std::string& id,
                                                             const std::string& uri) {
  const json body = json::parse(req.body(), nullptr, false);
  if (!body.is_object() || !body.contains("ResetType") || !body["ResetType"].is_string()) {
    co_return error(400, "ActionParameterMissing",
                    "The action ComputerSystem.Reset requires the parameter ResetType to be present in the request body.");
  }
  const std::string type = body["ResetType"].get<std::string>();
  const std::vector<std::string> allowed = allowed_resets(uri);
  if (std::find(allowed.begin(), allowed.end(), type) == allowed.end()) {
    co_return error(400, "ActionParameterValueNotInList",
                    "The value '" + type + "' for the parameter ResetType in the action ComputerSystem.Reset is not in the list of acceptable values.");
  }
  Status s = co_await backend_.reset(id, type);
  if (!s) co_return error(s.error().code == Code::kInvalidArgument ? 400 : 500, "GeneralError", s.error().message);
  log_.info("vbmc: reset", {{"system", id}, {"reset_type", type}});
  co_return make_response(204, json());
}

}  // namespace kiln::vbmc
