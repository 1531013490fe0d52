// /v1/nodes and /v1/nodes/{id}: enrollment, listing, reading, JSON Merge
// Patch, deletion. Every write is one store transaction with its event; input
// is fully validated (shape here and in node_input, BMC fields by the
// conductor's drivers) before anything is written.

#include <algorithm>
#include <cctype>
#include <set>

#include "common/ids.h"
#include "common/json_text.h"
#include "controller/api/json_input.h"
#include "controller/api/merge_patch.h"
#include "controller/api/node_input.h"
#include "controller/api/node_view.h"
#include "controller/api/node_writer.h"
#include "controller/api/reply.h"
#include "controller/api/route_table.h"
#include "controller/api/virtual_nodes.h"
#include "controller/model/event_types.h"

namespace kiln::api {
namespace {

// The provision states a node may be deleted in: nothing is running on it and
// no tenant can be holding it.
constexpr ProvisionState kDeletableStates[] = {
    ProvisionState::kEnroll, ProvisionState::kManageable, ProvisionState::kAvailable,
    ProvisionState::kInspectFailed, ProvisionState::kCleanFailed};

// Adds the conductor's verdict on a BMC block to `errors`.
void check_bmc(const ApiContext& ctx, const BmcInfo& bmc, std::vector<FieldError>& errors) {
  Status s = ctx.deps.conductor.validate_bmc(bmc);
  if (s) return;
  if (s.error().fields.empty()) errors.push_back({"/bmc", s.error().message});
  for (const FieldError& f : s.error().fields) errors.push_back(f);
}

// A store kConflict without a field is a failed reservation condition.
Error busy_or(Error e) {
  if (e.code == Code::kConflict && e.fields.empty()) return Error(Code::kConflict, "node is busy");
  return e;
}

Result<std::set<std::string>> parse_fields(const Query& q, Role role) {
  std::set<std::string> out;
  std::optional<std::string> v = q.get("fields");
  if (!v) return out;
  const std::vector<std::string>& known = node_fields(role);
  std::size_t pos = 0;
  while (pos <= v->size()) {
    std::size_t comma = v->find(',', pos);
    std::string f = v->substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    if (f.empty() || std::find(known.begin(), known.end(), f) == known.end())
      return Error::invalid("fields", "unknown field '" + f + "'");
    out.insert(f);
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return out;
}

asio::awaitable<Result<http::Reply>> create_node(ApiContext& ctx, Call& call) {
  Result<nlohmann::json> body = parse_json_body(call.req, {"application/json"});
  if (!body) co_return body.error();
  // A virtual node without a bmc block is made from a profile on a
  // hypervisor (virtual_nodes.h); with one it is enrolled as given.
  if (body->is_object() && body->value("kind", nlohmann::json()) == "virtual" && !body->contains("bmc")) {
    nlohmann::json virtual_body = *body;  // named: no temporaries in co_await (GCC 12)
    co_return co_await create_virtual_node(ctx, call, virtual_body);
  }
  std::vector<FieldError> errors;
  NodeDraft draft = parse_node_create(*body, errors);
  if (errors.empty()) check_bmc(ctx, draft.node.bmc, errors);
  if (!errors.empty()) co_return invalid_fields(std::move(errors));

  int64_t now = ctx.deps.clock.now_ms();
  Node node = std::move(draft.node);
  node.id = new_uuid();
  node.created_at = now;
  node.updated_at = now;
  node.version = 1;
  if (draft.password.plaintext) node.bmc.password_sealed = ctx.deps.secrets.seal(*draft.password.plaintext);
  for (const PortDraft& p : draft.ports)
    node.ports.push_back(Port{new_uuid(), node.id, p.address, p.pxe, now});
  EventDraft event = event_draft(call, event_type::kNodeCreated, node);
  event.to_state = std::string(to_string(node.provision_state));

  Result<Node> created =
      co_await ctx.deps.db.run([&] { return ctx.deps.store.create_node(node, event); });
  if (!created) co_return created.error();
  call.node_id = created->id;
  call.log.info("node enrolled", {{"node", created->id}, {"driver", created->bmc.driver}});
  co_return node_reply(call, bhttp::status::created, *created, /*location=*/true);
}

Error no_such_marker() { return Error::invalid("marker", "no such node"); }

asio::awaitable<Result<http::Reply>> list_nodes(ApiContext& ctx, Call& call) {
  const Query& q = call.query;
  Result<int> limit = q.limit();
  if (!limit) co_return limit.error();
  ListOptions opts;
  opts.limit = *limit + 1;  // one more tells whether there is a next page
  opts.marker = q.get("marker").value_or("");
  if (auto sort = q.get("sort")) {
    std::string key = *sort;
    if (!key.empty() && key.front() == '-') {
      opts.descending = true;
      key.erase(0, 1);
    }
    if (key != "created_at" && key != "updated_at" && key != "name" && key != "provision_state" &&
        key != "id")
      co_return Error::invalid("sort", "must be one of created_at, updated_at, name, "
                                       "provision_state, id (prefix - for descending)");
    opts.sort_key = key;
  }
  NodeFilter filter;
  if (auto v = q.get("provision_state")) {
    filter.provision_state = parse_provision_state(*v);
    if (!filter.provision_state) co_return Error::invalid("provision_state", "unknown provision state");
  }
  if (auto v = q.get("kind")) {
    filter.kind = parse_node_kind(*v);
    if (!filter.kind) co_return Error::invalid("kind", "must be one of baremetal, virtual");
  }
  if (auto v = q.get("profile")) filter.profile = *v;
  if (auto v = q.get("maintenance")) {
    if (*v != "true" && *v != "false") co_return Error::invalid("maintenance", "must be true or false");
    filter.maintenance = *v == "true";
  }
  if (auto v = q.get("tenant")) filter.tenant = *v;
  if (auto v = q.get("allocation")) filter.allocation = *v;
  Result<std::set<std::string>> fields = parse_fields(q, call.principal.role);
  if (!fields) co_return fields.error();

  Role role = call.principal.role;
  bool empty_result = false;
  if (role == Role::kTenant) {
    // A tenant lists its own nodes only, whatever it asks for.
    if (filter.tenant && *filter.tenant != call.principal.tenant) empty_result = true;
    filter.tenant = call.principal.tenant;
  }
  // A marker names a node; a tenant must get the same answer for another
  // tenant's node as for one that does not exist, or paging would tell it
  // which ids exist.
  if (role == Role::kTenant && !opts.marker.empty()) {
    std::string marker = opts.marker;
    std::transform(marker.begin(), marker.end(), marker.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    Result<Node> at = co_await ctx.deps.db.run([&] { return ctx.deps.store.get_node(marker); });
    if (!at && at.error().code != Code::kNotFound) co_return at.error();
    if (!at || at->tenant != call.principal.tenant) co_return no_such_marker();
  }
  std::vector<Node> nodes;
  if (!empty_result) {
    Result<std::vector<Node>> listed =
        co_await ctx.deps.db.run([&] { return ctx.deps.store.list_nodes(filter, opts); });
    if (!listed) {
      const Error& e = listed.error();
      if (e.code == Code::kNotFound || (e.code == Code::kInvalidArgument && !e.fields.empty() &&
                                        e.fields.front().field == "marker"))
        co_return no_such_marker();
      co_return listed.error();
    }
    nodes = std::move(*listed);
  }
  bool more = nodes.size() > static_cast<std::size_t>(*limit);
  if (more) nodes.resize(*limit);
  // Written straight into the body: see node_writer.h for why.
  std::string body;
  body.reserve(64 + nodes.size() * 900);
  body.append("{\"nodes\":[");
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    if (i > 0) body.push_back(',');
    append_node_json(body, nodes[i], role, NodeDetail::kList, *fields, call.ring.get());
  }
  body.append("],\"next\":");
  if (more) {
    auto params = q.all();
    params["marker"] = nodes.back().id;
    append_json_string(body, absolute_url(call.req, call.info, "/v1/nodes", params));
  } else {
    body.append("null");
  }
  body.push_back('}');
  co_return raw_json_reply(call.req, bhttp::status::ok, std::move(body));
}

asio::awaitable<Result<http::Reply>> get_node(ApiContext& ctx, Call& call) {
  Result<std::set<std::string>> fields = parse_fields(call.query, call.principal.role);
  if (!fields) co_return fields.error();
  Result<Node> node = co_await load_visible_node(ctx, call, call.param("id"));
  if (!node) co_return node.error();
  http::Reply reply = node_reply(call, bhttp::status::ok, *node);
  if (!fields->empty())
    reply.response.body() = dump_json(select_fields(node_json(*node, call.principal.role, NodeDetail::kFull, call.ring.get()), *fields));
  reply.response.prepare_payload();
  co_return reply;
}

asio::awaitable<Result<http::Reply>> patch_node(ApiContext& ctx, Call& call) {
  Result<std::optional<int64_t>> if_match = parse_if_match(call.req);
  if (!if_match) co_return if_match.error();
  Result<nlohmann::json> patch =
      parse_json_body(call.req, {"application/merge-patch+json", "application/json"});
  if (!patch) co_return patch.error();
  PasswordChange password;
  std::vector<FieldError> errors = check_patch(*patch, password);
  if (!errors.empty()) co_return invalid_fields(std::move(errors));

  Result<Node> existing = co_await load_visible_node(ctx, call, call.param("id"));
  if (!existing) co_return existing.error();
  if (!existing->reservation.empty()) co_return Error(Code::kConflict, "node is busy");

  std::string sealed;
  if (password.plaintext) sealed = ctx.deps.secrets.seal(*password.plaintext);
  NodeCondition cond;
  cond.version = *if_match;
  cond.reservation = "";
  EventDraft event = event_draft(call, event_type::kNodeUpdated, *existing);
  nlohmann::json changed = nlohmann::json::array();
  for (auto it = patch->begin(); it != patch->end(); ++it) changed.push_back(it.key());
  event.detail["fields"] = std::move(changed);  // names only: values may be secret

  const ApiContext& cctx = ctx;
  auto mutate = [&](Node& n) -> Status {
    nlohmann::json doc = mutable_document(n);
    apply_merge_patch(doc, *patch);
    std::vector<FieldError> errs;
    apply_mutable_document(doc, n, errs);
    if (errs.empty()) check_bmc(cctx, n.bmc, errs);
    if (!errs.empty()) return invalid_fields(std::move(errs));
    if (password.clear) n.bmc.password_sealed.clear();
    if (password.plaintext) n.bmc.password_sealed = sealed;
    return ok_status();
  };
  Result<Node> updated = co_await ctx.deps.db.run([&] {
    return ctx.deps.store.update_node_if(existing->id, cond, mutate, {event});
  });
  if (!updated) co_return busy_or(updated.take_error());
  co_return node_reply(call, bhttp::status::ok, *updated);
}

asio::awaitable<Result<http::Reply>> delete_node(ApiContext& ctx, Call& call) {
  Result<std::optional<int64_t>> if_match = parse_if_match(call.req);
  if (!if_match) co_return if_match.error();
  Result<Node> existing = co_await load_visible_node(ctx, call, call.param("id"));
  if (!existing) co_return existing.error();
  if (Status deletable = check_deletable(*existing); !deletable) co_return deletable.error();

  // Pin the version we checked, so a concurrent state change cannot slip in.
  NodeCondition cond;
  cond.version = if_match->value_or(existing->version);
  cond.reservation = "";
  EventDraft event = event_draft(call, event_type::kNodeDeleted, *existing);
  event.from_state = std::string(to_string(existing->provision_state));
  Status s = co_await ctx.deps.db.run(
      [&] { return ctx.deps.store.delete_node_if(existing->id, cond, event); });
  if (!s) {
    if (s.error().code == Code::kPreconditionFailed && !*if_match)
      co_return Error(Code::kConflict, "node changed while being deleted; retry");
    co_return busy_or(s.take_error());
  }
  co_return empty_reply(call.req);
}

}  // namespace

Status check_deletable(const Node& node) {
  bool deletable = false;
  for (ProvisionState s : kDeletableStates) deletable = deletable || s == node.provision_state;
  if (!deletable)
    return Error(Code::kConflict, "cannot delete a node in state " + std::string(to_string(node.provision_state)) +
                                      " (allowed: enroll, manageable, available, inspect_failed, clean_failed)");
  if (!node.tenant.empty()) return Error(Code::kConflict, "cannot delete a node held by tenant " + node.tenant);
  if (!node.reservation.empty()) return Error(Code::kConflict, "node is busy");
  return ok_status();
}

void add_node_routes(RouteTable& t, ApiContext& ctx) {
  using V = bhttp::verb;
  t.add({V::post, "/v1/nodes", Access::kStaff, {},
         [&ctx](Call& c) { return create_node(ctx, c); }});
  t.add({V::get, "/v1/nodes", Access::kAnyRole,
         {"limit", "marker", "sort", "provision_state", "kind", "profile", "maintenance", "tenant", "allocation",
          "fields"},
         [&ctx](Call& c) { return list_nodes(ctx, c); }},
        Needs::kNothing, Caching::kUntilWrite);
  t.add({V::get, "/v1/nodes/{id}", Access::kAnyRole, {"fields"},
         [&ctx](Call& c) { return get_node(ctx, c); }},
        Needs::kNothing, Caching::kUntilWrite);
  t.add({V::patch, "/v1/nodes/{id}", Access::kStaff, {},
         [&ctx](Call& c) { return patch_node(ctx, c); }});
  t.add({V::delete_, "/v1/nodes/{id}", Access::kStaff, {},
         [&ctx](Call& c) { return delete_node(ctx, c); }});
}

}  // namespace kiln::api
