#include "agent/runtime/agent_loop.h"

#include <algorithm>

#include "agent/inventory/addresses.h"
#include "agent/inventory/network.h"
#include "agent/runtime/replies.h"

namespace kiln::agent {

using nlohmann::json;


AgentLoop::AgentLoop(AgentConfig config, CommandRunner& runner, Logger log, HttpClientOptions http)
    : config_(std::move(config)), runner_(runner), log_(std::move(log)), http_(http) {
  node_id_ = config_.node_id;
}

AgentLoop::~AgentLoop() {
  stop();
  if (worker_.joinable()) worker_.join();
}

void AgentLoop::stop() {
  std::lock_guard<std::mutex> lock(mu_);
  stopping_ = true;
  cv_.notify_all();
}

std::string AgentLoop::url(const char* path) const {
  std::string base = config_.api_url;
  while (!base.empty() && base.back() == '/') base.pop_back();
  return base + path;
}

HttpHeaders AgentLoop::auth_headers() const {
  return {{"Content-Type", "application/json"}, {"Authorization", "Bearer " + session_}};
}

void AgentLoop::wait(std::chrono::milliseconds d) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait_for(lock, d, [&] { return stopping_ || wake_; });
  wake_ = false;
}

void AgentLoop::backoff(const std::string& why) {
  backoff_ = backoff_.count() == 0 ? config_.backoff_initial : std::min(backoff_ * 2, config_.backoff_max);
  log_.warn("request to kilnd failed; retrying", {{"error", why}, {"retry_ms", std::to_string(backoff_.count())}});
  wait(backoff_);
}

void AgentLoop::set_interval(std::optional<double> seconds) {
  if (seconds) interval_ = clamp_interval(*seconds, config_.min_heartbeat, config_.max_heartbeat);
}

// Where the tenant's OS can be reached: kilnd shows it as the node's
// addresses and ssh login (sent with the os-phase lookup and heartbeats).
static std::vector<std::string> os_addresses() { return reachable_addresses(read_interface_addresses()); }

AgentLoop::Reply AgentLoop::lookup() {
  const auto macs = lookup_macs(config_.root);
  if (macs.empty()) {
    backoff("no network interface MACs found under /sys/class/net");
    return Reply::kRetry;
  }
  json body = {{"macs", macs}, {"phase", phase_name(config_.phase)}, {"version", config_.version}};
  if (!node_id_.empty()) body["node"] = node_id_;
  if (config_.phase == AgentPhase::kRamdisk) body["token"] = config_.boot_token;
  if (config_.phase == AgentPhase::kOs && !config_.os_secret.empty()) body["secret"] = config_.os_secret;
  if (config_.phase == AgentPhase::kOs) body["addresses"] = os_addresses();
  auto r = http_.request("POST", url("/v1/agent/lookup"), {{"Content-Type", "application/json"}}, body.dump());
  if (!r) {
    backoff(r.error().message);
    return Reply::kRetry;
  }
  if (r->status == 200) {
    std::optional<LookupReply> reply = read_lookup_reply(r->body);
    if (!reply) {
      backoff("lookup reply has no session");
      return Reply::kRetry;
    }
    session_ = reply->session;
    had_session_ = true;
    if (!reply->node_id.empty()) node_id_ = reply->node_id;
    set_interval(reply->heartbeat_interval_s);
    backoff_ = std::chrono::milliseconds(0);
    log_.info("lookup ok", {{"node", node_id_}, {"provision_state", reply->provision_state},
                            {"heartbeat_ms", std::to_string(interval_.count())}});
    return Reply::kOk;
  }
  if (r->status == 401) {
    if (config_.phase == AgentPhase::kRamdisk) {
      log_.error("boot token rejected by kilnd (already used or replaced); waiting for the controller to reboot this node",
                 {{"status", "401"}, {"detail", problem_detail(r->body)},
                  {"retry_ms", std::to_string(config_.unauthorized_retry.count())}});
      wait(config_.unauthorized_retry);
      return Reply::kUnauthorized;
    }
  }
  if (r->status == 409 && config_.phase == AgentPhase::kOs && had_session_) {
    // The node was handed over (or moved on) after this agent served it: the
    // OS now belongs to the tenant, so the agent gets out of the way.
    log_.info("kilnd no longer needs an agent on this node; stopping", {{"detail", problem_detail(r->body)}});
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    return Reply::kConflict;
  }
  log_.warn("lookup refused", {{"status", std::to_string(r->status)}, {"detail", problem_detail(r->body)}});
  backoff("lookup HTTP " + std::to_string(r->status));
  return Reply::kRetry;
}

AgentLoop::Reply AgentLoop::heartbeat() {
  std::string busy;
  {
    std::lock_guard<std::mutex> lock(mu_);
    busy = running_;
  }
  json body = {{"node", node_id_}, {"busy", busy}};
  if (config_.phase == AgentPhase::kOs) body["addresses"] = os_addresses();
  auto r = http_.request("POST", url("/v1/agent/heartbeat"), auth_headers(), body.dump());
  if (!r) {
    backoff(r.error().message);
    return Reply::kRetry;
  }
  if (r->status == 401) return Reply::kUnauthorized;
  if (r->status != 200) {
    backoff("heartbeat HTTP " + std::to_string(r->status) + ": " + problem_detail(r->body));
    return Reply::kRetry;
  }
  backoff_ = std::chrono::milliseconds(0);
  std::optional<HeartbeatReply> reply = read_heartbeat_reply(r->body);
  if (!reply) {
    log_.warn("heartbeat reply is not JSON");
    return Reply::kOk;
  }
  set_interval(reply->heartbeat_interval_s);
  if (reply->command && !started_.count(reply->command->id) && busy.empty())
    start_command(reply->command->id, reply->command->name, reply->command->args);
  return Reply::kOk;
}

void AgentLoop::start_command(const std::string& id, const std::string& name, const json& args) {
  if (worker_.joinable()) worker_.join();  // the previous command has finished (running_ was empty)
  started_.insert(id);
  {
    std::lock_guard<std::mutex> lock(mu_);
    running_ = id;
  }
  log_.info("command started", {{"command", name}, {"command_id", id}});
  worker_ = std::thread([this, id, name, args, session = session_] {
    const auto t0 = std::chrono::steady_clock::now();
    CommandOutcome outcome = runner_.run(name, args, session);
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (outcome.ok)
      log_.info("command finished", {{"command", name}, {"command_id", id}, {"seconds", std::to_string(secs)}});
    else
      log_.error("command failed", {{"command", name}, {"command_id", id}, {"error", outcome.error}});
    std::lock_guard<std::mutex> lock(mu_);
    running_.clear();
    results_.push_back(Pending{id, std::move(outcome)});
    wake_ = true;
    cv_.notify_all();
  });
}

AgentLoop::Reply AgentLoop::post_results() {
  for (;;) {
    Pending p;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (results_.empty()) return Reply::kOk;
      p = results_.front();
    }
    json body = {{"node", node_id_}, {"command_id", p.id}, {"status", p.outcome.ok ? "ok" : "error"},
                 {"result", p.outcome.result}};
    if (!p.outcome.ok) body["error"] = p.outcome.error;
    auto r = http_.request("POST", url("/v1/agent/results"), auth_headers(),
                           body.dump(-1, ' ', false, json::error_handler_t::replace));
    if (!r) {
      backoff(r.error().message);
      return Reply::kRetry;
    }
    if (r->status == 401) return Reply::kUnauthorized;
    const bool posted = r->status == 204 || r->status == 200;
    if (!posted && r->status != 409) {
      backoff("results HTTP " + std::to_string(r->status) + ": " + problem_detail(r->body));
      return Reply::kRetry;
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      results_.pop_front();
    }
    if (!posted) {
      log_.warn("result dropped: kilnd is not waiting for this command", {{"command_id", p.id}, {"status", "409"}});
      continue;
    }
    log_.info("result posted", {{"command_id", p.id}, {"status", p.outcome.ok ? "ok" : "error"}});
    if (p.outcome.after_post) p.outcome.after_post();
  }
}

void AgentLoop::run() {
  log_.info("agent starting", {{"phase", phase_name(config_.phase)}, {"api", config_.api_url}, {"version", config_.version}});
  for (;;) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopping_) break;
    }
    if (session_.empty()) {
      lookup();
      continue;
    }
    Reply r = post_results();
    if (r == Reply::kOk) r = heartbeat();
    if (r == Reply::kUnauthorized) {
      session_.clear();
      if (config_.phase == AgentPhase::kRamdisk)
        log_.warn("session rejected by kilnd (401); the boot token is spent, so lookup will likely fail until the "
                  "node is rebooted");
      else
        log_.warn("session rejected by kilnd (401); looking up again");
      continue;
    }
    if (r == Reply::kOk) wait(interval_);
  }
  log_.info("agent stopping");
}

}  // namespace kiln::agent
