// /v1/events (pages of the event log) and /v1/events/stream (Server-Sent
// Events).
//
// The stream never holds events in memory between the store and the client:
// it keeps a cursor (the last seq it has accounted for) and, whenever the
// EventFeed says something was committed after it, reads the store from the
// cursor in seq order. Wake-ups may be coalesced or spurious; reads are not,
// so delivery is in order and complete. For a filtered stream (a tenant's, or
// ?node=) the cursor also advances past events the filter hid: before each
// read it notes the feed's latest seq, and a short read proves nothing visible
// lies between the cursor and that seq.

#include <algorithm>
#include <charconv>

#include "common/json_text.h"
#include "controller/api/node_view.h"
#include "controller/api/reply.h"
#include "controller/api/route_table.h"

namespace kiln::api {
namespace {

constexpr int kStreamBatch = 500;

Result<int64_t> parse_seq(std::string_view field, std::string_view v) {
  int64_t n = 0;
  auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
  if (ec != std::errc() || end != v.data() + v.size() || n < 0)
    return Error::invalid(std::string(field), "must be a non-negative integer (an event seq)");
  return n;
}

// The filters a caller's event reads run under.
struct EventScope {
  std::optional<std::string> node_id;
  std::optional<std::string> tenant;
};

asio::awaitable<Result<EventScope>> event_scope(ApiContext& ctx, Call& call) {
  EventScope scope;
  if (call.principal.role == Role::kTenant) scope.tenant = call.principal.tenant;
  if (auto ref = call.query.get("node")) {
    Result<Node> node = co_await load_visible_node(ctx, call, *ref);
    if (!node) co_return node.error();
    scope.node_id = node->id;
  }
  co_return scope;
}

asio::awaitable<Result<http::Reply>> list_events(ApiContext& ctx, Call& call) {
  Result<int> limit = call.query.limit();
  if (!limit) co_return limit.error();
  int64_t since = 0;
  if (auto v = call.query.get("since")) {
    Result<int64_t> s = parse_seq("since", *v);
    if (!s) co_return s.error();
    since = *s;
  }
  Result<EventScope> scope = co_await event_scope(ctx, call);
  if (!scope) co_return scope.error();
  Result<std::vector<EventRecord>> events = co_await ctx.deps.db.run([&] {
    return ctx.deps.store.list_events(since, *limit + 1, scope->node_id, scope->tenant);
  });
  if (!events) co_return events.error();
  bool more = events->size() > static_cast<std::size_t>(*limit);
  if (more) events->resize(*limit);
  nlohmann::json items = nlohmann::json::array();
  for (const EventRecord& e : *events) items.push_back(event_json(e));
  nlohmann::json next = nullptr;
  if (more) {
    auto params = call.query.all();
    params["since"] = std::to_string(events->back().seq);
    next = absolute_url(call.req, call.info, "/v1/events", params);
  }
  co_return json_reply(call.req, bhttp::status::ok, {{"events", std::move(items)}, {"next", next}});
}

std::string sse_frame(const EventRecord& e) {
  std::string out = "id: " + std::to_string(e.seq) + "\nevent: " + e.type + "\ndata: ";
  out.append(dump_json(event_json(e))).append("\n\n");
  return out;
}

// The body of one stream; returns when the peer goes, the store fails, or
// the Api shuts down.
asio::awaitable<void> run_stream(ApiContext& ctx, Logger log, EventScope scope, int64_t cursor,
                                 http::StreamWriter& writer) {
  using Clock = std::chrono::steady_clock;
  Clock::time_point last_write = Clock::now();
  while (!ctx.feed.is_shut_down()) {
    int64_t latest = ctx.feed.latest();
    Result<std::vector<EventRecord>> events = co_await ctx.deps.db.run([&] {
      return ctx.deps.store.list_events(cursor, kStreamBatch, scope.node_id, scope.tenant);
    });
    if (!events) {
      log.warn("event stream ended: store error", {{"error", events.error().message}});
      co_return;
    }
    for (const EventRecord& e : *events) {
      std::string frame = sse_frame(e);  // named: temporaries in co_await are fragile on GCC 12
      if (!co_await writer.write(frame)) co_return;
      cursor = e.seq;
      last_write = Clock::now();
    }
    if (events->size() == static_cast<std::size_t>(kStreamBatch)) continue;
    cursor = std::max(cursor, latest);

    auto idle = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - last_write);
    if (idle >= ctx.deps.sse_keepalive) {
      if (!co_await writer.write(": keepalive\n\n")) co_return;
      last_write = Clock::now();
      idle = std::chrono::milliseconds(0);
    }
    EventFeed::Wake wake = co_await ctx.feed.wait_after(cursor, ctx.deps.sse_keepalive - idle);
    if (wake == EventFeed::Wake::kShutdown) co_return;
  }
}

asio::awaitable<Result<http::Reply>> stream_events(ApiContext& ctx, Call& call) {
  // An EventSource reconnects to the same URL (so with the same `since`)
  // and adds Last-Event-ID, the last event it received: the later of the
  // two is where the client is, or a resumed stream would replay everything
  // after the first `since` again (duplicates a client cannot tell apart).
  std::optional<int64_t> start;
  if (auto v = call.query.get("since")) {
    Result<int64_t> s = parse_seq("since", *v);
    if (!s) co_return s.error();
    start = *s;
  }
  if (auto it = call.req.find("Last-Event-ID"); it != call.req.end()) {
    Result<int64_t> s = parse_seq("Last-Event-ID", it->value());
    if (!s) co_return s.error();
    start = std::max(start.value_or(0), *s);
  }
  Result<EventScope> scope = co_await event_scope(ctx, call);
  if (!scope) co_return scope.error();
  if (!start) {
    Result<int64_t> last = co_await ctx.deps.db.run([&] { return ctx.deps.store.last_event_seq(); });
    if (!last) co_return last.error();
    start = *last;
  }

  http::Reply reply;
  reply.response = http::Response{bhttp::status::ok, call.req.version()};
  reply.response.set(bhttp::field::content_type, "text/event-stream");
  reply.response.set(bhttp::field::cache_control, "no-cache");
  reply.response.keep_alive(call.req.keep_alive());
  Logger log = call.log;
  reply.stream = [&ctx, log, scope = std::move(*scope), cursor = *start](
                     http::StreamWriter& writer) -> asio::awaitable<void> {
    return run_stream(ctx, log, scope, cursor, writer);
  };
  co_return reply;
}

}  // namespace

void add_event_routes(RouteTable& t, ApiContext& ctx) {
  using V = bhttp::verb;
  t.add({V::get, "/v1/events", Access::kAnyRole, {"since", "limit", "node"},
         [&ctx](Call& c) { return list_events(ctx, c); }});
  t.add({V::get, "/v1/events/stream", Access::kAnyRole, {"since", "node"},
         [&ctx](Call& c) { return stream_events(ctx, c); }});
}

}  // namespace kiln::api
