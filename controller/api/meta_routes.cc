// Unauthenticated operational endpoints: liveness, readiness, Prometheus
// metrics and the OpenAPI document.

#include "controller/api/openapi.h"
#include "controller/api/problem.h"
#include "controller/api/reply.h"
#include "controller/api/route_table.h"
#include "controller/model/allocation_states.h"
#include "controller/tenancy/allocation_engine.h"

namespace kiln::api {
namespace {

// The engine's time-to-ready counts as a Prometheus histogram in seconds.
HistogramSnapshot time_to_ready_snapshot(const AllocationEngine& engine) {
  TimeToReady t = engine.time_to_ready();
  HistogramSnapshot h;
  for (std::size_t i = 0; i < t.buckets.size(); ++i)
    h.buckets.push_back({static_cast<double>(kTimeToReadyBucketsMs[i]) / 1000.0, t.buckets[i]});
  h.count = t.count;
  h.sum = static_cast<double>(t.sum_ms) / 1000.0;
  return h;
}

asio::awaitable<Result<http::Reply>> healthz(Call& call) {
  co_return json_reply(call.req, bhttp::status::ok, {{"status", "ok"}});
}

// Ready = the process said so (start-up finished) and the store answers a read.
// When it does not, the reason names the database and what went wrong in
// words of our own: /readyz is unauthenticated, and the store's message
// (libpq's) names the server's host or socket path, so that goes to the log.
asio::awaitable<Result<http::Reply>> readyz(ApiContext& ctx, Call& call) {
  if (!ctx.ready.load()) co_return Error(Code::kUnavailable, "not ready: starting or stopping");
  Result<int64_t> seq = co_await ctx.deps.db.run([&] { return ctx.deps.store.last_event_seq(); });
  if (!seq) {
    call.log.warn("not ready: the database does not answer", {{"error", seq.error().message}});
    co_return Error(Code::kUnavailable, seq.error().code == Code::kUnavailable
                                            ? "not ready: the database is unreachable"
                                            : "not ready: the database does not answer reads");
  }
  co_return json_reply(call.req, bhttp::status::ok, {{"status", "ready"}});
}

// The read cache (read_cache.h): how often a kept answer served a GET.
void append_read_cache_metrics(std::string& out, const ReadCache::Counts& c) {
  out.append("# HELP kiln_api_read_cache_hits_total GET answers served from the read cache.\n");
  out.append("# TYPE kiln_api_read_cache_hits_total counter\n");
  out.append("kiln_api_read_cache_hits_total ").append(std::to_string(c.hits)).append("\n");
  out.append("# HELP kiln_api_read_cache_misses_total Cacheable GETs answered by their route.\n");
  out.append("# TYPE kiln_api_read_cache_misses_total counter\n");
  out.append("kiln_api_read_cache_misses_total ").append(std::to_string(c.misses)).append("\n");
  out.append("# HELP kiln_api_read_cache_bytes Bytes of answers the read cache holds.\n");
  out.append("# TYPE kiln_api_read_cache_bytes gauge\n");
  out.append("kiln_api_read_cache_bytes ").append(std::to_string(c.bytes)).append("\n");
}

// PostgreSQL's write generation (generation_reads.h): requests that asked for
// it and the statements that answered them (0 and 0 on SQLite).
void append_generation_metrics(std::string& out, const GenerationReads& g) {
  out.append("# HELP kiln_api_generation_reads_total Requests that read the database's write generation.\n");
  out.append("# TYPE kiln_api_generation_reads_total counter\n");
  out.append("kiln_api_generation_reads_total ").append(std::to_string(g.callers())).append("\n");
  out.append("# HELP kiln_api_generation_statements_total Statements that read it (shared by requests asking at once).\n");
  out.append("# TYPE kiln_api_generation_statements_total counter\n");
  out.append("kiln_api_generation_statements_total ").append(std::to_string(g.statements())).append("\n");
}

asio::awaitable<Result<http::Reply>> metrics(ApiContext& ctx, Call& call) {
  MetricsSnapshot snap;
  for (ProvisionState s : kAllProvisionStates) snap.nodes_by_state[std::string(to_string(s))] = 0;
  Result<std::map<std::string, int64_t>> counts =
      co_await ctx.deps.db.run([&] { return ctx.deps.store.count_nodes_by_state(); });
  if (!counts) co_return counts.error();
  for (const auto& [state, n] : *counts) snap.nodes_by_state[state] = n;
  for (AllocationState s : kAllAllocationStates) snap.allocations_by_state[std::string(to_string(s))] = 0;
  Result<std::map<std::string, int64_t>> allocs =
      co_await ctx.deps.db.run([&] { return ctx.deps.store.count_allocations_by_state(); });
  if (!allocs) co_return allocs.error();
  for (const auto& [state, n] : *allocs) snap.allocations_by_state[state] = n;
  if (ctx.deps.allocations != nullptr) snap.allocation_time_to_ready = time_to_ready_snapshot(*ctx.deps.allocations);
  snap.operations = ctx.deps.conductor.operation_counts();
  snap.connections = ctx.deps.connection_count ? ctx.deps.connection_count() : 0;
  http::Reply reply;
  reply.response = http::Response{bhttp::status::ok, call.req.version()};
  reply.response.set(bhttp::field::content_type, "text/plain; version=0.0.4; charset=utf-8");
  reply.response.set(bhttp::field::cache_control, "no-store");
  reply.response.keep_alive(call.req.keep_alive());
  reply.response.body() = render_metrics(snap, ctx.metrics);
  append_read_cache_metrics(reply.response.body(), ctx.read_cache.counts());
  append_generation_metrics(reply.response.body(), ctx.generations);
  reply.response.prepare_payload();
  co_return reply;
}

asio::awaitable<Result<http::Reply>> openapi(Call& call) {
  const Result<nlohmann::json>& spec = openapi_json();
  if (!spec) co_return spec.error();
  co_return json_reply(call.req, bhttp::status::ok, *spec);
}

}  // namespace

void add_meta_routes(RouteTable& t, ApiContext& ctx) {
  using V = bhttp::verb;
  t.add({V::get, "/healthz", Access::kPublic, {}, [](Call& c) { return healthz(c); }});
  t.add({V::get, "/readyz", Access::kPublic, {}, [&ctx](Call& c) { return readyz(ctx, c); }});
  t.add({V::get, "/metrics", Access::kPublic, {}, [&ctx](Call& c) { return metrics(ctx, c); }});
  t.add({V::get, "/openapi.json", Access::kPublic, {}, [](Call& c) { return openapi(c); }});
}

}  // namespace kiln::api
