// GET /v1/conductors: the kilnd instances sharing the database, as the
// answering instance sees them (controller/conductor/membership.h): whether
// each is alive, which one is answering (`self`), and how many nodes the
// ring gives each. Staff only: it shows the provider's machines.

#include <map>

#include "controller/api/reply.h"
#include "controller/api/route_table.h"

namespace kiln::api {
namespace {

nlohmann::json time_or_null(int64_t ms) { return ms > 0 ? nlohmann::json(format_rfc3339(ms)) : nlohmann::json(); }

nlohmann::json conductors_json(const RingView& view, const std::map<std::string, int64_t>& owned) {
  nlohmann::json items = nlohmann::json::array();
  for (const ConductorState& c : view.conductors()) {
    auto n = owned.find(c.record.id);
    items.push_back({{"id", c.record.id},
                     {"host", c.record.host},
                     {"api_url", c.record.api_url},
                     {"started_at", format_rfc3339(c.record.started_at)},
                     {"last_heartbeat_at", format_rfc3339(c.record.last_heartbeat_at)},
                     {"stopped_at", time_or_null(c.record.stopped_at)},
                     {"alive", c.alive},
                     {"self", c.record.id == view.self()},
                     {"nodes", n == owned.end() ? int64_t{0} : n->second}});
  }
  return {{"conductors", std::move(items)}, {"next", nullptr}};
}

// Nodes per owner on `view`'s ring: counted per arc in the store's ring
// position index (no node row is read), plus the nodes not placed on the
// ring yet, whose owners are decided here.
Result<std::map<std::string, int64_t>> count_owned(NodeStore& store, const RingView& view) {
  const HashRing& ring = view.ring();
  Result<RingCounts> counts = store.count_nodes_on_ring(ring.arcs());
  if (!counts) return counts.take_error();
  std::map<std::string, int64_t> owned;
  for (std::size_t m = 0; m < counts->per_member.size() && m < ring.members().size(); ++m)
    if (counts->per_member[m] > 0) owned[ring.members()[m]] = counts->per_member[m];
  for (const std::string& key : counts->unplaced)
    if (std::optional<std::string> o = view.owner_of(key)) ++owned[*o];
  return owned;
}

asio::awaitable<Result<http::Reply>> list_conductors(ApiContext& ctx, Call& call) {
  if (call.ring == nullptr) co_return Error(Code::kUnavailable, "this instance runs without conductor membership");
  std::shared_ptr<const RingView> view = call.ring;
  Result<std::map<std::string, int64_t>> owned =
      co_await ctx.deps.db.run([&] { return count_owned(ctx.deps.store, *view); });
  if (!owned) co_return owned.error();
  co_return json_reply(call.req, bhttp::status::ok, conductors_json(*view, *owned));
}

}  // namespace

void add_conductor_routes(RouteTable& t, ApiContext& ctx) {
  t.add({bhttp::verb::get, "/v1/conductors", Access::kStaff, {},
         [&ctx](Call& c) { return list_conductors(ctx, c); }});
}

}  // namespace kiln::api
