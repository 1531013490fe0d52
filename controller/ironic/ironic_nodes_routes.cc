// /v1/nodes through the Ironic-compatible API: enroll, list (and /detail),
// show by UUID or name, JSON Patch, delete; GET .../inventory. A node made
// here is a Kiln node: the same store call, event and rules as POST
// /v1/nodes (the conductor validates the BMC block; names follow Kiln's
// rule), so /v1, the CLI and the portal see it at once. What Kiln has no
// field for is kept in Node::ironic (ironic_node_view.h reads it back).
//
// Create and PATCH share one reader (apply_document): a PATCH applies the
// operations to the node's editable document and reads the result again, so
// a PATCH cannot make a node a POST would refuse.

#include <algorithm>
#include <cctype>

#include "common/ids.h"
#include "common/json_text.h"
#include "controller/api/json_input.h"
#include "controller/api/node_input.h"
#include "controller/api/reply.h"
#include "controller/ironic/ironic_driver_info.h"
#include "controller/ironic/ironic_inventory.h"
#include "controller/ironic/ironic_node_view.h"
#include "controller/ironic/ironic_patch.h"
#include "controller/ironic/ironic_routes.h"
#include "controller/ironic/ironic_states.h"
#include "controller/model/event_types.h"

namespace kiln::ironic {
namespace {

using nlohmann::json;
using api::ApiContext;

// Bounds on what a client may store in the Ironic document.
constexpr std::size_t kMaxDocumentBytes = 256 * 1024;
constexpr std::size_t kMaxResourceClass = 80;   // Ironic's schema
constexpr std::size_t kMaxDescription = 4096;   // Ironic's schema
constexpr std::size_t kMaxShortString = 255;

// Fields a client writes (create and PATCH) and the version that added each.
struct WritableRow {
  std::string_view name;
  int minor;
};
constexpr WritableRow kWritable[] = {
    {"name", 5}, {"driver", 1}, {"driver_info", 1}, {"properties", 1}, {"extra", 1},
    {"instance_info", 1}, {"instance_uuid", 1}, {"maintenance", 1}, {"chassis_uuid", 1},
    {"console_enabled", 1}, {"resource_class", 21}, {"network_interface", 20},
    {"boot_interface", 31}, {"console_interface", 31}, {"deploy_interface", 31}, {"inspect_interface", 31},
    {"management_interface", 31}, {"power_interface", 31}, {"raid_interface", 31}, {"vendor_interface", 31},
    {"storage_interface", 33}, {"rescue_interface", 38}, {"bios_interface", 40}, {"conductor_group", 46},
    {"automated_clean", 47}, {"protected", 48}, {"protected_reason", 48}, {"owner", 50}, {"description", 51},
    {"retired", 61}, {"retired_reason", 61}, {"lessee", 65}, {"network_data", 66}, {"shard", 82},
    {"parent_node", 83}, {"firmware_interface", 86},
};

const WritableRow* writable(std::string_view name) {
  for (const WritableRow& w : kWritable)
    if (w.name == name) return &w;
  return nullptr;
}

std::optional<bool> bool_value(const json& v) {
  if (v.is_boolean()) return v.get<bool>();
  if (!v.is_string()) return std::nullopt;
  std::string s = v.get<std::string>();
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (s == "true" || s == "1" || s == "yes" || s == "y" || s == "on" || s == "t") return true;
  if (s == "false" || s == "0" || s == "no" || s == "n" || s == "off" || s == "f") return false;
  return std::nullopt;
}

bool looks_like_uuid(std::string_view s) {
  if (s.size() != 36) return false;
  for (std::size_t i = 0; i < s.size(); ++i) {
    const bool dash = i == 8 || i == 13 || i == 18 || i == 23;
    if (dash ? s[i] != '-' : !std::isxdigit(static_cast<unsigned char>(s[i]))) return false;
  }
  return true;
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

// What a document asks for the password, for the caller to seal.
struct PasswordEdit {
  bool clear = false;
  std::optional<std::string> plaintext;
};

// The editable fields of `node` as a document (the base of a PATCH).
json editable_document(const Node& node) {
  NodeViewOptions o{kMaxVersion, "", true, std::nullopt};
  json view = node_view(node, o);
  json doc = json::object();
  for (const WritableRow& w : kWritable) {
    auto it = view.find(std::string(w.name));
    doc[std::string(w.name)] = it == view.end() ? json() : *it;
  }
  return doc;
}

// Reads `doc` (a create body or a patched document) onto `node` and its
// Ironic document. Fields newer than `version` are collected in
// `too_new` (answered 406); every other refusal is a FieldError.
PasswordEdit apply_document(const ApiContext& ctx, const json& doc, Node& node, ApiVersion version,
                            std::vector<FieldError>& errors, std::vector<std::string>& too_new) {
  PasswordEdit pw;
  json ironic = node.ironic.is_object() ? node.ironic : json::object();
  for (const auto& [key, value] : doc.items()) {
    const WritableRow* w = writable(key);
    if (w == nullptr) {
      errors.push_back({api::json_pointer_append("", key), "not a field a client may set"});
      continue;
    }
    if (version.minor < w->minor && !value.is_null()) too_new.push_back(key);
  }
  auto get = [&](std::string_view k) -> const json& {
    static const json null_value;
    auto it = doc.find(std::string(k));
    return it == doc.end() ? null_value : *it;
  };
  auto ptr = [](std::string_view k) { return "/" + std::string(k); };

  // driver and driver_info -> the BMC block.
  const json& driver = get("driver");
  std::string ironic_driver;
  if (!driver.is_string()) {
    errors.push_back({"/driver", "required: one of fake-hardware, ipmi, redfish"});
  } else if (!kiln_driver_for(driver.get<std::string>())) {
    errors.push_back({"/driver", "Kiln serves the hardware types fake-hardware, ipmi and redfish"});
  } else {
    ironic_driver = driver.get<std::string>();
    ironic["driver"] = ironic_driver;
  }
  if (!ironic_driver.empty()) {
    std::vector<FieldError> di_errors;
    DriverInfoChange change = read_driver_info(ironic_driver, get("driver_info"), node.bmc, di_errors);
    if (di_errors.empty()) {
      Status valid = ctx.deps.conductor.validate_bmc(change.bmc);
      if (!valid) {
        if (valid.error().fields.empty()) di_errors.push_back({"/driver_info", valid.error().message});
        for (const FieldError& f : valid.error().fields)
          di_errors.push_back({driver_info_field(ironic_driver, f.field), f.message});
      }
    }
    errors.insert(errors.end(), di_errors.begin(), di_errors.end());
    node.bmc = change.bmc;
    ironic["driver_info"] = change.stored;
    pw.clear = change.password_clear;
    pw.plaintext = change.password;
  }

  // name -> Kiln's name (its rule: 1-255 of [A-Za-z0-9._~-], not a UUID).
  const json& name = get("name");
  if (name.is_null()) {
    node.name.clear();
  } else if (!name.is_string() || !api::valid_node_name(name.get<std::string>())) {
    errors.push_back({"/name", "must be 1-255 characters of A-Z a-z 0-9 . _ ~ - and not a UUID"});
  } else {
    node.name = name.get<std::string>();
  }

  // Objects Kiln keeps as written.
  for (std::string_view k : {"properties", "extra", "instance_info", "network_data"}) {
    const json& v = get(k);
    if (v.is_null()) ironic[std::string(k)] = json::object();
    else if (!v.is_object()) errors.push_back({ptr(k), "must be an object"});
    else ironic[std::string(k)] = v;
  }
  // instance_info.configdrive reads back masked (ironic_node_view.cc): the
  // mask written back, as a PATCH of the read document does, keeps the
  // stored drive.
  if (json& info = ironic["instance_info"]; info.contains("configdrive") && info["configdrive"] == std::string(kMaskedSecret)) {
    const json* before = node.ironic.is_object() && node.ironic.contains("instance_info") ? &node.ironic["instance_info"] : nullptr;
    if (before != nullptr && before->is_object() && before->contains("configdrive"))
      info["configdrive"] = (*before)["configdrive"];
    else
      errors.push_back({"/instance_info/configdrive", "\"******\" stands for a stored config drive and this node has none"});
  }

  // Booleans (Ironic takes its boolean strings too).
  const json& maintenance = get("maintenance");
  if (!maintenance.is_null()) {
    if (std::optional<bool> b = bool_value(maintenance)) {
      if (!*b) node.maintenance_reason.clear();
      node.maintenance = *b;
    } else {
      errors.push_back({"/maintenance", "must be a boolean"});
    }
  }
  for (std::string_view k : {"automated_clean", "protected", "retired"}) {
    const json& v = get(k);
    if (v.is_null()) {
      ironic.erase(std::string(k));
    } else if (std::optional<bool> b = bool_value(v)) {
      ironic[std::string(k)] = *b;
    } else {
      errors.push_back({ptr(k), "must be a boolean"});
    }
  }
  if (const json& c = get("console_enabled"); !c.is_null() && bool_value(c).value_or(true))
    errors.push_back({"/console_enabled", "Kiln serves no serial console"});
  if (!get("chassis_uuid").is_null()) errors.push_back({"/chassis_uuid", "Kiln has no chassis"});

  // Strings Kiln keeps as written.
  for (std::string_view k : {"resource_class", "description", "conductor_group", "lessee", "shard",
                             "protected_reason", "retired_reason", "parent_node", "instance_uuid"}) {
    const json& v = get(k);
    const std::size_t max = k == "description" ? kMaxDescription : k == "resource_class" ? kMaxResourceClass
                                                                                        : kMaxShortString;
    if (v.is_null()) {
      ironic.erase(std::string(k));
    } else if (!v.is_string() || v.get<std::string>().size() > max) {
      errors.push_back({ptr(k), "must be a string of at most " + std::to_string(max) + " characters"});
    } else if (k == "instance_uuid" && !looks_like_uuid(v.get<std::string>())) {
      errors.push_back({"/instance_uuid", "must be a UUID"});
    } else {
      ironic[std::string(k)] = v;
    }
  }
  for (const WritableRow& w : kWritable) {
    if (!w.name.ends_with("_interface")) continue;
    const json& v = get(w.name);
    if (v.is_null()) ironic.erase(std::string(w.name));
    else if (!v.is_string() || v.get<std::string>().empty() || v.get<std::string>().size() > kMaxShortString)
      errors.push_back({ptr(w.name), "must be an interface name"});
    else ironic[std::string(w.name)] = v;
  }
  // owner is Kiln's tenant, which allocations give and take.
  if (const json& o = get("owner"); !o.is_null() && (!o.is_string() || o.get<std::string>() != node.tenant))
    errors.push_back({"/owner", "is the node's Kiln tenant, set by allocations (or PATCH /v1/nodes/{id} tenant)"});

  if (dump_json(ironic).size() > kMaxDocumentBytes)
    errors.push_back({"", "the node's Ironic fields exceed " + std::to_string(kMaxDocumentBytes / 1024) + " KiB"});
  node.ironic = std::move(ironic);
  return pw;
}

Error busy_or(Error e) {
  if (e.code == Code::kConflict && e.fields.empty()) return Error(Code::kConflict, "node is busy");
  return e;
}

std::string not_acceptable(const std::vector<std::string>& fields, ApiVersion v) {
  std::string names;
  for (const std::string& f : fields) names += (names.empty() ? "" : ", ") + f;
  return "fields " + names + " are not in API version " + v.str() + "; ask for a later version";
}

http::Reply node_reply(const IronicCall& call, bhttp::status status, const Node& node) {
  return ironic_json_reply(call, status, node_view(node, NodeViewOptions{call.version, call.endpoint, true, std::nullopt}));
}

asio::awaitable<Result<http::Reply>> create_node(ApiContext& ctx, IronicCall& call) {
  Result<json> body = api::parse_json_body(call.req(), {"application/json"});
  if (!body) co_return body.error();
  if (!body->is_object()) co_return Error::invalid("", "the body must be a JSON object");
  json doc = *body;
  std::string id;
  if (auto it = doc.find("uuid"); it != doc.end()) {
    if (!it->is_null()) {
      if (!it->is_string() || !looks_like_uuid(it->get<std::string>()))
        co_return Error::invalid("/uuid", "must be a UUID");
      id = lower(it->get<std::string>());
    }
    doc.erase("uuid");
  }
  Node node;
  node.kind = NodeKind::kBaremetal;
  if (auto it = doc.find("boot_mode"); it != doc.end()) {
    if (!it->is_null()) {
      if (*it != "uefi" && *it != "bios") co_return Error::invalid("/boot_mode", "must be uefi or bios");
      node.boot_mode = it->get<std::string>();
    }
    doc.erase("boot_mode");
  }
  std::vector<FieldError> errors;
  std::vector<std::string> too_new;
  PasswordEdit pw = apply_document(ctx, doc, node, call.version, errors, too_new);
  if (!too_new.empty()) co_return ironic_error_reply(call, 406, not_acceptable(too_new, call.version));
  if (!errors.empty()) co_return api::invalid_fields(std::move(errors));

  const int64_t now = ctx.deps.clock.now_ms();
  node.id = id.empty() ? new_uuid() : id;
  node.created_at = now;
  node.updated_at = now;
  node.version = 1;
  // Ironic enrolls from 1.11; older clients expect a node ready for use.
  node.provision_state = call.version.at_least(11) ? ProvisionState::kEnroll : ProvisionState::kAvailable;
  if (pw.plaintext) node.bmc.password_sealed = ctx.deps.secrets.seal(*pw.plaintext);
  EventDraft event = api::event_draft(call.base, event_type::kNodeCreated, node);
  event.to_state = std::string(to_string(node.provision_state));
  event.detail["via"] = "ironic";
  Result<Node> created = co_await ctx.deps.db.run([&] { return ctx.deps.store.create_node(node, event); });
  if (!created) {
    Error e = created.take_error();
    if (e.code == Code::kConflict)
      co_return Error(Code::kConflict, "a node with this uuid or name already exists: " + e.message);
    co_return e;
  }
  call.base.node_id = created->id;
  call.base.log.info("node enrolled", {{"node", created->id}, {"driver", created->bmc.driver}, {"via", "ironic"}});
  http::Reply reply = node_reply(call, bhttp::status::created, *created);
  reply.response.set(bhttp::field::location, call.endpoint + "/v1/nodes/" + created->id);
  co_return reply;
}

// ?maintenance=, ?associated=: Ironic's boolean strings.
Result<std::optional<bool>> bool_query(const IronicCall& call, std::string_view key) {
  std::optional<std::string> v = call.query().get(key);
  if (!v) return std::optional<bool>();
  std::optional<bool> b = bool_value(json(*v));
  if (!b) return Error::invalid(std::string(key), "must be true or false");
  return std::optional<bool>(*b);
}

asio::awaitable<Result<http::Reply>> list_nodes(ApiContext& ctx, IronicCall& call, bool detail_route) {
  const api::Query& q = call.query();
  bool detail = detail_route;
  if (std::optional<std::string> d = q.get("detail")) {
    if (detail_route) co_return Error::invalid("detail", "not allowed on /v1/nodes/detail");
    std::optional<bool> b = bool_value(json(*d));
    if (!b) co_return Error::invalid("detail", "must be true or false");
    detail = *b;
  }
  std::optional<std::set<std::string>> fields;
  if (std::optional<std::string> f = q.get("fields")) {
    if (detail_route || detail) co_return Error::invalid("fields", "cannot be combined with detail");
    auto parsed = parse_node_fields(*f, call.version);
    if (auto* r = std::get_if<FieldsRefusal>(&parsed)) {
      if (r->status == 406) co_return ironic_error_reply(call, 406, r->message);
      co_return Error::invalid("fields", r->message);
    }
    fields = std::get<std::set<std::string>>(parsed);
  }
  std::optional<int> limit;
  if (std::optional<std::string> l = q.get("limit")) {
    Result<int> n = q.limit(1000, 1000);
    if (!n) co_return n.error();
    (void)l;
    limit = *n;
  }
  std::optional<std::string> state = q.get("provision_state");
  if (state && !is_provision_state_name(*state))
    co_return Error::invalid("provision_state", "not one of Ironic's provision states");
  Result<std::optional<bool>> maintenance = bool_query(call, "maintenance");
  if (!maintenance) co_return maintenance.error();
  Result<std::optional<bool>> associated = bool_query(call, "associated");
  if (!associated) co_return associated.error();
  std::optional<std::string> driver = q.get("driver");
  std::optional<std::string> instance_uuid = q.get("instance_uuid");
  std::optional<std::string> resource_class = q.get("resource_class");
  std::string sort_key = q.get("sort_key").value_or("id");
  std::string sort_dir = q.get("sort_dir").value_or("asc");
  if (sort_key != "id" && sort_key != "uuid" && sort_key != "created_at" && sort_key != "updated_at" &&
      sort_key != "name" && sort_key != "provision_state")
    co_return Error::invalid("sort_key", "must be one of uuid, created_at, updated_at, name, provision_state");
  if (sort_dir != "asc" && sort_dir != "desc") co_return Error::invalid("sort_dir", "must be asc or desc");

  NodeFilter filter;
  filter.maintenance = *maintenance;
  if (call.principal().role == api::Role::kTenant) filter.tenant = call.principal().tenant;
  // Kiln's store pages by (sort key, id); the Ironic filters on derived
  // names are applied here, so the whole filtered set is read in pages of
  // 1,000 and cut to the client's page afterwards.
  std::vector<Node> nodes;
  ListOptions opts;
  opts.limit = 1000;
  opts.sort_key = sort_key == "uuid" ? "id" : sort_key;
  opts.descending = sort_dir == "desc";
  for (;;) {
    Result<std::vector<Node>> page = co_await ctx.deps.db.run([&] { return ctx.deps.store.list_nodes(filter, opts); });
    if (!page) co_return page.error();
    const bool last = page->size() < static_cast<std::size_t>(opts.limit);
    if (!page->empty()) opts.marker = page->back().id;
    for (Node& n : *page) {
      if (state && !shows_provision_state(n, *state)) continue;
      if (*associated && (instance_uuid_of(n).is_null() == **associated)) continue;
      if (driver && ironic_driver_of(n) != *driver) continue;
      if (instance_uuid && instance_uuid_of(n) != json(*instance_uuid)) continue;
      if (resource_class && doc_string(n, "resource_class") != json(*resource_class)) continue;
      nodes.push_back(std::move(n));
    }
    if (last) break;
  }
  std::size_t begin = 0;
  if (std::optional<std::string> marker = q.get("marker")) {
    auto it = std::find_if(nodes.begin(), nodes.end(), [&](const Node& n) { return n.id == *marker || (!n.name.empty() && n.name == *marker); });
    if (it == nodes.end()) co_return Error::invalid("marker", "no such node in this list: " + to_valid_utf8(marker->substr(0, 64)));
    begin = static_cast<std::size_t>(it - nodes.begin()) + 1;
  }
  std::size_t end = nodes.size();
  if (limit) end = std::min(end, begin + static_cast<std::size_t>(*limit));
  NodeViewOptions o{call.version, call.endpoint, detail, fields};
  json items = json::array();
  for (std::size_t i = begin; i < end; ++i) items.push_back(node_view(nodes[i], o));
  json body = {{"nodes", std::move(items)}};
  if (end < nodes.size()) {
    auto params = q.all();
    params["marker"] = nodes[end - 1].id;
    params["limit"] = std::to_string(*limit);
    body["next"] = api::absolute_url(call.req(), call.base.info, call.path, params);
  }
  co_return ironic_json_reply(call, bhttp::status::ok, body);
}

asio::awaitable<Result<http::Reply>> get_node(ApiContext& ctx, IronicCall& call) {
  std::optional<std::set<std::string>> fields;
  if (std::optional<std::string> f = call.query().get("fields")) {
    auto parsed = parse_node_fields(*f, call.version);
    if (auto* r = std::get_if<FieldsRefusal>(&parsed)) {
      if (r->status == 406) co_return ironic_error_reply(call, 406, r->message);
      co_return Error::invalid("fields", r->message);
    }
    fields = std::get<std::set<std::string>>(parsed);
  }
  Result<Node> node = co_await api::load_visible_node(ctx, call.base, call.param("node_ident"));
  if (!node) co_return node.error();
  co_return ironic_json_reply(call, bhttp::status::ok,
                              node_view(*node, NodeViewOptions{call.version, call.endpoint, true, fields}));
}

asio::awaitable<Result<http::Reply>> patch_node(ApiContext& ctx, IronicCall& call) {
  Result<json> patch = api::parse_json_body(call.req(), {"application/json", "application/json-patch+json"});
  if (!patch) co_return patch.error();
  Result<Node> existing = co_await api::load_visible_node(ctx, call.base, call.param("node_ident"));
  if (!existing) co_return existing.error();
  json doc = editable_document(*existing);
  if (Status s = apply_json_patch(doc, *patch); !s) co_return s.error();
  for (const std::string& f : patched_fields(*patch)) {
    if (writable(f) == nullptr)
      co_return Error::invalid("/" + f, "is an internal attribute and can not be updated");
  }
  if (!existing->reservation.empty()) co_return Error(Code::kConflict, "node is busy");

  std::vector<std::string> too_new;
  std::vector<FieldError> errors;
  Node probe = *existing;
  PasswordEdit pw = apply_document(ctx, doc, probe, call.version, errors, too_new);
  // Only fields this patch touched are held to the version: the rest were
  // read from the node, whatever version set them.
  std::vector<std::string> touched_new;
  for (const std::string& f : patched_fields(*patch))
    if (std::find(too_new.begin(), too_new.end(), f) != too_new.end()) touched_new.push_back(f);
  if (!touched_new.empty()) co_return ironic_error_reply(call, 406, not_acceptable(touched_new, call.version));
  if (!errors.empty()) co_return api::invalid_fields(std::move(errors));

  std::string sealed;
  if (pw.plaintext) sealed = ctx.deps.secrets.seal(*pw.plaintext);
  NodeCondition cond;
  cond.version = existing->version;
  cond.reservation = "";
  EventDraft event = api::event_draft(call.base, event_type::kNodeUpdated, *existing);
  json changed = json::array();
  for (const std::string& f : patched_fields(*patch)) changed.push_back(f);  // names only: values may be secret
  event.detail["fields"] = std::move(changed);
  event.detail["via"] = "ironic";
  const ApiVersion version = call.version;
  const ApiContext& cctx = ctx;
  auto mutate = [&](Node& n) -> Status {
    std::vector<FieldError> errs;
    std::vector<std::string> ignored;
    PasswordEdit edit = apply_document(cctx, doc, n, version, errs, ignored);
    if (!errs.empty()) return api::invalid_fields(std::move(errs));
    if (edit.clear) n.bmc.password_sealed.clear();
    if (edit.plaintext) n.bmc.password_sealed = sealed;
    return ok_status();
  };
  Result<Node> updated =
      co_await ctx.deps.db.run([&] { return ctx.deps.store.update_node_if(existing->id, cond, mutate, {event}); });
  if (!updated) {
    Error e = updated.take_error();
    if (e.code == Code::kPreconditionFailed) co_return Error(Code::kConflict, "node changed while being updated; retry");
    co_return busy_or(std::move(e));
  }
  co_return node_reply(call, bhttp::status::ok, *updated);
}

asio::awaitable<Result<http::Reply>> delete_node(ApiContext& ctx, IronicCall& call) {
  Result<Node> existing = co_await api::load_visible_node(ctx, call.base, call.param("node_ident"));
  if (!existing) co_return existing.error();
  // Ironic refuses a node still associated with an instance.
  if (json inst = doc_string(*existing, "instance_uuid"); !inst.is_null())
    co_return Error(Code::kConflict, "node " + existing->id + " is associated with instance " +
                                         inst.get<std::string>() + "; remove instance_uuid first");
  if (Status s = api::check_deletable(*existing); !s) co_return s.error();
  NodeCondition cond;
  cond.version = existing->version;
  cond.reservation = "";
  EventDraft event = api::event_draft(call.base, event_type::kNodeDeleted, *existing);
  event.from_state = std::string(to_string(existing->provision_state));
  event.detail["via"] = "ironic";
  Status s = co_await ctx.deps.db.run([&] { return ctx.deps.store.delete_node_if(existing->id, cond, event); });
  if (!s) {
    if (s.error().code == Code::kPreconditionFailed)
      co_return Error(Code::kConflict, "node changed while being deleted; retry");
    co_return busy_or(s.take_error());
  }
  co_return api::empty_reply(call.req());
}

// Ironic 1.81: the inspection inventory in IPA's shape (ironic_inventory.h).
asio::awaitable<Result<http::Reply>> get_inventory(ApiContext& ctx, IronicCall& call) {
  Result<Node> node = co_await api::load_visible_node(ctx, call.base, call.param("node_ident"));
  if (!node) co_return node.error();
  if (!node->inventory.is_object())
    co_return Error(Code::kNotFound, "Node inventory record for node " + node->id + " could not be found.");
  co_return ironic_json_reply(call, bhttp::status::ok, ironic_inventory(*node));
}

}  // namespace

void add_ironic_node_routes(IronicRouteTable& t, ApiContext& ctx) {
  using V = bhttp::verb;
  using api::Access;
  const std::vector<std::string> list_query = {"limit", "marker", "sort_key", "sort_dir", "provision_state",
                                               "maintenance", "associated", "driver", "instance_uuid",
                                               "resource_class", "fields", "detail"};
  t.add({V::post, "/v1/nodes", Access::kStaff, {}, [&ctx](IronicCall& c) { return create_node(ctx, c); }});
  t.add({V::get, "/v1/nodes", Access::kAnyRole, list_query,
         [&ctx](IronicCall& c) { return list_nodes(ctx, c, false); }});
  t.add({V::get, "/v1/nodes/detail", Access::kAnyRole, list_query,
         [&ctx](IronicCall& c) { return list_nodes(ctx, c, true); }});
  t.add({V::get, "/v1/nodes/{node_ident}", Access::kAnyRole, {"fields"},
         [&ctx](IronicCall& c) { return get_node(ctx, c); }, "node_ident"});
  t.add({V::patch, "/v1/nodes/{node_ident}", Access::kStaff, {},
         [&ctx](IronicCall& c) { return patch_node(ctx, c); }, "node_ident"});
  t.add({V::delete_, "/v1/nodes/{node_ident}", Access::kStaff, {},
         [&ctx](IronicCall& c) { return delete_node(ctx, c); }, "node_ident"});
  t.add({V::get, "/v1/nodes/{node_ident}/inventory", Access::kAnyRole, {},
         [&ctx](IronicCall& c) { return get_inventory(ctx, c); }, "node_ident", ApiVersion{1, 81}});
}

}  // namespace kiln::ironic
