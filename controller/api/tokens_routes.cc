// /v1/tokens (admin only). The secret is generated here, returned once in the
// 201 body, and stored only as its SHA-256; nothing can show it again. A
// tenant token must name an existing tenant (/v1/tenants).
//
// GET /v1/whoami (any role) says who the caller's own token is: its id, name,
// role and tenant, never a secret. Clients (the portal, the CLI) decide what
// to show by role without probing routes for a 403.

#include "common/crypto.h"
#include "common/ids.h"
#include "controller/api/json_input.h"
#include "controller/api/node_view.h"
#include "controller/api/reply.h"
#include "controller/api/route_table.h"
#include "controller/api/token_input.h"

namespace kiln::api {
namespace {

asio::awaitable<Result<http::Reply>> create_token(ApiContext& ctx, Call& call) {
  Result<nlohmann::json> body = parse_json_body(call.req, {"application/json"});
  if (!body) co_return body.error();
  Result<TokenInput> in = parse_token_create(*body);
  if (!in) co_return in.error();

  std::string secret = new_token_secret();
  TokenRecord t;
  t.id = new_uuid();
  t.name = in->name;
  t.role = std::string(to_string(in->role));
  t.tenant = in->tenant;
  t.secret_hash = sha256_hex(secret);
  t.created_at = ctx.deps.clock.now_ms();
  // A tenant token names an existing tenant: one for a typo would see nothing
  // and, were that tenant created later, suddenly see its nodes.
  Result<TokenRecord> created = co_await ctx.deps.db.run([&]() -> Result<TokenRecord> {
    if (in->role == Role::kTenant) {
      Result<Tenant> tenant = ctx.deps.store.get_tenant(in->tenant);
      if (!tenant && tenant.error().code == Code::kNotFound)
        return Error::invalid("/tenant", "no such tenant: " + in->tenant + " (create it with POST /v1/tenants)");
      if (!tenant) return tenant.take_error();
    }
    return ctx.deps.store.create_token(t);
  });
  if (!created) co_return created.error();
  call.log.info("token created", {{"token", created->id}, {"role", created->role}});
  nlohmann::json out = token_json(*created);
  out["token"] = secret;  // shown once
  http::Reply reply = json_reply(call.req, bhttp::status::created, out);
  reply.response.set(bhttp::field::location, "/v1/tokens/" + created->id);
  co_return reply;
}

asio::awaitable<Result<http::Reply>> list_tokens(ApiContext& ctx, Call& call) {
  Result<std::vector<TokenRecord>> tokens = co_await ctx.deps.db.run([&] { return ctx.deps.store.list_tokens(); });
  if (!tokens) co_return tokens.error();
  nlohmann::json items = nlohmann::json::array();
  for (const TokenRecord& t : *tokens) items.push_back(token_json(t));
  co_return json_reply(call.req, bhttp::status::ok, {{"tokens", std::move(items)}, {"next", nullptr}});
}

asio::awaitable<Result<http::Reply>> delete_token(ApiContext& ctx, Call& call) {
  std::string id = call.param("id");
  Status s = co_await ctx.deps.db.run([&] { return ctx.deps.store.delete_token(id); });
  if (!s) {
    if (s.error().code == Code::kNotFound) co_return Error(Code::kNotFound, "no such token: " + id);
    co_return s.error();
  }
  call.log.info("token deleted", {{"token", id}});
  co_return empty_reply(call.req);
}

// Built outside the coroutine (docs/coroutines.md rule 6).
nlohmann::json whoami_json(const Principal& p) {
  return {{"token", p.token_id},
          {"name", p.name},
          {"role", std::string(to_string(p.role))},
          {"tenant", p.tenant.empty() ? nlohmann::json(nullptr) : nlohmann::json(p.tenant)}};
}

asio::awaitable<Result<http::Reply>> whoami(Call& call) {
  co_return json_reply(call.req, bhttp::status::ok, whoami_json(call.principal));
}

}  // namespace

void add_token_routes(RouteTable& t, ApiContext& ctx) {
  using V = bhttp::verb;
  t.add({V::post, "/v1/tokens", Access::kAdmin, {}, [&ctx](Call& c) { return create_token(ctx, c); }});
  t.add({V::get, "/v1/tokens", Access::kAdmin, {}, [&ctx](Call& c) { return list_tokens(ctx, c); }});
  t.add({V::delete_, "/v1/tokens/{id}", Access::kAdmin, {},
         [&ctx](Call& c) { return delete_token(ctx, c); }});
  t.add({V::get, "/v1/whoami", Access::kAnyRole, {}, [](Call& c) { return whoami(c); }});
}

}  // namespace kiln::api
