#include "drivers/redfish/discovery.h"

#include <algorithm>
#include <cctype>

namespace kiln::redfish {

namespace {

std::string str(const nlohmann::json& j, const char* key) {
  if (!j.is_object()) return {};
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

std::string last_segment(std::string_view uri) {
  while (!uri.empty() && uri.back() == '/') uri.remove_suffix(1);
  auto pos = uri.rfind('/');
  return std::string(pos == std::string_view::npos ? uri : uri.substr(pos + 1));
}

const nlohmann::json* child(const nlohmann::json& j, const char* key, const char* key2) {
  if (!j.is_object()) return nullptr;
  auto it = j.find(key);
  if (it == j.end()) return nullptr;
  if (!key2) return &*it;
  if (!it->is_object()) return nullptr;
  auto it2 = it->find(key2);
  return it2 == it->end() ? nullptr : &*it2;
}

int score(const nlohmann::json& s) {
  int points = 0;
  if (looks_like_baseboard(s)) points -= 100;
  if (str(s, "SystemType") == "Physical") points += 4;
  if (str(s, "SystemType") == "DPU") points -= 100;
  const nlohmann::json* count = child(s, "ProcessorSummary", "Count");
  if (count && count->is_number_integer() && count->get<int>() > 0) points += 4;
  if (child(s, "Actions", "#ComputerSystem.Reset")) points += 1;
  if (child(s, "Boot", nullptr)) points += 1;
  return points;
}

}  // namespace

std::string odata_id(const nlohmann::json& j) { return str(j, "@odata.id"); }

std::string link_of(const nlohmann::json& j, const char* key, const char* key2) {
  const nlohmann::json* c = child(j, key, key2);
  return c ? odata_id(*c) : std::string();
}

std::vector<std::string> links_of(const nlohmann::json& j, const char* key, const char* key2) {
  std::vector<std::string> out;
  const nlohmann::json* c = child(j, key, key2);
  if (!c || !c->is_array()) return out;
  for (const auto& m : *c) {
    std::string id = odata_id(m);
    if (!id.empty()) out.push_back(std::move(id));
  }
  return out;
}

std::vector<std::string> member_uris(const nlohmann::json& collection) {
  return links_of(collection, "Members");
}

std::string next_link(const nlohmann::json& collection) {
  return str(collection, "Members@odata.nextLink");
}

Result<std::size_t> select_host_system(const std::vector<SystemCandidate>& candidates,
                                       std::string_view system_id) {
  if (candidates.empty()) return Error(Code::kNotFound, "redfish: the BMC lists no ComputerSystem");
  if (!system_id.empty()) {
    for (std::size_t i = 0; i < candidates.size(); ++i) {
      const auto& c = candidates[i];
      if (str(c.resource, "Id") == system_id || last_segment(c.uri) == system_id ||
          c.uri == system_id) {
        return i;
      }
    }
    for (std::size_t i = 0; i < candidates.size(); ++i) {
      if (str(candidates[i].resource, "Name") == system_id) return i;
    }
    std::string ids;
    for (const auto& c : candidates) {
      if (!ids.empty()) ids += ", ";
      std::string id = str(c.resource, "Id");
      ids += id.empty() ? last_segment(c.uri) : id;
    }
    return Error(Code::kNotFound, "redfish: no ComputerSystem '" + std::string(system_id) +
                                      "' on the BMC (it has: " + ids + ")");
  }
  std::size_t best = 0;
  int best_score = score(candidates[0].resource);
  for (std::size_t i = 1; i < candidates.size(); ++i) {
    const int s = score(candidates[i].resource);
    if (s > best_score) {
      best = i;
      best_score = s;
    }
  }
  return best;
}

std::string etag_of(const RfResponse& r) {
  if (!r.etag.empty()) return r.etag;
  return str(r.body, "@odata.etag");
}

asio::awaitable<Result<HostSystem>> find_host_system(RedfishClient& client, std::string system_id,
                                                     Deadline deadline, std::span<const std::string_view> members) {
  if (!client.cached_system_uri.empty() && client.cached_system_for == system_id) {
    const std::string uri = client.cached_system_uri;
    auto r = co_await client.get(uri, deadline, members);
    if (r) {
      HostSystem out;
      out.uri = uri;
      out.etag = etag_of(*r);
      out.resource = std::move(r->body);
      co_return out;
    }
    if (r.error().code != Code::kNotFound) co_return r.take_error();
    client.cached_system_uri.clear();
  }
  auto root = co_await client.service_root(deadline);
  if (!root) co_return root.take_error();
  const std::string systems = link_of(*root, "Systems");
  if (systems.empty()) {
    co_return Error(Code::kNotFound, "redfish: the service root has no Systems collection");
  }
  auto uris = co_await client.members(systems, deadline);
  if (!uris) co_return uris.take_error();
  std::vector<SystemCandidate> candidates;
  std::vector<std::string> etags;
  for (const auto& uri : *uris) {
    auto r = co_await client.get(uri, deadline);
    if (!r) {
      if (r.error().code == Code::kNotFound) continue;  // listed but gone: BMCs do this
      co_return r.take_error();
    }
    SystemCandidate c;
    c.uri = uri;
    c.resource = std::move(r->body);
    etags.push_back(etag_of(*r));
    candidates.push_back(std::move(c));
  }
  auto pick = select_host_system(candidates, system_id);
  if (!pick) co_return pick.take_error();
  HostSystem out;
  out.uri = candidates[*pick].uri;
  out.resource = std::move(candidates[*pick].resource);
  out.etag = etags[*pick];
  client.cached_system_uri = out.uri;
  client.cached_system_for = system_id;
  co_return out;
}

}  // namespace kiln::redfish
