#include "controller/agent/collective_rendezvous.h"

#include <algorithm>

#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "common/ids.h"
#include "controller/model/validation.h"

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

std::string status_of(const std::map<std::string, json>& checks, const std::string& node) {
  auto it = checks.find(node);
  if (it == checks.end() || !it->second.is_object()) return "";
  return it->second.value("status", "");
}

std::string reason_of(const json& check) {
  if (check.is_object() && check.contains("details") && check["details"].is_object() &&
      check["details"].contains("reason") && check["details"]["reason"].is_string())
    return check["details"]["reason"].get<std::string>();
  return "";
}

std::string sorted_key(const std::string& a, const std::string& b) { return a < b ? a + "\n" + b : b + "\n" + a; }

}  // namespace

json multinode_skip(const std::string& reason) {
  return {{"name", "nccl_multinode"}, {"status", "skip"},   {"value", nullptr},
          {"unit", "GB/s"},           {"threshold", nullptr}, {"details", {{"reason", reason}}}};
}

json multinode_fail(const std::string& reason, const json& threshold) {
  return {{"name", "nccl_multinode"}, {"status", "fail"},     {"value", nullptr},
          {"unit", "GB/s"},           {"threshold", threshold}, {"details", {{"reason", reason}}}};
}

CollectiveRendezvous::CollectiveRendezvous(AgentBroker& broker, NodeRepo& store, BlockingPool& db,
                                           CollectiveOptions options, Logger log)
    : broker_(broker), store_(store), db_(db), opt_(std::move(options)), log_(std::move(log)) {}

bool CollectiveRendezvous::wanted(const json& profile) {
  if (!profile.is_object()) return false;
  if (!threshold_of(profile).is_null()) return true;
  const std::vector<std::string> quick = plan_checks(profile, ValidationPlan::kQuick);
  return std::find(quick.begin(), quick.end(), "nccl_multinode") != quick.end();
}

void CollectiveRendezvous::shutdown() { shutdown_ = true; }

std::shared_ptr<CollectiveRendezvous::Round> CollectiveRendezvous::join(const std::string& allocation,
                                                                        const std::string& node_id) {
  std::lock_guard<std::mutex> l(mu_);
  Group& g = groups_[allocation];
  g.done.erase(node_id);
  if (!g.open) {
    g.open = std::make_shared<Round>();
    auto all = std::make_shared<Run>();
    all->run_id = new_uuid();
    g.open->phases.push_back({all});
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
  round->phases[0][0]->ranks = round->ranks;
  const RunLimits limits = limits_of(0);
  round->phase_deadlines.push_back(SteadyClock::now() + limits.prepare + std::chrono::seconds(limits.run_s + 60) +
                                   opt_.poll_interval * 10);
  if (g.open == round) g.open.reset();
  return true;
}

json CollectiveRendezvous::command_args(const Run& run, const json& profile, int timeout_s) const {
  const bool nccl = opt_.collective == "nccl";
  int max_mib = opt_.max_mib > 0 ? opt_.max_mib : (nccl ? 1024 : 8);
  return {{"run", run.run_id},
          {"collective", opt_.collective},
          {"nodes", static_cast<int>(run.ranks.size())},
          {"gpus_per_node", gpus_per_node(profile)},
          {"max_mib", max_mib},
          {"iterations", opt_.iterations},
          {"timeout_s", timeout_s}};
}

CollectiveRendezvous::RunLimits CollectiveRendezvous::limits_of(std::size_t phase) const {
  if (phase == 0) return {opt_.prepare_timeout, opt_.run_timeout_s};
  // The pair rounds share one round's time between them.
  return {opt_.prepare_timeout / kIsolationPhases, std::max(1, opt_.run_timeout_s / kIsolationPhases)};
}

asio::awaitable<Result<json>> CollectiveRendezvous::run_check(MultinodeRequest req) {
  if (req.allocation.empty()) co_return multinode_skip("the node is not deployed in an allocation");
  if (opt_.collective == "nccl" && gpus_per_node(req.profile) <= 0)
    co_return multinode_skip("the profile expects no GPUs (nccl_multinode needs NCCL on GPUs)");
  std::shared_ptr<Round> round = join(req.allocation, req.node_id);
  std::string run_id;
  {
    std::lock_guard<std::mutex> l(mu_);
    run_id = round->phases[0][0]->run_id;
  }
  log_.info("nccl_multinode: joined", {{"node", req.node_id}, {"allocation", req.allocation}, {"run", run_id}});
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
  else depart(round, req.node_id);
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
  std::size_t phase = 0;
  for (;;) {
    std::shared_ptr<Run> run;
    SteadyClock::time_point phase_by;
    {
      std::lock_guard<std::mutex> l(mu_);
      for (const std::shared_ptr<Run>& r : round->phases[phase])
        if (std::find(r->ranks.begin(), r->ranks.end(), req.node_id) != r->ranks.end()) run = r;
      phase_by = round->phase_deadlines[phase];
    }
    if (run) {
      const RunLimits limits = limits_of(phase);
      Result<json> check = co_await run_collective(req, run, limits);
      if (!check) co_return check.take_error();
      std::lock_guard<std::mutex> l(mu_);
      run->checks[req.node_id] = *check;
    }
    // Wait for the phase's other runs; the first member to see it complete
    // plans the next phase, so every member follows the same plan.
    bool more = false;
    for (;;) {
      bool complete = SteadyClock::now() >= phase_by;
      {
        std::lock_guard<std::mutex> l(mu_);
        if (!complete) {
          complete = true;
          for (const std::shared_ptr<Run>& r : round->phases[phase])
            for (const std::string& id : r->ranks)
              if (!r->checks.count(id) && !round->gone.count(id)) complete = false;
        }
        if (complete) {
          if (!round->decided && round->phases.size() == phase + 1) plan_next_phase(*round);
          more = round->phases.size() > phase + 1;
        }
      }
      if (complete) break;
      Status go_on = co_await pause(req);
      if (!go_on) co_return go_on.take_error();
    }
    if (!more) break;
    ++phase;
  }
  json verdict;
  {
    std::lock_guard<std::mutex> l(mu_);
    verdict = verdict_of(*round, req.node_id, req.allocation, threshold_of(req.profile));
  }
  log_.info("nccl_multinode: finished", {{"node", req.node_id}, {"allocation", req.allocation},
                                         {"status", verdict.value("status", "")},
                                         {"rounds", std::to_string(phase + 1)}});
  co_return verdict;
}

asio::awaitable<Result<json>> CollectiveRendezvous::run_collective(MultinodeRequest& req, std::shared_ptr<Run> run,
                                                                   RunLimits limits) {
  const json threshold = threshold_of(req.profile);
  std::vector<std::string> ranks;
  json args;
  {
    std::lock_guard<std::mutex> l(mu_);
    ranks = run->ranks;
    args = command_args(*run, req.profile, limits.run_s);
  }
  const int rank = static_cast<int>(std::find(ranks.begin(), ranks.end(), req.node_id) - ranks.begin());
  const std::string root = ranks.front();
  log_.info("nccl_multinode: run started", {{"node", req.node_id}, {"allocation", req.allocation},
                                            {"run", run->run_id}, {"rank", std::to_string(rank)},
                                            {"nodes", std::to_string(ranks.size())}});
  // 1. The unique id: rank 0 asks its agent; the others wait for it.
  std::string unique_id, prepare_error;
  const SteadyClock::time_point prepare_by = SteadyClock::now() + limits.prepare;
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
                      std::to_string(std::chrono::duration_cast<std::chrono::seconds>(limits.prepare).count()) + " s";
    } else {
      prepare_error = p.error().message;
      lost = p.error().code == Code::kConflict || p.error().code == Code::kUnavailable;
    }
    {
      std::lock_guard<std::mutex> l(mu_);
      run->unique_id = unique_id;
      run->prepare_error = lost ? "node " + req.node_id + " left validation" : prepare_error;
    }
    if (lost) co_return p.take_error();
  } else {
    for (;;) {
      {
        std::lock_guard<std::mutex> l(mu_);
        unique_id = run->unique_id;
        prepare_error = run->prepare_error;
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
    co_return fail;
  }

  // 2. Every member runs its rank on its own agent.
  args["unique_id"] = unique_id;
  args["rank"] = rank;
  args["min_busbw_gbps"] = threshold.is_object() ? threshold["min"] : json(nullptr);
  std::string name = "collective_run";
  const SteadyClock::time_point run_by = SteadyClock::now() + std::chrono::seconds(limits.run_s + 60);
  StillHeld held = held_until(req.still_held, run_by);
  Result<json> r = co_await broker_.run_command(req.node_id, name, args, held);
  json check;
  if (r) {
    check = checked_agent_check(*r, threshold);
  } else if (r.error().code == Code::kConflict && SteadyClock::now() >= run_by) {
    check = multinode_fail("the agent gave no collective_run result within " + std::to_string(limits.run_s + 60) + " s",
                           threshold);
  } else if (r.error().code == Code::kConflict || r.error().code == Code::kUnavailable) {
    co_return r.take_error();
  } else {
    check = multinode_fail(r.error().message, threshold);
  }
  log_.info("nccl_multinode: run finished", {{"node", req.node_id}, {"run", run->run_id},
                                             {"status", check.value("status", "")}});
  co_return check;
}

bool CollectiveRendezvous::run_failed(const Run& run) {
  for (const std::string& id : run.ranks)
    if (status_of(run.checks, id) != "pass" && status_of(run.checks, id) != "skip") return true;
  return false;
}

CollectiveRendezvous::Evidence CollectiveRendezvous::weigh(const Round& round) {
  Evidence ev;
  for (std::size_t p = 1; p < round.phases.size(); ++p)
    for (const std::shared_ptr<Run>& r : round.phases[p]) {
      ev.tried.insert(sorted_key(r->ranks.front(), r->ranks.back()));
      bool passed = true;
      for (const std::string& id : r->ranks)
        if (status_of(r->checks, id) != "pass") passed = false;
      if (passed) ev.cleared.insert(r->ranks.begin(), r->ranks.end());
    }
  for (std::size_t p = 1; p < round.phases.size(); ++p)
    for (const std::shared_ptr<Run>& r : round.phases[p])
      for (const std::string& id : r->ranks)
        for (const std::string& other : r->ranks)
          if (other != id && ev.cleared.count(other) && !ev.cleared.count(id) && !round.gone.count(id))
            ev.at_fault.insert(id);
  for (const std::string& id : round.ranks)
    if (!round.gone.count(id) && !ev.cleared.count(id) && !ev.at_fault.count(id)) ev.undecided.push_back(id);
  return ev;
}

std::vector<std::vector<std::string>> CollectiveRendezvous::next_pairs(const Round& round, const Evidence& ev) {
  std::set<std::string> used;  // one run per member per phase: the phase's runs go at once
  std::vector<std::vector<std::string>> pairs;
  for (const std::string& u : ev.undecided) {
    if (used.count(u)) continue;
    std::string partner;
    // A cleared partner proves u either way (ranks are sorted: the first is stable).
    for (const std::string& c : round.ranks)
      if (ev.cleared.count(c) && !round.gone.count(c) && !used.count(c)) {
        partner = c;
        break;
      }
    if (partner.empty())
      for (const std::string& v : ev.undecided)
        if (v != u && !used.count(v) && !ev.tried.count(sorted_key(u, v))) {
          partner = v;
          break;
        }
    if (partner.empty()) continue;
    used.insert(u);
    used.insert(partner);
    std::vector<std::string> pair = {std::min(u, partner), std::max(u, partner)};
    pairs.push_back(pair);
  }
  return pairs;
}

json CollectiveRendezvous::verdict_of(const Round& round, const std::string& node_id, const std::string& allocation,
                                      const json& threshold) {
  const Run& all = *round.phases[0][0];
  json own;
  auto found = all.checks.find(node_id);
  if (found != all.checks.end()) own = found->second;
  else own = multinode_fail("no collective_run result from this node in time", threshold);
  if (round.phases.size() == 1) {
    add_round_details(own, allocation, round.ranks, round.absent);
    if (own.value("status", "") == "fail" && round.ranks.size() == 2)
      own["details"]["isolation"] = "none: two members have no pair round but this one, so neither end can be named";
    return own;
  }

  const Evidence ev = weigh(round);
  // What every member's check shows of the isolation: the pair rounds and who they clear or blame.
  json rounds = json::array();
  std::vector<std::string> my_failures, my_partners;
  json my_figures = json::object();
  json my_pass;
  std::string first_reason = own.value("status", "") == "fail" ? reason_of(own) : "";
  for (std::size_t p = 1; p < round.phases.size(); ++p)
    for (const std::shared_ptr<Run>& r : round.phases[p]) {
      json values = json::object();
      bool passed = true;
      for (const std::string& id : r->ranks) {
        auto c = r->checks.find(id);
        values[id] = c != r->checks.end() && c->second.contains("value") ? c->second["value"] : json(nullptr);
        if (status_of(r->checks, id) != "pass") passed = false;
      }
      rounds.push_back({{"phase", p}, {"run", r->run_id}, {"members", r->ranks},
                        {"status", passed ? "pass" : "fail"}, {"values", values}});
      if (std::find(r->ranks.begin(), r->ranks.end(), node_id) == r->ranks.end()) continue;
      const std::string partner = r->ranks.front() == node_id ? r->ranks.back() : r->ranks.front();
      my_figures[r->run_id] = values[node_id];
      if (passed && my_pass.is_null()) my_pass = r->checks.at(node_id);
      if (!passed) {
        my_failures.push_back("with " + partner);
        my_partners.push_back(partner);
        auto c = r->checks.find(node_id);
        if (first_reason.empty() && c != r->checks.end()) first_reason = reason_of(c->second);
      }
    }
  json isolation = {{"max_phases", kIsolationPhases},
                    {"rounds", rounds},
                    {"cleared", std::vector<std::string>(ev.cleared.begin(), ev.cleared.end())},
                    {"at_fault", std::vector<std::string>(ev.at_fault.begin(), ev.at_fault.end())}};
  const bool explained = !ev.at_fault.empty() || !round.gone.empty();

  json check;
  if (ev.at_fault.count(node_id)) {
    std::vector<std::string> cleared_partners;
    for (const std::string& id : my_partners)
      if (ev.cleared.count(id)) cleared_partners.push_back(id);
    std::string why = "pair rounds found this node at fault: the round of " + std::to_string(round.ranks.size()) +
                      " members failed, and so did every pair round it ran (" + join_ids(my_failures) + "), while " +
                      join_ids(cleared_partners) + " passed with other members";
    if (!first_reason.empty()) why += "; first failure: " + first_reason;
    // value stays null: the figures are in details, and a number under the
    // floor would be a numeric miss retried alone, which could only skip.
    check = multinode_fail(why, threshold);
    check["details"]["figures"] = my_figures;
    if (own.contains("value")) check["details"]["figures"][all.run_id] = own["value"];
  } else if (explained && ev.cleared.count(node_id) && my_pass.is_object()) {
    check = my_pass;
    if (!check.contains("details") || !check["details"].is_object()) check["details"] = json::object();
    check["details"]["round_of_all"] = {{"run", all.run_id}, {"status", "fail"}, {"reason", reason_of(own)}};
  } else {
    check = own;
    if (check.value("status", "") == "fail") {
      std::string why = reason_of(check);
      why += why.empty() ? "" : "; ";
      if (!explained) why += "pair rounds found no member at fault (the failure needs the whole set)";
      else why += "pair rounds did not clear this node";
      if (!check.contains("details") || !check["details"].is_object()) check["details"] = json::object();
      check["details"]["reason"] = why;
    }
  }
  add_round_details(check, allocation, round.ranks, round.absent);
  check["details"]["isolation"] = isolation;
  return check;
}

void CollectiveRendezvous::depart(const std::shared_ptr<Round>& round, const std::string& node_id) {
  std::lock_guard<std::mutex> l(mu_);
  round->gone.insert(node_id);
  // A partner waiting for this node's unique id would otherwise wait out the prepare timeout.
  for (const auto& phase : round->phases)
    for (const std::shared_ptr<Run>& r : phase)
      if (!r->ranks.empty() && r->ranks.front() == node_id && r->unique_id.empty() && r->prepare_error.empty())
        r->prepare_error = "node " + node_id + " left validation";
}

void CollectiveRendezvous::plan_next_phase(Round& round) {
  if (round.phases.size() == 1 && (round.ranks.size() < 3 || !run_failed(*round.phases[0][0]))) {
    round.decided = true;
    return;
  }
  if (round.phases.size() > static_cast<std::size_t>(kIsolationPhases)) {
    round.decided = true;
    return;
  }
  const Evidence ev = weigh(round);
  const std::vector<std::vector<std::string>> pairs = next_pairs(round, ev);
  if (pairs.empty()) {
    round.decided = true;
    return;
  }
  std::vector<std::shared_ptr<Run>> runs;
  for (const std::vector<std::string>& pair : pairs) {
    auto r = std::make_shared<Run>();
    r->run_id = new_uuid();
    r->ranks = pair;
    runs.push_back(r);
  }
  const std::size_t phase = round.phases.size();
  const RunLimits limits = limits_of(phase);
  round.phases.push_back(std::move(runs));
  round.phase_deadlines.push_back(SteadyClock::now() + limits.prepare + std::chrono::seconds(limits.run_s + 60) +
                                  opt_.poll_interval * 10);
  std::string planned;
  for (const std::vector<std::string>& pair : pairs) planned += (planned.empty() ? "" : "; ") + join_ids(pair);
  log_.info("nccl_multinode: pair rounds to find the bad member",
            {{"run", round.phases[0][0]->run_id}, {"phase", std::to_string(phase)}, {"pairs", planned}});
}

}  // namespace kiln
