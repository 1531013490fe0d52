// /v1/ports through the Ironic-compatible API: create, list (and /detail,
// and /v1/nodes/{node_ident}/ports), show, delete. These are Kiln's ports
// (the MACs PXE and the agent find a node by), through the same store calls
// and events as /v1/ports, staff only as there.
//
// Kiln keeps a port's MAC, node and PXE flag; the fields Ironic has beyond
// those (extra, local_link_connection, physical_network, portgroup) are
// accepted only empty on create, and read back empty, rather than dropped
// silently.

#include <algorithm>

#include "common/ids.h"
#include "controller/api/json_input.h"
#include "controller/api/node_input.h"
#include "controller/api/port_flows.h"
#include "controller/api/reply.h"
#include "controller/ironic/ironic_node_view.h"
#include "controller/ironic/ironic_routes.h"
#include "controller/model/event_types.h"

namespace kiln::ironic {
namespace {

using nlohmann::json;
using api::ApiContext;

struct PortField {
  std::string_view name;
  int minor;
  bool in_list;
};
constexpr PortField kPortFields[] = {
    {"uuid", 1, true}, {"address", 1, true}, {"node_uuid", 1, false}, {"extra", 1, false},
    {"created_at", 1, false}, {"updated_at", 1, false}, {"internal_info", 18, false},
    {"local_link_connection", 19, false}, {"pxe_enabled", 19, false}, {"portgroup_uuid", 24, false},
    {"physical_network", 34, false}, {"is_smartnic", 53, false},
};

json port_value(const Port& p, std::string_view f) {
  if (f == "uuid") return p.id;
  if (f == "address") return p.address;
  if (f == "node_uuid") return p.node_id;
  if (f == "created_at") return ironic_timestamp(p.created_at);
  if (f == "updated_at") return json();
  if (f == "pxe_enabled") return p.pxe;
  if (f == "is_smartnic") return false;
  if (f == "portgroup_uuid" || f == "physical_network") return json();
  return json::object();  // extra, internal_info, local_link_connection
}

json port_view(const IronicCall& call, const Port& p, bool detail, const std::optional<std::set<std::string>>& fields) {
  json out = json::object();
  for (const PortField& f : kPortFields) {
    if (call.version.minor < f.minor) continue;
    if (fields ? (!fields->contains(std::string(f.name)) && f.name != "uuid") : (!detail && !f.in_list)) continue;
    out[std::string(f.name)] = port_value(p, f.name);
  }
  out["links"] = json::array({{{"href", call.endpoint + "/v1/ports/" + p.id}, {"rel", "self"}},
                              {{"href", call.endpoint + "/ports/" + p.id}, {"rel", "bookmark"}}});
  return out;
}

// ?fields= for ports; a refusal is returned as (status, message).
std::variant<std::set<std::string>, std::pair<int, std::string>> port_fields(std::string_view value, ApiVersion v) {
  std::set<std::string> out;
  std::size_t pos = 0;
  while (pos <= value.size()) {
    std::size_t comma = value.find(',', pos);
    std::string f(value.substr(pos, comma == std::string_view::npos ? std::string_view::npos : comma - pos));
    const PortField* row = nullptr;
    for (const PortField& p : kPortFields)
      if (p.name == f) row = &p;
    if (row == nullptr && f != "links")
      return std::pair<int, std::string>{400, "fields: field " + f.substr(0, 64) + " is not a valid port field"};
    if (row != nullptr && v.minor < row->minor)
      return std::pair<int, std::string>{406, "fields: field " + f + " needs API version 1." + std::to_string(row->minor)};
    out.insert(f);
    if (comma == std::string_view::npos) break;
    pos = comma + 1;
  }
  return out;
}

http::Reply port_reply(const IronicCall& call, bhttp::status status, const Port& p) {
  return ironic_json_reply(call, status, port_view(call, p, true, std::nullopt));
}

asio::awaitable<Result<http::Reply>> create_port(ApiContext& ctx, IronicCall& call) {
  Result<json> body = api::parse_json_body(call.req(), {"application/json"});
  if (!body) co_return body.error();
  if (!body->is_object()) co_return Error::invalid("", "the body must be a JSON object");
  std::vector<FieldError> errors;
  std::string mac;
  std::string node_ref;
  bool pxe = true;
  std::string id;
  for (const auto& [key, v] : body->items()) {
    if (key == "address") {
      std::optional<std::string> m = v.is_string() ? api::normalize_mac(v.get<std::string>()) : std::nullopt;
      if (!m) errors.push_back({"/address", "must be a MAC address"});
      else mac = *m;
    } else if (key == "node_uuid") {
      if (!v.is_string()) errors.push_back({"/node_uuid", "must be a node UUID"});
      else node_ref = v.get<std::string>();
    } else if (key == "pxe_enabled") {
      if (v.is_boolean()) pxe = v.get<bool>();
      else if (v == "true" || v == "True") pxe = true;
      else if (v == "false" || v == "False") pxe = false;
      else errors.push_back({"/pxe_enabled", "must be a boolean"});
    } else if (key == "uuid") {
      if (!v.is_null() && (!v.is_string() || v.get<std::string>().size() != 36))
        errors.push_back({"/uuid", "must be a UUID"});
      else if (v.is_string()) id = v.get<std::string>();
    } else if (key == "extra" || key == "local_link_connection" || key == "internal_info") {
      if (!v.is_null() && !(v.is_object() && v.empty()))
        errors.push_back({"/" + key, "Kiln keeps no " + key + " for a port; send it empty or leave it out"});
    } else if (key == "physical_network" || key == "portgroup_uuid" || key == "name") {
      if (!v.is_null()) errors.push_back({"/" + key, "Kiln's ports have no " + key});
    } else if (key == "is_smartnic") {
      if (v != false) errors.push_back({"/is_smartnic", "Kiln's ports are not smart NICs"});
    } else {
      errors.push_back({"/" + key, "not a port field"});
    }
  }
  if (mac.empty() && errors.empty()) errors.push_back({"/address", "required"});
  if (node_ref.empty() && errors.empty()) errors.push_back({"/node_uuid", "required"});
  if (!errors.empty()) co_return api::invalid_fields(std::move(errors));
  Result<Node> node = co_await ctx.deps.db.run([&] { return ctx.deps.store.get_node(node_ref); });
  if (!node) {
    if (node.error().code == Code::kNotFound) co_return Error::invalid("/node_uuid", "no such node");
    co_return node.error();
  }
  call.base.node_id = node->id;
  Port port{id.empty() ? new_uuid() : id, node->id, mac, pxe, ctx.deps.clock.now_ms()};
  EventDraft event = api::event_draft(call.base, event_type::kPortCreated, *node);
  event.detail["port"] = port.id;
  event.detail["address"] = port.address;
  event.detail["via"] = "ironic";
  Result<Port> created = co_await ctx.deps.db.run([&] { return ctx.deps.store.create_port(port, event); });
  if (!created) {
    if (created.error().code == Code::kConflict)
      co_return Error(Code::kConflict, "/address: a port with MAC address " + mac + " already exists",
                      {{"/address", "duplicate address"}});
    if (created.error().code == Code::kNotFound) co_return Error::invalid("/node_uuid", "no such node");
    co_return created.error();
  }
  http::Reply reply = port_reply(call, bhttp::status::created, *created);
  reply.response.set(bhttp::field::location, call.endpoint + "/v1/ports/" + created->id);
  co_return reply;
}

asio::awaitable<Result<http::Reply>> list_ports(ApiContext& ctx, IronicCall& call, bool detail_route,
                                                bool under_node) {
  const api::Query& q = call.query();
  bool detail = detail_route;
  if (std::optional<std::string> d = q.get("detail")) detail = *d == "true" || *d == "True" || *d == "1";
  std::optional<std::set<std::string>> fields;
  if (std::optional<std::string> f = q.get("fields")) {
    if (detail) co_return Error::invalid("fields", "cannot be combined with detail");
    auto parsed = port_fields(*f, call.version);
    if (auto* r = std::get_if<std::pair<int, std::string>>(&parsed)) {
      if (r->first == 406) co_return ironic_error_reply(call, 406, r->second);
      co_return Error::invalid("fields", r->second);
    }
    fields = std::get<std::set<std::string>>(parsed);
  }
  std::optional<int> limit;
  if (q.get("limit")) {
    Result<int> n = q.limit(1000, 1000);
    if (!n) co_return n.error();
    limit = *n;
  }
  std::optional<std::string> node_ref = under_node ? std::optional<std::string>(call.param("node_ident"))
                                                   : q.get("node_uuid");
  if (!under_node && q.get("node")) {
    if (node_ref) co_return Error::invalid("node", "give node or node_uuid, not both");
    node_ref = q.get("node");
  }
  std::optional<std::string> node_id;
  if (node_ref) {
    Result<Node> node = co_await api::load_visible_node(ctx, call.base, *node_ref);
    if (!node) {
      if (under_node || node.error().code != Code::kNotFound) co_return node.error();
      co_return Error::invalid(q.get("node") ? "node" : "node_uuid", "no such node");
    }
    node_id = node->id;
  }
  std::optional<std::string> address;
  if (std::optional<std::string> a = q.get("address")) {
    std::optional<std::string> m = api::normalize_mac(*a);
    if (!m) co_return Error::invalid("address", "must be a MAC address");
    address = *m;
  }
  std::vector<Port> ports;
  std::string marker;
  for (;;) {
    Result<std::vector<Port>> page =
        co_await ctx.deps.db.run([&] { return ctx.deps.store.list_ports(node_id, 1000, marker); });
    if (!page) co_return page.error();
    const bool last = page->size() < 1000;
    if (!page->empty()) marker = page->back().id;
    for (Port& p : *page)
      if (!address || p.address == *address) ports.push_back(std::move(p));
    if (last) break;
  }
  std::size_t begin = 0;
  if (std::optional<std::string> m = q.get("marker")) {
    auto it = std::find_if(ports.begin(), ports.end(), [&](const Port& p) { return p.id == *m; });
    if (it == ports.end()) co_return Error::invalid("marker", "no such port in this list");
    begin = static_cast<std::size_t>(it - ports.begin()) + 1;
  }
  std::size_t end = ports.size();
  if (limit) end = std::min(end, begin + static_cast<std::size_t>(*limit));
  json items = json::array();
  for (std::size_t i = begin; i < end; ++i) items.push_back(port_view(call, ports[i], detail, fields));
  json body = {{"ports", std::move(items)}};
  if (end < ports.size()) {
    auto params = q.all();
    params["marker"] = ports[end - 1].id;
    params["limit"] = std::to_string(*limit);
    body["next"] = api::absolute_url(call.req(), call.base.info, call.path, params);
  }
  co_return ironic_json_reply(call, bhttp::status::ok, body);
}

asio::awaitable<Result<http::Reply>> get_port(ApiContext& ctx, IronicCall& call) {
  std::optional<std::set<std::string>> fields;
  if (std::optional<std::string> f = call.query().get("fields")) {
    auto parsed = port_fields(*f, call.version);
    if (auto* r = std::get_if<std::pair<int, std::string>>(&parsed)) {
      if (r->first == 406) co_return ironic_error_reply(call, 406, r->second);
      co_return Error::invalid("fields", r->second);
    }
    fields = std::get<std::set<std::string>>(parsed);
  }
  Result<Port> port = co_await api::load_port(ctx, call.base, call.param("port_id"));
  if (!port) co_return port.error();
  co_return ironic_json_reply(call, bhttp::status::ok, port_view(call, *port, true, fields));
}

asio::awaitable<Result<http::Reply>> delete_port(ApiContext& ctx, IronicCall& call) {
  Result<Port> port = co_await api::load_port(ctx, call.base, call.param("port_id"));
  if (!port) co_return port.error();
  Status s = co_await api::delete_port(ctx, call.base, *port, {{"via", "ironic"}});
  if (!s) co_return s.error();
  co_return api::empty_reply(call.req());
}

}  // namespace

void add_ironic_port_routes(IronicRouteTable& t, ApiContext& ctx) {
  using V = bhttp::verb;
  using api::Access;
  const std::vector<std::string> list_query = {"limit", "marker", "sort_key", "sort_dir", "node", "node_uuid",
                                               "address", "fields", "detail"};
  t.add({V::post, "/v1/ports", Access::kStaff, {}, [&ctx](IronicCall& c) { return create_port(ctx, c); }});
  t.add({V::get, "/v1/ports", Access::kStaff, list_query,
         [&ctx](IronicCall& c) { return list_ports(ctx, c, false, false); }});
  t.add({V::get, "/v1/ports/detail", Access::kStaff, list_query,
         [&ctx](IronicCall& c) { return list_ports(ctx, c, true, false); }});
  t.add({V::get, "/v1/ports/{port_id}", Access::kStaff, {"fields"},
         [&ctx](IronicCall& c) { return get_port(ctx, c); }});
  t.add({V::delete_, "/v1/ports/{port_id}", Access::kStaff, {},
         [&ctx](IronicCall& c) { return delete_port(ctx, c); }});
  t.add({V::get, "/v1/nodes/{node_ident}/ports", Access::kStaff, {"limit", "marker", "fields", "detail", "sort_key", "sort_dir"},
         [&ctx](IronicCall& c) { return list_ports(ctx, c, false, true); }, "node_ident"});
  t.add({V::get, "/v1/nodes/{node_ident}/ports/detail", Access::kStaff, {"limit", "marker", "fields", "sort_key", "sort_dir"},
         [&ctx](IronicCall& c) { return list_ports(ctx, c, true, true); }, "node_ident"});
}

}  // namespace kiln::ironic
