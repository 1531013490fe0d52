// /v1/tenants: who nodes are handed to, and how many of each profile and kind
// each may hold (controller/model/tenant.h). Admins write; staff read every
// tenant; a tenant token reads its own tenant only, and any other name is a
// 404 exactly like a missing one. The view shows, per quota, what is in use.
//
// PATCH is a JSON Merge Patch (display_name, the whole quotas list); ETag =
// "<version>", If-Match honoured, and without it the write is still
// conditional on the version read (412 on a race, never a lost update).
// DELETE is refused (409) while the tenant holds nodes, and takes the
// tenant's API tokens with it.

#include <set>

#include "controller/api/json_input.h"
#include "controller/api/reply.h"
#include "controller/api/route_table.h"
#include "controller/api/tenant_input.h"

namespace kiln::api {
namespace {

using nlohmann::json;

// Each quota with its use, then anything held without a quota (a node an
// operator assigned by hand) as max_nodes 0, so the view is complete.
// Built outside coroutines (docs/coroutines.md rule 6).
json tenant_json(const Tenant& t, const TenantUsage& usage) {
  json quotas = json::array();
  std::set<std::pair<std::string, NodeKind>> shown;
  for (const TenantQuota& q : t.quotas) {
    auto it = usage.find({q.profile, q.kind});
    quotas.push_back({{"profile", q.profile},
                      {"kind", to_string(q.kind)},
                      {"max_nodes", q.max_nodes},
                      {"in_use", it == usage.end() ? 0 : it->second}});
    shown.insert({q.profile, q.kind});
  }
  for (const auto& [key, n] : usage)
    if (!shown.count(key))
      quotas.push_back({{"profile", key.first}, {"kind", to_string(key.second)}, {"max_nodes", 0}, {"in_use", n}});
  return {{"name", t.name},           {"display_name", t.display_name}, {"quotas", std::move(quotas)},
          {"created_at", t.created_at}, {"updated_at", t.updated_at},   {"version", t.version}};
}

http::Reply tenant_reply(const Call& call, bhttp::status status, const Tenant& t, const TenantUsage& usage) {
  http::Reply r = json_reply(call.req, status, tenant_json(t, usage));
  r.response.set(bhttp::field::etag, "\"" + std::to_string(t.version) + "\"");
  if (status == bhttp::status::created) r.response.set(bhttp::field::location, "/v1/tenants/" + t.name);
  return r;
}

Error no_such_tenant(const std::string& name) { return Error(Code::kNotFound, "no such tenant: " + name); }

// Every quota names an existing profile: a quota for a typo would silently
// grant nothing. kInvalidArgument naming /quotas/N/profile.
Status check_quota_profiles(NodeStore& store, const Tenant& t) {
  std::vector<FieldError> errors;
  for (std::size_t i = 0; i < t.quotas.size(); ++i) {
    Result<Profile> p = store.get_profile(t.quotas[i].profile);
    if (!p && p.error().code == Code::kNotFound)
      errors.push_back({"/quotas/" + std::to_string(i) + "/profile", "no such profile: " + t.quotas[i].profile});
    else if (!p)
      return p.take_error();
  }
  if (!errors.empty()) return invalid_fields(std::move(errors));
  return ok_status();
}

// The tenant and its use, read for `call`'s principal: a tenant asking for
// any other tenant gets not_found, as if it did not exist.
struct TenantView {
  Tenant tenant;
  TenantUsage usage;
};

Result<TenantView> read_tenant(NodeStore& store, const Principal& who, const std::string& name) {
  if (!who.is_staff() && who.tenant != name) return no_such_tenant(name);
  Result<Tenant> t = store.get_tenant(name);
  if (!t && t.error().code == Code::kNotFound) return no_such_tenant(name);
  if (!t) return t.take_error();
  Result<TenantUsage> u = store.tenant_usage(name);
  if (!u) return u.take_error();
  return TenantView{std::move(*t), std::move(*u)};
}

asio::awaitable<Result<http::Reply>> create_tenant(ApiContext& ctx, Call& call) {
  Result<json> body = parse_json_body(call.req, {"application/json"});
  if (!body) co_return body.error();
  Result<Tenant> in = parse_tenant_create(*body);
  if (!in) co_return in.error();
  Result<Tenant> created = co_await ctx.deps.db.run([&]() -> Result<Tenant> {
    if (Status ok = check_quota_profiles(ctx.deps.store, *in); !ok) return ok.take_error();
    return ctx.deps.store.create_tenant(*in);
  });
  if (!created) co_return created.error();
  call.log.info("tenant created", {{"tenant", created->name}, {"quotas", std::to_string(created->quotas.size())}});
  co_return tenant_reply(call, bhttp::status::created, *created, TenantUsage{});
}

asio::awaitable<Result<http::Reply>> list_tenants(ApiContext& ctx, Call& call) {
  Result<json> body = co_await ctx.deps.db.run([&]() -> Result<json> {
    json items = json::array();
    if (!call.principal.is_staff()) {
      Result<TenantView> own = read_tenant(ctx.deps.store, call.principal, call.principal.tenant);
      if (own) items.push_back(tenant_json(own->tenant, own->usage));
      else if (own.error().code != Code::kNotFound) return own.take_error();
    } else {
      Result<std::vector<Tenant>> all = ctx.deps.store.list_tenants();
      if (!all) return all.take_error();
      // One grouped query for every tenant's use, not one per tenant.
      Result<std::map<std::string, TenantUsage>> usage = ctx.deps.store.usage_by_tenant();
      if (!usage) return usage.take_error();
      for (const Tenant& t : *all) {
        auto u = usage->find(t.name);
        items.push_back(tenant_json(t, u == usage->end() ? TenantUsage{} : u->second));
      }
    }
    return json{{"tenants", std::move(items)}, {"next", nullptr}};
  });
  if (!body) co_return body.error();
  co_return json_reply(call.req, bhttp::status::ok, *body);
}

asio::awaitable<Result<http::Reply>> get_tenant(ApiContext& ctx, Call& call) {
  const std::string name = call.param("name");
  Result<TenantView> v = co_await ctx.deps.db.run([&] { return read_tenant(ctx.deps.store, call.principal, name); });
  if (!v) co_return v.error();
  co_return tenant_reply(call, bhttp::status::ok, v->tenant, v->usage);
}

asio::awaitable<Result<http::Reply>> patch_tenant(ApiContext& ctx, Call& call) {
  const std::string name = call.param("name");
  Result<std::optional<int64_t>> if_match = parse_if_match(call.req);
  if (!if_match) co_return if_match.error();
  Result<json> body = parse_json_body(call.req, {"application/merge-patch+json", "application/json"});
  if (!body) co_return body.error();
  Result<TenantView> saved = co_await ctx.deps.db.run([&]() -> Result<TenantView> {
    Result<TenantView> cur = read_tenant(ctx.deps.store, call.principal, name);
    if (!cur) return cur;
    Result<Tenant> next = apply_tenant_patch(cur->tenant, *body);
    if (!next) return next.take_error();
    if (Status ok = check_quota_profiles(ctx.deps.store, *next); !ok) return ok.take_error();
    const int64_t expected = if_match->value_or(cur->tenant.version);
    Result<Tenant> t = ctx.deps.store.replace_tenant(*next, expected);
    if (!t) return t.take_error();
    return TenantView{std::move(*t), std::move(cur->usage)};
  });
  if (!saved) co_return saved.error();
  call.log.info("tenant updated", {{"tenant", name}, {"version", std::to_string(saved->tenant.version)}});
  co_return tenant_reply(call, bhttp::status::ok, saved->tenant, saved->usage);
}

asio::awaitable<Result<http::Reply>> delete_tenant(ApiContext& ctx, Call& call) {
  const std::string name = call.param("name");
  Status s = co_await ctx.deps.db.run([&] { return ctx.deps.store.delete_tenant(name); });
  if (!s && s.error().code == Code::kNotFound) co_return no_such_tenant(name);
  if (!s) co_return s.error();
  call.log.info("tenant deleted", {{"tenant", name}});
  co_return empty_reply(call.req);
}

}  // namespace

void add_tenant_routes(RouteTable& t, ApiContext& ctx) {
  using V = bhttp::verb;
  t.add({V::post, "/v1/tenants", Access::kAdmin, {}, [&ctx](Call& c) { return create_tenant(ctx, c); }});
  t.add({V::get, "/v1/tenants", Access::kAnyRole, {}, [&ctx](Call& c) { return list_tenants(ctx, c); }});
  t.add({V::get, "/v1/tenants/{name}", Access::kAnyRole, {}, [&ctx](Call& c) { return get_tenant(ctx, c); }});
  t.add({V::patch, "/v1/tenants/{name}", Access::kAdmin, {}, [&ctx](Call& c) { return patch_tenant(ctx, c); }});
  t.add({V::delete_, "/v1/tenants/{name}", Access::kAdmin, {},
         [&ctx](Call& c) { return delete_tenant(ctx, c); }});
}

}  // namespace kiln::api
