#include "controller/agent/agent_broker.h"

#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "common/ids.h"
#include "controller/store/store.h"

// AgentBroker: the conductor's side (agent_broker.h): waiting for a node's
// agent or its OS to show up, and running one command through the agent,
// each by watching the store (any instance may have served the agent).

namespace kiln {

namespace {

const char* phase_name(AgentPhase p) { return p == AgentPhase::kOs ? "os" : "ramdisk"; }

}  // namespace

asio::awaitable<Status> AgentBroker::poll_until(std::function<asio::awaitable<Result<bool>>()> done,
                                                StillHeld still_held) {
  auto executor = co_await asio::this_coro::executor;
  asio::steady_timer timer(executor);
  for (;;) {
    Result<bool> d = co_await done();
    if (!d) co_return d.take_error();
    if (*d) co_return ok_status();
    if (shutdown_) co_return Error(Code::kUnavailable, "kilnd is shutting down");
    if (still_held) {
      bool held = co_await still_held();
      if (!held) co_return Error(Code::kConflict, "the operation no longer holds the node");
    }
    timer.expires_after(opt_.poll_interval);
    boost::system::error_code ec;
    co_await timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
  }
}

asio::awaitable<Status> AgentBroker::wait_for_agent(std::string node_id, AgentPhase phase, StillHeld still_held) {
  std::string want = phase_name(phase);
  // The node's session, opened by a lookup on any instance (or before a
  // kilnd restart: that agent is still there). A lookup replaces the node's
  // sessions, so this is the latest one.
  co_return co_await poll_until(
      [&]() -> asio::awaitable<Result<bool>> {
        Result<std::vector<AgentSession>> sessions =
            co_await db_.run([&] { return store_.agent_sessions_of(node_id); });
        if (!sessions) co_return sessions.take_error();
        bool found = false;
        for (const AgentSession& s : *sessions) found = found || s.phase == want;
        co_return found;
      },
      std::move(still_held));
}

asio::awaitable<Status> AgentBroker::wait_for_phone_home(std::string node_id, StillHeld still_held) {
  Status s = co_await poll_until(
      [&]() -> asio::awaitable<Result<bool>> {
        Result<Node> node = co_await db_.run([&] { return store_.get_node(node_id); });
        if (!node) co_return node.take_error();
        co_return !node->ssh_host_keys.empty();
      },
      std::move(still_held));
  if (!s) co_return s;
  log_.info("os phoned home", {{"node", node_id}});
  co_return ok_status();
}

asio::awaitable<Result<nlohmann::json>> AgentBroker::run_command(std::string node_id, std::string name,
                                                                 nlohmann::json args, StillHeld still_held) {
  AgentCommandRecord command;
  command.node_id = node_id;
  command.id = new_uuid();
  command.name = name;
  command.args = std::move(args);
  command.created_at = clock_.now_ms();
  const std::string id = command.id;
  // Replaces the node's outstanding command, on every instance at once.
  Status put = co_await db_.run([&] { return store_.put_agent_command(command); });
  if (!put) co_return put.take_error();
  log_.info("agent command queued", {{"node", node_id}, {"command", name}, {"command_id", id}});
  auto executor = co_await asio::this_coro::executor;
  asio::steady_timer timer(executor);
  std::optional<AgentCommandRecord> finished;
  for (;;) {
    Result<std::optional<AgentCommandRecord>> now = co_await db_.run([&] { return store_.get_agent_command(node_id); });
    if (!now) {
      // A store hiccup (PostgreSQL restarting): keep waiting, bounded by
      // still_held and shutdown.
      log_.warn("agent command: cannot read its state", {{"node", node_id}, {"error", now.error().message}});
    } else if (!*now || (*now)->id != id) {
      co_return Error(Code::kConflict, "command " + name + " was dropped (the node's agent was forgotten)");
    } else if (!(*now)->status.empty()) {
      finished = std::move(**now);
      break;
    }
    if (shutdown_) co_return Error(Code::kUnavailable, "kilnd is shutting down");
    if (still_held) {
      bool held = co_await still_held();
      if (!held) {
        Status cleared = co_await db_.run([&] { return store_.clear_agent_command(node_id, id); });
        if (!cleared) log_.warn("agent command not cleared", {{"node", node_id}, {"error", cleared.error().message}});
        co_return Error(Code::kConflict, "the operation no longer holds the node");
      }
    }
    timer.expires_after(opt_.poll_interval);
    boost::system::error_code ec;
    co_await timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
  }
  // Done with: a later heartbeat hands out nothing, a repeated result is 409.
  Status cleared = co_await db_.run([&] { return store_.clear_agent_command(node_id, id); });
  if (!cleared) log_.warn("agent command not cleared", {{"node", node_id}, {"error", cleared.error().message}});
  if (finished->status != "ok") {
    std::string why = finished->error.empty() ? std::string("the agent gave no reason") : finished->error;
    co_return Error(Code::kDriverError, name + " failed: " + why);
  }
  co_return std::move(finished->result);
}

}  // namespace kiln
