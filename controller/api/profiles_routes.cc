// /v1/profiles: the hardware profiles validation checks against and tenants
// ask for (schemas/profile.schema.json). Staff write; every role reads
// (thresholds and prices are what a tenant is promised, not secrets).
//
// PATCH is a JSON Merge Patch of the whole document; the result is checked as
// a whole, so a patch cannot leave a profile the agent would refuse. The name
// is the key and cannot change. ETag = "<version>", If-Match honoured.

#include "controller/api/json_input.h"
#include "controller/api/merge_patch.h"
#include "controller/api/profile_input.h"
#include "controller/api/reply.h"
#include "controller/api/validation_routes.h"

namespace kiln::api {
namespace {

using nlohmann::json;

// JSON built outside coroutine bodies (docs/coroutines.md rule 6).
json profiles_json(const std::vector<Profile>& profiles) {
  json items = json::array();
  for (const Profile& p : profiles) items.push_back(profile_json(p));
  return {{"profiles", std::move(items)}, {"next", nullptr}};
}

http::Reply profile_reply(const Call& call, bhttp::status status, const Profile& p) {
  http::Reply r = json_reply(call.req, status, profile_json(p));
  r.response.set(bhttp::field::etag, "\"" + std::to_string(p.version) + "\"");
  if (status == bhttp::status::created) r.response.set(bhttp::field::location, "/v1/profiles/" + p.name);
  return r;
}

// The document to store: the body without server fields.
json stored_doc(json doc) {
  for (const char* k : {"created_at", "updated_at", "version"}) doc.erase(k);
  return doc;
}

Error no_such_profile(const std::string& name) { return Error(Code::kNotFound, "no such profile: " + name); }

asio::awaitable<Result<http::Reply>> create_profile(ApiContext& ctx, Call& call) {
  Result<json> body = parse_json_body(call.req, {"application/json"});
  if (!body) co_return body.error();
  if (Status ok = check_profile_doc(*body); !ok) co_return ok.error();
  Profile p;
  p.name = (*body)["name"].get<std::string>();
  p.doc = *body;
  Result<Profile> created = co_await ctx.deps.db.run([&] { return ctx.deps.store.create_profile(p); });
  if (!created) co_return created.error();
  call.log.info("profile created", {{"profile", created->name}});
  co_return profile_reply(call, bhttp::status::created, *created);
}

asio::awaitable<Result<http::Reply>> list_profiles(ApiContext& ctx, Call& call) {
  Result<std::vector<Profile>> all = co_await ctx.deps.db.run([&] { return ctx.deps.store.list_profiles(); });
  if (!all) co_return all.error();
  co_return json_reply(call.req, bhttp::status::ok, profiles_json(*all));
}

asio::awaitable<Result<Profile>> load_profile(ApiContext& ctx, const std::string& name) {
  Result<Profile> p = co_await ctx.deps.db.run([&] { return ctx.deps.store.get_profile(name); });
  if (!p && p.error().code == Code::kNotFound) co_return no_such_profile(name);
  co_return p;
}

asio::awaitable<Result<http::Reply>> get_profile(ApiContext& ctx, Call& call) {
  const std::string name = call.param("name");
  Result<Profile> p = co_await load_profile(ctx, name);
  if (!p) co_return p.error();
  co_return profile_reply(call, bhttp::status::ok, *p);
}

// The patched document, checked; kInvalidArgument naming the field.
Result<json> patched_doc(const Profile& cur, const json& patch) {
  if (!patch.is_object()) return invalid_fields({{"", "must be a JSON object (a JSON Merge Patch)"}});
  if (patch.contains("name") && patch["name"] != cur.name)
    return invalid_fields({{"/name", "cannot be changed (create a new profile and move the nodes)"}});
  json doc = cur.doc;
  apply_merge_patch(doc, stored_doc(patch));
  doc["name"] = cur.name;
  if (Status ok = check_profile_doc(doc); !ok) return ok.take_error();
  return doc;
}

asio::awaitable<Result<http::Reply>> patch_profile(ApiContext& ctx, Call& call) {
  const std::string name = call.param("name");
  Result<std::optional<int64_t>> if_match = parse_if_match(call.req);
  if (!if_match) co_return if_match.error();
  Result<json> body = parse_json_body(call.req, {"application/merge-patch+json", "application/json"});
  if (!body) co_return body.error();
  Result<Profile> cur = co_await load_profile(ctx, name);
  if (!cur) co_return cur.error();
  Result<json> doc = patched_doc(*cur, *body);
  if (!doc) co_return doc.error();
  Profile next = *cur;
  next.doc = std::move(*doc);
  // Without If-Match the write is still conditional on the version read, so
  // a concurrent PATCH is not silently lost (412: read and try again).
  std::optional<int64_t> expected = if_match->has_value() ? *if_match : std::optional<int64_t>(cur->version);
  Result<Profile> saved = co_await ctx.deps.db.run([&] { return ctx.deps.store.replace_profile(next, expected); });
  if (!saved) co_return saved.error();
  call.log.info("profile updated", {{"profile", saved->name}, {"version", std::to_string(saved->version)}});
  co_return profile_reply(call, bhttp::status::ok, *saved);
}

asio::awaitable<Result<http::Reply>> delete_profile(ApiContext& ctx, Call& call) {
  const std::string name = call.param("name");
  Status s = co_await ctx.deps.db.run([&] { return ctx.deps.store.delete_profile(name); });
  if (!s && s.error().code == Code::kNotFound) co_return no_such_profile(name);
  if (!s) co_return s.error();
  call.log.info("profile deleted", {{"profile", name}});
  co_return empty_reply(call.req);
}

}  // namespace

void add_profile_routes(RouteTable& t, ApiContext& ctx) {
  using V = bhttp::verb;
  t.add({V::post, "/v1/profiles", Access::kStaff, {}, [&ctx](Call& c) { return create_profile(ctx, c); }});
  t.add({V::get, "/v1/profiles", Access::kAnyRole, {}, [&ctx](Call& c) { return list_profiles(ctx, c); }});
  t.add({V::get, "/v1/profiles/{name}", Access::kAnyRole, {}, [&ctx](Call& c) { return get_profile(ctx, c); }});
  t.add({V::patch, "/v1/profiles/{name}", Access::kStaff, {}, [&ctx](Call& c) { return patch_profile(ctx, c); }});
  t.add({V::delete_, "/v1/profiles/{name}", Access::kStaff, {},
         [&ctx](Call& c) { return delete_profile(ctx, c); }});
}

}  // namespace kiln::api
