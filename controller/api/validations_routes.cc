// Stored validation reports (schemas/validation-report.schema.json) and
// on-demand runs.
//
// Who sees what: staff see every report; a tenant sees only the reports of a
// node it holds (the same rule as the node itself: another tenant's node, or
// a node in the pool, is 404) that were run in its own period — finished
// after the node joined its allocation. The rule is the store's
// (ValidationStore, validation_store.h): a report from an earlier tenant's
// period, or from the pool before the claim, is a 404 like a missing one and
// absent from the list, and a node's last_validation never points at one
// (the pre-hand-off gate run, which proved the node, is inside the period).
//
// POST /v1/nodes/{id}/validations {"plan": "quick" | "full"} asks the
// conductor to run the plan now (Conductor::validate_now: 202 and the node,
// whose last_validation changes when the report is stored; 409 with the reason
// when the node cannot run it now).

#include "controller/api/json_input.h"
#include "controller/api/reply.h"
#include "controller/api/validation_routes.h"

namespace kiln::api {
namespace {

using nlohmann::json;

json failing_checks(const json& report) {
  json out = json::array();
  if (!report.is_object() || !report.contains("checks") || !report["checks"].is_array()) return out;
  for (const json& c : report["checks"])
    if (c.is_object() && c.value("status", "") == "fail") out.push_back(c.value("name", "?"));
  return out;
}

json summary_of(const json& report) {
  if (report.is_object() && report.contains("summary") && report["summary"].is_object()) return report["summary"];
  int pass = 0, fail = 0, skip = 0;
  if (report.is_object() && report.contains("checks") && report["checks"].is_array()) {
    for (const json& c : report["checks"]) {
      std::string s = c.is_object() ? c.value("status", "") : "";
      if (s == "pass") ++pass;
      else if (s == "fail") ++fail;
      else ++skip;
    }
  }
  return {{"pass", pass}, {"fail", fail}, {"skip", skip}};
}

json validation_json(const ValidationRecord& v, bool with_report) {
  json j = {{"id", v.id},
            {"node", v.node_id},
            {"profile", v.profile.empty() ? json(nullptr) : json(v.profile)},
            {"kind", v.node_kind},
            {"plan", v.plan},
            {"phase", v.phase},
            {"result", v.result},
            {"attempt", v.attempt},
            {"started_at", format_rfc3339(v.started_at)},
            {"finished_at", format_rfc3339(v.finished_at)},
            {"summary", summary_of(v.report)},
            {"failing", failing_checks(v.report)}};
  if (with_report) j["report"] = v.report;
  return j;
}

json validations_page(const std::vector<ValidationRecord>& items, json next) {
  json list = json::array();
  for (const ValidationRecord& v : items) list.push_back(validation_json(v, false));
  return {{"validations", std::move(list)}, {"next", std::move(next)}};
}

asio::awaitable<Result<http::Reply>> list_node_validations(ApiContext& ctx, Call& call) {
  Result<int> limit = call.query.limit(50, 500);
  if (!limit) co_return limit.error();
  const std::string ref = call.param("id");
  Result<Node> node = co_await load_visible_node(ctx, call, ref);
  if (!node) co_return node.error();
  const std::string node_id = node->id;
  const std::string marker = call.query.get("marker").value_or("");
  const int want = *limit + 1;
  const std::string reader = call.principal.is_staff() ? std::string() : call.principal.tenant;
  Result<std::vector<ValidationRecord>> page =
      co_await ctx.deps.db.run([&] { return ctx.deps.store.list_validations(node_id, reader, want, marker); });
  if (!page) co_return page.error();
  bool more = page->size() > static_cast<std::size_t>(*limit);
  if (more) page->resize(*limit);
  json next = nullptr;
  if (more) {
    auto params = call.query.all();
    params["marker"] = page->back().id;
    next = absolute_url(call.req, call.info, "/v1/nodes/" + node_id + "/validations", params);
  }
  co_return json_reply(call.req, bhttp::status::ok, validations_page(*page, std::move(next)));
}

asio::awaitable<Result<http::Reply>> get_validation(ApiContext& ctx, Call& call) {
  const std::string id = call.param("id");
  // A tenant's read is scoped in the store: the node is held by it and the
  // report is of its period, or the answer is the same 404 as a missing one.
  if (!call.principal.is_staff() && call.principal.tenant.empty())
    co_return Error(Code::kNotFound, "no such validation: " + id);
  const std::string reader = call.principal.is_staff() ? std::string() : call.principal.tenant;
  Result<ValidationRecord> v = co_await ctx.deps.db.run([&] { return ctx.deps.store.get_validation(id, reader); });
  if (!v) {
    if (v.error().code == Code::kNotFound) co_return Error(Code::kNotFound, "no such validation: " + id);
    co_return v.error();
  }
  co_return json_reply(call.req, bhttp::status::ok, validation_json(*v, true));
}

// {"plan": "quick" | "full"}; 400 naming /plan.
Result<ValidationPlan> parse_run_body(const json& body) {
  std::vector<FieldError> errors;
  ObjectReader r(body, "", errors);
  std::optional<std::string> name = r.string("plan", true);
  r.finish();
  std::optional<ValidationPlan> plan = name ? parse_validation_plan(*name) : std::nullopt;
  if (name && !plan) errors.push_back({"/plan", "must be \"quick\" or \"full\""});
  if (!errors.empty()) return invalid_fields(std::move(errors));
  return *plan;
}

asio::awaitable<Result<http::Reply>> run_validation(ApiContext& ctx, Call& call) {
  Result<json> body = parse_json_body(call.req, {"application/json"});
  if (!body) co_return body.error();
  Result<ValidationPlan> plan = parse_run_body(*body);
  if (!plan) co_return plan.error();
  const std::string ref = call.param("id");
  Result<Node> node = co_await load_visible_node(ctx, call, ref);
  if (!node) co_return node.error();
  std::string node_id = node->id;
  ValidationPlan which = *plan;
  Actor actor = call.actor();
  Result<Node> started = co_await ctx.deps.conductor.validate_now(node_id, which, actor);
  if (!started) co_return started.error();
  call.log.info("validation requested", {{"node", node_id}, {"plan", std::string(to_string(which))}});
  co_return node_reply(call, bhttp::status::accepted, *started, /*location=*/true);
}

}  // namespace

void add_validation_routes(RouteTable& t, ApiContext& ctx) {
  using V = bhttp::verb;
  t.add({V::get, "/v1/nodes/{id}/validations", Access::kAnyRole, {"limit", "marker"},
         [&ctx](Call& c) { return list_node_validations(ctx, c); }});
  t.add({V::post, "/v1/nodes/{id}/validations", Access::kStaff, {},
         [&ctx](Call& c) { return run_validation(ctx, c); }});
  t.add({V::get, "/v1/validations/{id}", Access::kAnyRole, {}, [&ctx](Call& c) { return get_validation(ctx, c); }});
}

}  // namespace kiln::api
