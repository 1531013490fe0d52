// GET /v1/audit (admin only): who did what. Records are written by Api::handle
// for every mutating request; this only pages through them.

#include <charconv>

#include "controller/api/node_view.h"
#include "controller/api/reply.h"
#include "controller/api/route_table.h"

namespace kiln::api {
namespace {

asio::awaitable<Result<http::Reply>> list_audit(ApiContext& ctx, Call& call) {
  Result<int> limit = call.query.limit();
  if (!limit) co_return limit.error();
  int64_t since = 0;
  if (auto v = call.query.get("since")) {
    auto [end, ec] = std::from_chars(v->data(), v->data() + v->size(), since);
    if (ec != std::errc() || end != v->data() + v->size() || since < 0)
      co_return Error::invalid("since", "must be a non-negative integer (an audit id)");
  }
  Result<std::vector<AuditRecord>> records =
      co_await ctx.deps.db.run([&] { return ctx.deps.store.list_audit(since, *limit + 1); });
  if (!records) co_return records.error();
  bool more = records->size() > static_cast<std::size_t>(*limit);
  if (more) records->resize(*limit);
  nlohmann::json items = nlohmann::json::array();
  for (const AuditRecord& a : *records) items.push_back(audit_json(a));
  nlohmann::json next = nullptr;
  if (more) {
    auto params = call.query.all();
    params["since"] = std::to_string(records->back().id);
    next = absolute_url(call.req, call.info, "/v1/audit", params);
  }
  co_return json_reply(call.req, bhttp::status::ok, {{"audit", std::move(items)}, {"next", next}});
}

}  // namespace

void add_audit_routes(RouteTable& t, ApiContext& ctx) {
  t.add({bhttp::verb::get, "/v1/audit", Access::kAdmin, {"since", "limit"},
         [&ctx](Call& c) { return list_audit(ctx, c); }});
}

}  // namespace kiln::api
