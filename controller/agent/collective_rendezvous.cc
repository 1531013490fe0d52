#include "controller/agent/collective_rendezvous.h"

#include <algorithm>

#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "common/ids.h"

namespace kiln {

namespace {

using nlohmann::json;
using SteadyClock = std::chrono::steady_clock;

json threshold_of(const json& profile) {
  if (profile.is_object() && profile.contains("thresholds") && profile["thresholds"].is_object()) {
    const json& t = profile["thresholds"];
    if (t.contains("nccl_multinode_busbw_gbps_min") && t["nccl_multinode_busbw_gbps_min"].is_number())
      return {{"min", t["nccl_multinode_busbw_gbps_min"]}};
  }
  return nullptr;
}

int gpus_per_node(const json& profile) {
  if (profile.is_object() && profile.contains("gpu") && profile["gpu"].is_object() &&
      profile["gpu"].contains("count") && profile["gpu"]["count"].is_number_integer())
    return profile["gpu"]["count"].get<int>();
  return 0;
}

std::string join_ids(const std::vector<std::string>& ids) {
  std::string out;
  for (const std::string& id : ids) out += (out.empty() ? "" : ", ") + id;
  return out;
}

// The agent's collective_run result is one check; anything else is a failure.
json checked_agent_check(const json& r, const json& threshold) {
  if (!r.is_object() || r.value("name", "") != "nccl_multinode" || !r.contains("status") ||
      (r["status"] != "pass" && r["status"] != "fail" && r["status"] != "skip"))
    return multinode_fail("the agent's collective_run result is not an nccl_multinode check: " + r.dump().substr(0, 200),
                          threshold);
  json c = r;
  if (!c.contains("details") || !c["details"].is_object()) {
    json d = json::object();
    if (c.contains("details") && c["details"].is_string()) d["reason"] = c["details"];
    c["details"] = d;
  }
  return c;
}

void add_round_details(json& check, const std::string& allocation, const std::vector<std::string>& ranks,
                       const std::vector<std::string>& absent) {
  if (!check.contains("details") || !check["details"].is_object()) check["details"] = json::object();
  json& d = check["details"];
  d["allocation"] = allocation;
  d["members"] = ranks;
  if (!absent.empty()) d["absent"] = absent;
}

}  // namespace

json multinode_skip(const std::string& reason) {
  return {{"name", "nccl_multinode"}, {"status", "skip"},   {"value", nullptr},
          {"unit", "GB/s"},           {"threshold", nullptr}, {"details", {{"reason", reason}}}};
}

json multinode_fail(const std::string& reason, const json& threshold) {
  return {{"name", "nccl_multinode"}, {"status", "fail"},     {"value", nullptr},
          {"unit", "GB/s"},           {"threshold", threshold}, {"details", {{"reason", reason}}}};
}

CollectiveRendezvous::CollectiveRendezvous(AgentBroker& broker, NodeStore& store, BlockingPool& db,
                                           CollectiveOptions options, Logger log)
    : broker_(broker), store_(store), db_(db), opt_(std::move(options)), log_(std::move(log)) {}

bool CollectiveRendezvous::wanted(const json& profile) {
  if (!profile.is_object()) return false;
  if (!threshold_of(profile).is_null()) return true;
  if (!profile.contains("plans") || !profile["plans"].is_object()) return false;
  const json& plans = profile["plans"];
  if (!plans.contains("quick") || !plans["quick"].is_array()) return false;
  for (const json& n : plans["quick"])
    if (n == "nccl_multinode") return true;
  return false;
}

void CollectiveRendezvous::shutdown() { shutdown_ = true; }

std::shared_ptr<CollectiveRendezvous::Round> CollectiveRendezvous::join(const std::string& allocation,
                                                                        const std::string& node_id) {
  std::lock_guard<std::mutex> l(mu_);
  Group& g = groups_[allocation];
  g.done.erase(node_id);
  if (!g.open) {
    g.open = std::make_shared<Round>();
    g.open->run_id = new_uuid();
  }
  g.open->joined.insert(node_id);
  return g.open;
}

void CollectiveRendezvous::leave(const std::string& allocation, const std::string& node_id,
                                 const std::shared_ptr<Round>& round) {
  std::lock_guard<std::mutex> l(mu_);
  if (!round->started) round->joined.erase(node_id);
  auto it = groups_.find(allocation);
  if (it != groups_.end() && it->second.open == round && round->joined.empty()) it->second.open.reset();
  if (it != groups_.end() && !it->second.open && it->second.done.empty()) groups_.erase(it);
}

void CollectiveRendezvous::finish(const std::string& allocation, const std::string& node_id, const json& check) {
  std::lock_guard<std::mutex> l(mu_);
  // A member whose check failed either retries (it rejoins) or is
  // quarantined (it leaves validating): both are waited for, not skipped.
  if (check.value("status", "") != "fail") groups_[allocation].done.insert(node_id);
}

asio::awaitable<Result<std::set<std::string>>> CollectiveRendezvous::members(std::string allocation) {
  Result<std::set<std::string>> out = co_await db_.run([&]() -> Result<std::set<std::string>> {
    // One query per poll: the allocation's nodes, whatever their state.
    std::set<std::string> ids;
    NodeFilter f;
    f.allocation = allocation;
    ListOptions o;
    o.limit = 1000;
    o.sort_key = "id";
    for (;;) {
      Result<std::vector<Node>> page = store_.list_nodes(f, o);
      if (!page) return page.take_error();
      for (const Node& n : *page)
        if (n.provision_state == ProvisionState::kDeploying || n.provision_state == ProvisionState::kValidating)
          ids.insert(n.id);
      if (page->size() < static_cast<std::size_t>(o.limit)) break;
      o.marker = page->back().id;
    }
    return ids;
  });
  co_return out;
}

bool CollectiveRendezvous::maybe_start(const std::string& allocation, const std::shared_ptr<Round>& round,
                                       const std::set<std::string>& expected, bool force) {
  std::lock_guard<std::mutex> l(mu_);
  if (round->started) return true;
  Group& g = groups_[allocation];
  // Members that finished a round and are on their way to active (or out)
  // are not waited for; the store no longer listing them frees their entry.
  for (auto it = g.done.begin(); it != g.done.end();) it = expected.count(*it) ? std::next(it) : g.done.erase(it);
  std::vector<std::string> absent;
  for (const std::string& id : expected)
    if (!g.done.count(id) && !round->joined.count(id)) absent.push_back(id);
  if (!absent.empty() && !force) return false;
  round->started = true;
  round->ranks.assign(round->joined.begin(), round->joined.end());  // std::set: sorted by id
  round->absent = std::move(absent);
  if (g.open == round) g.open.reset();
  return true;
}

json CollectiveRendezvous::command_args(const Round& round, const json& profile) const {
  const bool nccl = opt_.collective == "nccl";
  int max_mib = opt_.max_mib > 0 ? opt_.max_mib : (nccl ? 1024 : 64);
  return {{"run", round.run_id},
          {"collective", opt_.collective},
          {"nodes", static_cast<int>(round.ranks.size())},
          {"gpus_per_node", gpus_per_node(profile)},
          {"max_mib", max_mib},
          {"iterations", opt_.iterations},
          {"timeout_s", opt_.run_timeout_s}};
}

asio::awaitable<Result<json>> CollectiveRendezvous::run_check(MultinodeRequest req) {
  if (req.allocation.empty()) co_return multinode_skip("the node is not deployed in an allocation");
  if (opt_.collective == "nccl" && gpus_per_node(req.profile) <= 0)
    co_return multinode_skip("the profile expects no GPUs (nccl_multinode needs NCCL on GPUs)");
  std::shared_ptr<Round> round = join(req.allocation, req.node_id);
  log_.info("nccl_multinode: joined", {{"node", req.node_id}, {"allocation", req.allocation}, {"run", round->run_id}});
  Result<json> r = co_await wait_for_round(req, round);
  if (!r) {
    leave(req.allocation, req.node_id, round);
    co_return r;
  }
  if (!r->is_null()) {  // decided while waiting (a skip)
    finish(req.allocation, req.node_id, *r);
    co_return r;
  }
  Result<json> check = co_await run_round(req, round);
  if (check) finish(req.allocation, req.node_id, *check);
  co_return check;
}

asio::awaitable<Status> CollectiveRendezvous::pause(const MultinodeRequest& req) {
  if (shutdown_) co_return Error(Code::kUnavailable, "kilnd is shutting down");
  if (req.still_held) {
    bool held = co_await req.still_held();
    if (!held) co_return Error(Code::kConflict, "the operation no longer holds the node");
  }
  auto executor = co_await asio::this_coro::executor;
  asio::steady_timer timer(executor);
  timer.expires_after(opt_.poll_interval);
  boost::system::error_code ec;
  co_await timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
  co_return ok_status();
}

// Waits until `round` starts. Returns null when it did and has company, a
// skip check when this node is alone, or kConflict / kUnavailable.
asio::awaitable<Result<json>> CollectiveRendezvous::wait_for_round(MultinodeRequest& req, std::shared_ptr<Round> round) {
  const SteadyClock::time_point give_up = SteadyClock::now() + opt_.assemble_timeout;
  for (;;) {
    Result<std::set<std::string>> expected = co_await members(req.allocation);
    if (!expected) co_return expected.take_error();
    // This node is in validating; list it even if the store lags a write.
    expected->insert(req.node_id);
    const bool late = SteadyClock::now() >= give_up;
    if (maybe_start(req.allocation, round, *expected, late)) break;
    Status go_on = co_await pause(req);
    if (!go_on) co_return go_on.take_error();
  }
  std::vector<std::string> ranks, absent;
  {
    std::lock_guard<std::mutex> l(mu_);
    ranks = round->ranks;
    absent = round->absent;
  }
  if (ranks.size() < 2) {
    std::string why = "only this node of allocation " + req.allocation + " was validating";
    if (!absent.empty()) why += "; not there after the assemble timeout: " + join_ids(absent);
    json skip = multinode_skip(why);
    add_round_details(skip, req.allocation, ranks, absent);
    co_return skip;
  }
  co_return json(nullptr);
}

asio::awaitable<Result<json>> CollectiveRendezvous::run_round(MultinodeRequest& req, std::shared_ptr<Round> round) {
  const json threshold = threshold_of(req.profile);
  std::vector<std::string> ranks, absent;
  json args;
  {
    std::lock_guard<std::mutex> l(mu_);
    ranks = round->ranks;
    absent = round->absent;
    args = command_args(*round, req.profile);
  }
  const int rank = static_cast<int>(std::find(ranks.begin(), ranks.end(), req.node_id) - ranks.begin());
  const std::string root = ranks.front();
  log_.info("nccl_multinode: round started", {{"node", req.node_id}, {"allocation", req.allocation},
                                              {"run", round->run_id}, {"rank", std::to_string(rank)},
                                              {"nodes", std::to_string(ranks.size())}});
  // 1. The unique id: rank 0 asks its agent; the others wait for it.
  std::string unique_id, prepare_error;
  const SteadyClock::time_point prepare_by = SteadyClock::now() + opt_.prepare_timeout;
  if (rank == 0) {
    std::string name = "collective_prepare";
    json prepare_args = args;
    StillHeld held = held_until(req.still_held, prepare_by);
    Result<json> p = co_await broker_.run_command(req.node_id, name, prepare_args, held);
    bool lost = false;
    if (p && p->is_object() && p->contains("unique_id") && (*p)["unique_id"].is_string() &&
        !(*p)["unique_id"].get<std::string>().empty()) {
      unique_id = (*p)["unique_id"].get<std::string>();
    } else if (p) {
      prepare_error = "its collective_prepare result has no unique_id";
    } else if (p.error().code == Code::kConflict && SteadyClock::now() >= prepare_by) {
      prepare_error = "no unique id within " +
                      std::to_string(std::chrono::duration_cast<std::chrono::seconds>(opt_.prepare_timeout).count()) + " s";
    } else {
      prepare_error = p.error().message;
      lost = p.error().code == Code::kConflict || p.error().code == Code::kUnavailable;
    }
    {
      std::lock_guard<std::mutex> l(mu_);
      round->unique_id = unique_id;
      round->prepare_error = lost ? "node " + req.node_id + " left validation" : prepare_error;
    }
    if (lost) co_return p.take_error();
  } else {
    for (;;) {
      {
        std::lock_guard<std::mutex> l(mu_);
        unique_id = round->unique_id;
        prepare_error = round->prepare_error;
      }
      if (!unique_id.empty() || !prepare_error.empty()) break;
      if (SteadyClock::now() >= prepare_by + opt_.poll_interval * 10) {
        prepare_error = "no unique id in time";
        break;
      }
      Status go_on = co_await pause(req);
      if (!go_on) co_return go_on.take_error();
    }
  }
  if (unique_id.empty()) {
    json fail = multinode_fail("rank 0 (node " + root + ") could not start the collective: " + prepare_error, threshold);
    add_round_details(fail, req.allocation, ranks, absent);
    co_return fail;
  }

  // 2. Every member runs its rank on its own agent.
  args["unique_id"] = unique_id;
  args["rank"] = rank;
  args["min_busbw_gbps"] = threshold.is_object() ? threshold["min"] : json(nullptr);
  std::string name = "collective_run";
  const SteadyClock::time_point run_by = SteadyClock::now() + std::chrono::seconds(opt_.run_timeout_s + 60);
  StillHeld held = held_until(req.still_held, run_by);
  Result<json> r = co_await broker_.run_command(req.node_id, name, args, held);
  json check;
  if (r) {
    check = checked_agent_check(*r, threshold);
  } else if (r.error().code == Code::kConflict && SteadyClock::now() >= run_by) {
    check = multinode_fail("the agent gave no collective_run result within " + std::to_string(opt_.run_timeout_s + 60) +
                               " s", threshold);
  } else if (r.error().code == Code::kConflict || r.error().code == Code::kUnavailable) {
    co_return r.take_error();
  } else {
    check = multinode_fail(r.error().message, threshold);
  }
  add_round_details(check, req.allocation, ranks, absent);
  log_.info("nccl_multinode: finished", {{"node", req.node_id}, {"run", round->run_id},
                                         {"status", check.value("status", "")}});
  co_return check;
}

}  // namespace kiln
