#include "controller/ironic/ironic_api.h"

#include <cassert>
#include <exception>

#include "common/json_text.h"
#include "controller/api/reply.h"
#include "controller/api/route_table.h"
#include "controller/conductor/membership.h"
#include "controller/ironic/ironic_auth.h"
#include "controller/ironic/ironic_error.h"
#include "controller/ironic/ironic_routes.h"
#include "controller/ironic/ironic_version.h"

namespace kiln::ironic {

using api::Access;

namespace {

// What a route produced, or the error to answer with, and the version the
// reply is made under.
struct Outcome {
  Result<http::Reply> reply = Error(Code::kInternal, "internal error");
  ApiVersion served = kMinVersion;
  int status_override = 0;  // 406: no Code maps to it
};

}  // namespace

http::Reply ironic_json_reply(const IronicCall& call, bhttp::status status, const nlohmann::json& body) {
  return api::json_reply(call.req(), status, body);
}

http::Reply ironic_error_reply(const IronicCall& call, int status, std::string_view faultstring) {
  http::Reply reply;
  reply.response = error_response(call.req(), status, faultstring);
  return reply;
}

struct IronicApi::Impl {
  Impl(api::ApiContext& c, std::string p) : ctx(c), prefix(std::move(p)) {}

  asio::awaitable<http::Reply> handle(http::Request& req, const http::RequestInfo& info, const Logger& log,
                                      api::RequestRecord& record);
  asio::awaitable<void> dispatch(http::Request& req, const http::RequestInfo& info, const Logger& log,
                                 api::RequestRecord& record, std::string_view rel, Outcome& out);

  api::ApiContext& ctx;
  std::string prefix;
  IronicRouteTable table;
};

asio::awaitable<void> IronicApi::Impl::dispatch(http::Request& req, const http::RequestInfo& info,
                                                const Logger& log, api::RequestRecord& record,
                                                std::string_view rel, Outcome& out) {
  const std::string endpoint = api::absolute_url(req, info, prefix, {});
  // The root document is outside /v1: Ironic serves it whatever version is
  // asked for, without a token.
  if (rel.empty() || rel == "/") {
    record.route = prefix + "/";
    if (Result<ApiVersion> v = requested_version(req)) out.served = *v;
    if (req.method() != bhttp::verb::get && req.method() != bhttp::verb::head) {
      out.reply = Error(Code::kMethodNotAllowed, std::string(req.method_string()) + " is not allowed on " + prefix + "/");
      co_return;
    }
    out.reply = api::json_reply(req, bhttp::status::ok, root_document(endpoint));
    co_return;
  }
  // Ironic's root routes a path without a version to its default one
  // (RootController._route: /nodes is /v1/nodes). openstacksdk relies on it:
  // with keystoneauth's admin_token plugin its requests go to the endpoint
  // as given (".../ironic/nodes"), not to the discovered /v1.
  std::string versioned;
  if (rel != "/v1" && !rel.starts_with("/v1/")) {
    versioned = "/v1" + std::string(rel);
    rel = versioned;
  }
  Result<ApiVersion> version = requested_version(req);
  if (!version) {
    out.status_override = 406;
    out.reply = version.error();
    co_return;
  }
  out.served = *version;
  // A trailing slash names the same resource (pecan routes both).
  if (rel.size() > 1 && rel.back() == '/') rel.remove_suffix(1);
  if (rel == "/v1") {
    record.route = prefix + "/v1";
    if (req.method() != bhttp::verb::get && req.method() != bhttp::verb::head) {
      out.reply = Error(Code::kMethodNotAllowed, std::string(req.method_string()) + " is not allowed on " + prefix + "/v1");
      co_return;
    }
    out.reply = api::json_reply(req, bhttp::status::ok, v1_document(endpoint));
    co_return;
  }
  if (!is_valid_utf8(rel)) {
    out.reply = Error::invalid("path", "the request path is not valid UTF-8");
    co_return;
  }
  std::optional<std::string> decoded = api::percent_decode(rel, false);
  if (decoded && !is_valid_utf8(*decoded)) {
    out.reply = Error::invalid("path", "the request path is not valid UTF-8");
    co_return;
  }
  api::RouteMatch m = table.router().match(req.method(), rel);
  if (m.kind == api::RouteMatch::Kind::kNotFound) {
    out.reply = Error(Code::kNotFound, "no such resource: " + record.path);
    co_return;
  }
  if (m.kind == api::RouteMatch::Kind::kMethodNotAllowed) {
    for (bhttp::verb v : m.allowed) record.allow.append(record.allow.empty() ? "" : ", ").append(bhttp::to_string(v));
    out.reply = Error(Code::kMethodNotAllowed, std::string(req.method_string()) + " is not allowed on " +
                                                   record.path + "; allowed: " + record.allow);
    co_return;
  }
  const IronicRouteDef& def = table.def(m.index);
  record.route = prefix + def.pattern;
  if (*version < def.min_version) {
    out.reply = Error(Code::kNotFound, record.path + " is not in API version " + version->str() +
                                           " (it needs " + def.min_version.str() + ")");
    co_return;
  }

  api::Principal principal;
  if (def.access != Access::kPublic) {
    Result<api::Principal> p = co_await authenticate(req, ctx.deps.store, ctx.deps.db, ctx.deps.clock);
    if (!p) {
      out.reply = p.error();
      co_return;
    }
    principal = *p;
    record.principal = principal;
  }
  auto [path_part, query_text] = api::split_target(req.target());
  (void)path_part;
  Result<api::Query> query = api::Query::parse(query_text);
  if (!query) {
    out.reply = query.error();
    co_return;
  }
  if (Status known = query->check_known(def.query); !known) {
    out.reply = known.error();
    co_return;
  }
  api::Call base{req, info, m.params, *query, principal, log, {}};
  if (const Membership* ms = ctx.deps.conductor.membership(); ms != nullptr) base.ring = ms->view();
  IronicCall call{base, *version, endpoint, prefix + std::string(rel)};
  if (!api::role_allowed(def.access, principal)) {
    // As /v1: a tenant must not learn that another tenant's node exists.
    if (principal.role == api::Role::kTenant && !def.node_param.empty()) {
      Result<Node> node = co_await api::load_visible_node(ctx, base, base.param(def.node_param));
      record.node_id = base.node_id;
      if (!node) {
        out.reply = node.error();
        co_return;
      }
    }
    out.reply = Error(Code::kPermissionDenied, "role " + std::string(to_string(principal.role)) + " may not " +
                                                   std::string(req.method_string()) + " " + prefix + def.pattern);
    co_return;
  }
  out.reply = co_await def.fn(call);
  record.node_id = base.node_id;
}

asio::awaitable<http::Reply> IronicApi::Impl::handle(http::Request& req, const http::RequestInfo& info,
                                                     const Logger& log, api::RequestRecord& record) {
  auto [path, query_text] = api::split_target(req.target());
  (void)query_text;
  std::string_view rel = path.substr(prefix.size());
  Outcome out;
  try {
    co_await dispatch(req, info, log, record, rel, out);
  } catch (const std::exception& e) {
    log.error("ironic route threw", {{"route", record.route}, {"what", e.what()}});
    out.reply = Error(Code::kInternal, "internal error");
    out.status_override = 0;
  }
  http::Reply reply;
  if (out.reply) {
    reply = std::move(*out.reply);
  } else {
    const Error& err = out.reply.error();
    const int status = out.status_override != 0 ? out.status_override : ironic_status(err.code);
    reply.response = error_response(req, status, err.message);
    if (!record.allow.empty()) reply.response.set(bhttp::field::allow, record.allow);
    if (status == 401) reply.response.set(bhttp::field::www_authenticate, "Basic realm=\"Baremetal API\"");
    if (record.principal)
      log.log(status >= 500 ? LogLevel::kWarn : LogLevel::kInfo, "ironic request failed",
              {{"method", std::string(req.method_string())},
               {"path", record.path},
               {"route", record.route},
               {"status", std::to_string(status)},
               {"code", code_name(err.code)},
               {"detail", err.message}});
  }
  set_version_headers(reply.response, out.served);
  co_return reply;
}

IronicApi::IronicApi(Api& api, std::string prefix)
    : impl_(std::make_unique<Impl>(api.context(), std::move(prefix))) {
  IronicRouteTable& t = impl_->table;
  api::ApiContext& ctx = impl_->ctx;
  add_ironic_node_routes(t, ctx);
  add_ironic_port_routes(t, ctx);
  add_ironic_driver_routes(t, ctx);
  add_ironic_provision_routes(t, ctx);
  Impl* impl = impl_.get();
  api.mount(impl_->prefix, [impl](http::Request& req, const http::RequestInfo& info, const Logger& log,
                                  api::RequestRecord& record) { return impl->handle(req, info, log, record); });
}

IronicApi::~IronicApi() = default;

std::vector<std::pair<std::string, std::string>> IronicApi::routes() const {
  std::vector<std::pair<std::string, std::string>> out;
  for (const api::Router::Entry& e : impl_->table.router().routes())
    out.emplace_back(std::string(bhttp::to_string(e.method)), impl_->prefix + e.pattern);
  return out;
}

}  // namespace kiln::ironic
