// /v1/allocations and /v1/usage: a tenant asks for N proven nodes of one
// profile and kind, watches them, extends the lease, releases them, and reads
// what they cost (docs/tenancy.md; the engine that drives them is
// controller/tenancy/allocation_engine.h).
//
// Visibility: a tenant token sees and touches only its own tenant's
// allocations and usage; any other is a 404 exactly like a missing one. Staff
// see every tenant's and create allocations for a tenant they name.
//
// POST reserves the nodes in one store transaction (all or nothing) and
// answers 202 with the allocation in `pending`; the engine deploys from there.
// DELETE answers 202 with it in `releasing`. Both are idempotent where it
// makes sense: releasing a releasing or released allocation answers it as is.

#include <algorithm>
#include <span>
#include <string_view>
#include <unordered_map>

#include "controller/api/allocation_input.h"
#include "controller/api/json_input.h"
#include "controller/api/node_view.h"
#include "controller/api/reply.h"
#include "controller/api/route_table.h"
#include "controller/api/conditional_get.h"
#include "controller/hosts/virtual_maker.h"
#include "controller/model/allocation_states.h"
#include "common/ids.h"
#include "controller/tenancy/allocation_engine.h"
#include "controller/tenancy/usage.h"
#include "controller/model/event_types.h"
#include "controller/model/image_use.h"
#include "controller/tenancy/new_allocation.h"

namespace kiln::api {
namespace {

using nlohmann::json;

Error no_such_allocation(const std::string& ref) { return Error(Code::kNotFound, "no such allocation: " + ref); }

json time_or_null(int64_t ms) { return ms > 0 ? json(format_rfc3339(ms)) : json(nullptr); }

// A member's node as the allocation shows it: what a tenant needs to watch
// and use it. A former member shows only that it served and why it left: the
// node may belong to another tenant now. Built outside coroutines
// (docs/coroutines.md rule 6).
json member_node_json(const AllocationMember& m, const Node* n) {
  json j = {{"id", m.node_id}, {"member", std::string(to_string(m.status))}};
  if (!m.reason.empty()) j["reason"] = m.reason;
  j["joined_at"] = time_or_null(m.joined_at);
  j["left_at"] = time_or_null(m.left_at);
  if (n == nullptr || m.status == MemberStatus::kLeft) return j;
  j["name"] = n->name.empty() ? json(nullptr) : json(n->name);
  j["state"] = std::string(to_string(n->provision_state));
  j["step"] = n->provision_step.empty() ? json(nullptr) : json(n->provision_step);
  j["addresses"] = n->addresses;
  j["address_source"] = n->address_source == AddressSource::kNone ? json(nullptr) : json(to_string(n->address_source));
  j["ssh"] = n->ssh.empty() ? json(nullptr) : json(n->ssh);
  j["ssh_host_keys"] = ssh_host_keys_json(n->ssh_host_keys);
  j["last_validation"] = n->last_validation.empty() ? json(nullptr) : json(n->last_validation);
  return j;
}

// Nodes by id, for rendering allocations whose member nodes were read
// together. Points into `nodes`, which must outlive it.
using NodesById = std::unordered_map<std::string_view, const Node*>;

NodesById by_id(const std::vector<Node>& nodes) {
  NodesById out;
  out.reserve(nodes.size());
  for (const Node& n : nodes) out.emplace(n.id, &n);
  return out;
}

json allocation_json(const Allocation& a, const NodesById& nodes) {
  json history = json::array();
  for (const AllocationHistoryEntry& h : a.history) {
    json e = {{"at", format_rfc3339(h.at)}, {"from", h.from.empty() ? json(nullptr) : json(h.from)}, {"to", h.to}};
    if (!h.reason.empty()) e["reason"] = h.reason;
    history.push_back(std::move(e));
  }
  json current = json::array();
  json former = json::array();
  for (const AllocationMember& m : a.members) {
    auto it = nodes.find(m.node_id);
    const Node* n = it == nodes.end() ? nullptr : it->second;
    (m.status == MemberStatus::kLeft ? former : current).push_back(member_node_json(m, n));
  }
  return {{"id", a.id},
          {"name", a.name},
          {"tenant", a.tenant},
          {"profile", a.profile},
          {"kind", to_string(a.kind)},
          {"count", a.count},
          {"image", a.image},
          {"ssh_keys", a.ssh_keys},
          {"user_data_set", !a.user_data.empty()},
          {"traits", a.traits},
          {"state", std::string(to_string(a.state))},
          {"last_error", a.last_error.empty() ? json(nullptr) : json(a.last_error)},
          {"lease_seconds", a.lease_seconds > 0 ? json(a.lease_seconds) : json(nullptr)},
          {"expires_at", time_or_null(a.expires_at)},
          {"replacements", a.replacements},
          {"ready_at", time_or_null(a.ready_at)},
          {"nodes", std::move(current)},
          {"former_nodes", std::move(former)},
          {"history", std::move(history)},
          {"created_at", format_rfc3339(a.created_at)},
          {"updated_at", format_rfc3339(a.updated_at)},
          {"version", a.version}};
}

// The allocation with its current members' nodes, read together on the pool
// (after a write that returned the allocation; a poller's GET reads both in
// one snapshot: get_allocation_with_nodes).
Result<json> render(NodeStore& store, const Allocation& a) {
  Result<std::vector<Node>> nodes = store.member_nodes(std::span<const Allocation>(&a, 1));
  if (!nodes) return nodes.take_error();
  return allocation_json(a, by_id(*nodes));
}

http::Reply allocation_reply(const Call& call, bhttp::status status, const Allocation& a, const json& body) {
  http::Reply r = json_reply(call.req, status, body);
  // Its members' nodes change without the allocation's version: the ETag
  // names the whole answer (conditional_get.h).
  r.response.set(bhttp::field::etag, body_etag(r.response.body()));
  if (status == bhttp::status::accepted && a.state == AllocationState::kPending)
    r.response.set(bhttp::field::location, "/v1/allocations/" + a.id);
  return r;
}

// The allocation `ref` (id, or name within the caller's tenant) as the
// caller may see it: another tenant's is not_found, as a missing one is.
std::string scope_of(const Principal& who) { return who.is_staff() ? std::string() : who.tenant; }

Error read_error(Error e, const std::string& ref) { return e.code == Code::kNotFound ? no_such_allocation(ref) : e; }

Status check_visible(const Principal& who, const Allocation& a, const std::string& ref) {
  if (!who.sees_tenant(a.tenant) || a.tenant.empty()) return no_such_allocation(ref);
  return ok_status();
}

Result<Allocation> read_visible(NodeStore& store, const Principal& who, const std::string& ref) {
  Result<Allocation> a = store.get_allocation(ref, scope_of(who));
  if (!a) return read_error(a.take_error(), ref);
  if (Status s = check_visible(who, *a, ref); !s) return s.take_error();
  return a;
}

// read_visible and its members' nodes, in one read.
Result<AllocationWithNodes> read_visible_with_nodes(NodeStore& store, const Principal& who, const std::string& ref) {
  Result<AllocationWithNodes> v = store.get_allocation_with_nodes(ref, scope_of(who));
  if (!v) return read_error(v.take_error(), ref);
  if (Status s = check_visible(who, v->allocation, ref); !s) return s.take_error();
  return v;
}

// The tenant a list or the ledger is read for: a tenant token reads its own
// (naming another in ?tenant= is the same 404 as a missing tenant); staff
// read the one they name, or all.
Result<std::optional<std::string>> tenant_scope(const Call& call) {
  std::optional<std::string> asked = call.query.get("tenant");
  if (call.principal.is_staff()) return asked;
  if (asked && *asked != call.principal.tenant) return Error(Code::kNotFound, "no such tenant: " + *asked);
  return std::optional<std::string>(call.principal.tenant);
}

// The store-side checks of a request: the tenant exists, the profile exists,
// the image may be deployed by this caller. 400 naming the field.
Status check_references(NodeStore& store, const Principal& who, Allocation& a) {
  std::vector<FieldError> errors;
  Result<Tenant> t = store.get_tenant(a.tenant);
  if (!t && t.error().code == Code::kNotFound) errors.push_back({"/tenant", "no such tenant: " + a.tenant});
  else if (!t) return t.take_error();
  Result<Profile> p = store.get_profile(a.profile);
  if (!p && p.error().code == Code::kNotFound) errors.push_back({"/profile", "no such profile: " + a.profile});
  else if (!p) return p.take_error();
  Result<Image> img = store.get_image(a.image);
  if (!img && img.error().code != Code::kNotFound) return img.take_error();
  if (std::optional<std::string> refused = image_use_refusal(img ? &*img : nullptr, a.image, who.is_staff()))
    errors.push_back({"/image", std::move(*refused)});
  else
    a.image = img->id;
  if (!errors.empty()) return invalid_fields(std::move(errors));
  // Bad input first (400); an image that exists but is converting, failed,
  // downloading or awaiting its upload is a state conflict (409).
  if (Status deployable = image_deployable(*img); !deployable) return deployable;
  return ok_status();
}

asio::awaitable<Result<http::Reply>> create_allocation(ApiContext& ctx, Call& call) {
  Result<json> body = parse_json_body(call.req, {"application/json"});
  if (!body) co_return body.error();
  Result<AllocationRequest> in = parse_allocation_create(*body);
  if (!in) co_return in.error();
  const Principal& who = call.principal;
  std::string tenant = who.tenant;
  if (who.is_staff()) {
    if (!in->tenant) co_return Error::invalid("/tenant", "is required when a staff token asks for nodes");
    tenant = *in->tenant;
  } else if (in->tenant && *in->tenant != who.tenant) {
    co_return Error(Code::kPermissionDenied, "a tenant token allocates for its own tenant only",
                    {FieldError{"/tenant", "must be your own tenant or absent"}});
  }
  Allocation a = new_allocation(in->allocation, tenant, ctx.deps.clock.now_ms());
  EventDraft ev = allocation_created_event(
      a, AllocationAsker{who.name, std::string(to_string(who.role)), call.info.request_id});
  std::vector<EventDraft> events = {ev};
  Result<json> view = co_await ctx.deps.db.run([&]() -> Result<json> {
    if (Status ok = check_references(ctx.deps.store, who, a); !ok) return ok.take_error();
    Result<std::optional<VirtualNodeMaker>> vms = guest_maker(ctx.deps.store, a);
    if (!vms) return vms.take_error();
    Result<Allocation> made = ctx.deps.store.create_allocation(a, events, *vms ? &**vms : nullptr);
    if (!made) return made.take_error();
    a = *made;
    return render(ctx.deps.store, a);
  });
  if (!view) co_return view.error();
  ctx.deps.allocations->kick();
  call.log.info("allocation created", {{"allocation", a.id}, {"tenant", a.tenant}, {"profile", a.profile},
                                       {"kind", std::string(to_string(a.kind))}, {"count", std::to_string(a.count)}});
  co_return allocation_reply(call, bhttp::status::accepted, a, *view);
}

asio::awaitable<Result<http::Reply>> list_allocations(ApiContext& ctx, Call& call) {
  AllocationFilter filter;
  Result<std::optional<std::string>> scope = tenant_scope(call);
  if (!scope) co_return scope.error();
  filter.tenant = *scope;
  if (std::optional<std::string> state = call.query.get("state")) {
    std::optional<AllocationState> s = parse_allocation_state(*state);
    if (!s) co_return Error::invalid("state", "must be one of pending, provisioning, ready, failed, releasing, released");
    filter.state = *s;
  }
  Result<json> body = co_await ctx.deps.db.run([&]() -> Result<json> {
    Result<std::vector<Allocation>> all = ctx.deps.store.list_allocations(filter);
    if (!all) return all.take_error();
    Result<std::vector<Node>> nodes = ctx.deps.store.member_nodes(*all);
    if (!nodes) return nodes.take_error();
    const NodesById index = by_id(*nodes);
    json items = json::array();
    for (const Allocation& a : *all) items.push_back(allocation_json(a, index));
    return json{{"allocations", std::move(items)}, {"next", nullptr}};
  });
  if (!body) co_return body.error();
  co_return json_reply(call.req, bhttp::status::ok, *body);
}

asio::awaitable<Result<http::Reply>> get_allocation(ApiContext& ctx, Call& call) {
  const std::string ref = call.param("id");
  Allocation a;
  Result<json> view = co_await ctx.deps.db.run([&]() -> Result<json> {
    Result<AllocationWithNodes> r = read_visible_with_nodes(ctx.deps.store, call.principal, ref);
    if (!r) return r.take_error();
    a = r->allocation;
    return allocation_json(a, by_id(r->nodes));
  });
  if (!view) co_return view.error();
  co_return allocation_reply(call, bhttp::status::ok, a, *view);
}

asio::awaitable<Result<http::Reply>> release_allocation(ApiContext& ctx, Call& call) {
  const std::string ref = call.param("id");
  Result<Allocation> visible = co_await ctx.deps.db.run([&] { return read_visible(ctx.deps.store, call.principal, ref); });
  if (!visible) co_return visible.error();
  std::string reason = "released by " + (call.principal.name.empty() ? std::string(to_string(call.principal.role))
                                                                      : call.principal.name);
  std::string actor = call.principal.name;
  std::string request_id = call.info.request_id;
  std::string id = visible->id;
  Result<Allocation> r = co_await ctx.deps.allocations->release(id, reason, actor, request_id);
  if (!r) co_return r.error();
  Allocation a = *r;
  Result<json> view = co_await ctx.deps.db.run([&] { return render(ctx.deps.store, a); });
  if (!view) co_return view.error();
  call.log.info("allocation released", {{"allocation", a.id}, {"state", std::string(to_string(a.state))}});
  co_return allocation_reply(call, bhttp::status::accepted, a, *view);
}

asio::awaitable<Result<http::Reply>> renew_lease(ApiContext& ctx, Call& call) {
  const std::string ref = call.param("id");
  Result<json> body = parse_json_body(call.req, {"application/json"});
  if (!body) co_return body.error();
  Result<int64_t> lease = parse_lease(*body);
  if (!lease) co_return lease.error();
  const int64_t seconds = *lease;
  const int64_t now = ctx.deps.clock.now_ms();
  Allocation a;
  Result<json> view = co_await ctx.deps.db.run([&]() -> Result<json> {
    Result<Allocation> cur = read_visible(ctx.deps.store, call.principal, ref);
    if (!cur) return cur.take_error();
    EventDraft ev;
    ev.type = event_type::kAllocationLease;
    ev.tenant = cur->tenant;
    ev.request_id = call.info.request_id;
    ev.detail = {{"allocation", cur->id}, {"allocation_name", cur->name}, {"lease_seconds", seconds},
                 {"expires_at", format_rfc3339(now + seconds * 1000)}};
    std::vector<EventDraft> events = {ev};
    Result<Allocation> w = ctx.deps.store.update_allocation_if(cur->id, std::nullopt, [&](Allocation& x) -> Status {
      if (allocation_giving_back(x.state) || x.state == AllocationState::kReleased)
        return Error(Code::kConflict, "cannot renew the lease of a " + std::string(to_string(x.state)) + " allocation");
      x.lease_seconds = seconds;
      x.expires_at = now + seconds * 1000;
      return ok_status();
    }, events);
    if (!w) return w.take_error();
    a = *w;
    return render(ctx.deps.store, a);
  });
  if (!view) co_return view.error();
  co_return allocation_reply(call, bhttp::status::ok, a, *view);
}

asio::awaitable<Result<http::Reply>> get_usage(ApiContext& ctx, Call& call) {
  UsageFilter filter;
  const Principal& who = call.principal;
  Result<std::optional<std::string>> scope = tenant_scope(call);
  if (!scope) co_return scope.error();
  filter.tenant = *scope;
  static constexpr const char* kBounds[] = {"from", "to"};
  for (const char* key : kBounds) {
    std::optional<std::string> v = call.query.get(key);
    if (!v) continue;
    std::optional<int64_t> ms = parse_rfc3339(*v);
    if (!ms) co_return Error::invalid(key, "must be an RFC 3339 time such as 2026-11-26T10:00:00Z");
    (std::string_view(key) == "from" ? filter.from_ms : filter.to_ms) = *ms;
  }
  if (filter.to_ms > 0 && filter.to_ms <= filter.from_ms) co_return Error::invalid("to", "must be after from");
  std::optional<std::string> allocation = call.query.get("allocation");
  const int64_t now = ctx.deps.clock.now_ms();
  Result<json> body = co_await ctx.deps.db.run([&]() -> Result<json> {
    if (allocation) {
      Result<Allocation> a = read_visible(ctx.deps.store, who, *allocation);
      if (!a) return a.take_error();
      filter.allocation = a->id;
    }
    Result<std::vector<UsageRecord>> rows = ctx.deps.store.list_usage(filter);
    if (!rows) return rows.take_error();
    return usage_document(*rows, filter.from_ms, filter.to_ms, now);
  });
  if (!body) co_return body.error();
  co_return json_reply(call.req, bhttp::status::ok, *body);
}

}  // namespace

void add_allocation_routes(RouteTable& t, ApiContext& ctx) {
  using V = bhttp::verb;
  t.add({V::post, "/v1/allocations", Access::kAnyRole, {}, [&ctx](Call& c) { return create_allocation(ctx, c); }},
        Needs::kAllocations);
  t.add({V::get, "/v1/allocations", Access::kAnyRole, {"tenant", "state"},
         [&ctx](Call& c) { return list_allocations(ctx, c); }});
  t.add({V::get, "/v1/allocations/{id}", Access::kAnyRole, {}, [&ctx](Call& c) { return get_allocation(ctx, c); }},
        Needs::kNothing, Caching::kUntilWrite);
  t.add({V::delete_, "/v1/allocations/{id}", Access::kAnyRole, {},
         [&ctx](Call& c) { return release_allocation(ctx, c); }},
        Needs::kAllocations);
  t.add({V::put, "/v1/allocations/{id}/lease", Access::kAnyRole, {},
         [&ctx](Call& c) { return renew_lease(ctx, c); }});
  t.add({V::get, "/v1/usage", Access::kAnyRole, {"from", "to", "tenant", "allocation"},
         [&ctx](Call& c) { return get_usage(ctx, c); }});
}

}  // namespace kiln::api
