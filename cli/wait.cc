#include "cli/wait.h"

#include <utility>  // before Asio: Boost 1.74 awaitable.hpp uses std::exchange
#include <algorithm>
#include <csignal>
#include <memory>
#include <optional>
#include <ostream>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "cli/progress.h"
#include "cli/sse.h"
#include "controller/model/states.h"

namespace kiln::cli {

namespace asio = boost::asio;
using nlohmann::json;
using SteadyClock = std::chrono::steady_clock;

namespace {

// The model's sets (controller/model/states.h), by name. A state this CLI
// does not know (a newer kilnd) is neither: the node has settled there.
bool transient_state(const std::string& s) {
  const std::optional<ProvisionState> p = parse_provision_state(s);
  return p && is_transient(*p);
}

bool failed_state(const std::string& s) {
  const std::optional<ProvisionState> p = parse_provision_state(s);
  return p && is_failed(*p);
}

std::string str(const json& j, const char* key) {
  return j.contains(key) && j[key].is_string() ? j[key].get<std::string>() : std::string();
}

enum class Verdict { kContinue, kDone, kFailed };

struct Judgement {
  Verdict verdict = Verdict::kContinue;
  std::string why;
  std::vector<ProgressRow> rows;
};

double allocation_fraction(const std::string& state) {
  if (state == "pending") return 0.05;
  if (state == "provisioning") return 0.5;
  if (state == "ready" || state == "released") return 1.0;
  if (state == "releasing") return 0.5;
  return 0.0;
}

Judgement judge_allocations(const std::vector<json>& views, const std::string& goal) {
  Judgement j;
  int reached = 0;
  for (const json& a : views) {
    const std::string name = str(a, "name").empty() ? str(a, "id") : str(a, "name");
    const std::string state = str(a, "state");
    j.rows.push_back({"allocation " + name, state, "", allocation_fraction(state)});
    if (a.contains("nodes") && a["nodes"].is_array()) {
      for (const json& n : a["nodes"]) {
        const std::string node = str(n, "name").empty() ? str(n, "id") : str(n, "name");
        const std::string ns = str(n, "state");
        j.rows.push_back({name + "/" + node, ns, str(n, "step"), node_fraction(ns)});
      }
    }
    if (state == goal) {
      ++reached;
    } else if (goal == "ready" && (state == "failed" || state == "releasing" || state == "released")) {
      j.verdict = Verdict::kFailed;
      std::string reason = str(a, "last_error");
      j.why = "allocation " + name + " is " + state + (reason.empty() ? "" : ": " + reason);
    }
  }
  if (j.verdict == Verdict::kContinue && reached == static_cast<int>(views.size())) j.verdict = Verdict::kDone;
  return j;
}

Judgement judge_node(const json& n, const std::vector<std::string>& goal) {
  Judgement j;
  const std::string name = str(n, "name").empty() ? str(n, "id") : str(n, "name");
  const std::string state = str(n, "provision_state");
  j.rows.push_back({name, state, str(n, "provision_step"), node_fraction(state)});
  const bool settled = !transient_state(state) && str(n, "target_provision_state").empty();
  if (!settled) return j;
  if (failed_state(state)) {
    j.verdict = Verdict::kFailed;
    std::string reason = str(n, "last_error");
    j.why = "node " + name + " is " + state + (reason.empty() ? "" : ": " + reason);
  } else if (goal.empty() || std::find(goal.begin(), goal.end(), state) != goal.end()) {
    j.verdict = Verdict::kDone;
  } else {
    j.verdict = Verdict::kFailed;
    j.why = "node " + name + " settled in " + state;
  }
  return j;
}

// A power action is over when kilnd clears target_power_state (it set it
// before answering the PUT, so a read after that cannot see the old null).
// The action's outcome is then power_state, and last_error, which a
// successful action clears and a failed one sets.
Judgement judge_node_power(const json& n, const std::string& goal) {
  Judgement j;
  const std::string name = str(n, "name").empty() ? str(n, "id") : str(n, "name");
  const std::string state = str(n, "power_state");
  const std::string target = str(n, "target_power_state");
  j.rows.push_back({name, "power " + state + (target.empty() ? "" : " -> " + target), "", target.empty() ? 1.0 : 0.5});
  if (!target.empty()) return j;
  const std::string reason = str(n, "last_error");
  if (state == goal && reason.empty()) {
    j.verdict = Verdict::kDone;
  } else {
    j.verdict = Verdict::kFailed;
    j.why = "node " + name + " power is " + state + ", not " + goal + (reason.empty() ? "" : ": " + reason);
  }
  return j;
}

struct Waiter {
  Waiter(ApiClient& api, const WaitSpec& spec, std::ostream& out, bool tty, int width)
      : api(api), spec(spec), client(io.get_executor()), wake(io), signals(io, SIGINT),
        view(make_progress_view(out, tty, width)), poll(tty ? std::chrono::seconds(1) : std::chrono::seconds(2)),
        started(SteadyClock::now()), deadline(started + spec.timeout) {}

  asio::awaitable<Result<json>> fetch(std::string path) {
    http::ClientRequest req = api.request_for(http::bhttp::verb::get, path);
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - SteadyClock::now());
    req.timeout = std::max(std::chrono::milliseconds(100), std::min(req.timeout, left));
    Result<http::Response> r = co_await client.request(req);
    if (!r) co_return r.take_error();
    if (r->result_int() / 100 != 2) co_return ApiClient::error_from(*r);
    json j = json::parse(r->body(), nullptr, false);
    if (j.is_discarded()) co_return Error(Code::kInternal, "kilnd answered " + path + " with something that is not JSON");
    co_return j;
  }

  void finish(Status s) {
    if (finished) return;
    finished = true;
    result.status = std::move(s);
    io.stop();
  }

  asio::awaitable<void> watch() {
    const std::string base = spec.kind == WaitSpec::Kind::kAllocations ? "/v1/allocations/" : "/v1/nodes/";
    while (!finished) {
      std::vector<json> views;
      bool read_all = true;
      for (const std::string& id : spec.ids) {
        Result<json> v = co_await fetch(base + id);
        if (!v) {
          if (SteadyClock::now() >= deadline) break;
          // A 404 or a refusal is final; a transport hiccup is retried.
          if (v.error().code != Code::kUnavailable && v.error().code != Code::kTimeout) {
            finish(v.take_error());
            co_return;
          }
          view->note("warning: " + v.error().message + " (retrying)");
          read_all = false;
          break;
        }
        views.push_back(std::move(*v));
      }
      if (read_all && views.size() == spec.ids.size()) {
        result.last = json(views);
        members.clear();
        for (const json& v : views)
          if (v.contains("nodes") && v["nodes"].is_array())
            for (const json& n : v["nodes"]) members.push_back(str(n, "id"));
        Judgement j = spec.kind == WaitSpec::Kind::kNode        ? judge_node(views[0], spec.goal)
                      : spec.kind == WaitSpec::Kind::kNodePower ? judge_node_power(views[0], spec.goal.at(0))
                                                                : judge_allocations(views, spec.goal.at(0));
        auto elapsed = std::chrono::duration_cast<std::chrono::milliseconds>(SteadyClock::now() - started);
        view->show(j.rows, elapsed);
        if (j.verdict == Verdict::kDone) {
          finish(ok_status());
          co_return;
        }
        if (j.verdict == Verdict::kFailed) {
          finish(Error(Code::kConflict, j.why));
          co_return;
        }
      }
      const auto now = SteadyClock::now();
      if (now >= deadline) {
        finish(Error(Code::kTimeout, "timed out after " + std::to_string(spec.timeout.count() / 1000) +
                                         "s; the operation goes on"));
        co_return;
      }
      if (dirty) {  // an event came while we were reading: look again at once
        dirty = false;
        continue;
      }
      wake.expires_at(std::min(deadline, now + poll));
      boost::system::error_code ec;
      co_await wake.async_wait(asio::redirect_error(asio::use_awaitable, ec));
      dirty = false;
    }
  }

  asio::awaitable<void> follow() {
    EventFollower follower(client, api.request_for(http::bhttp::verb::get, "/v1/events/stream"), std::nullopt);
    std::function<bool(const SseEvent&)> on_event = [this](const SseEvent& e) {
      bool ours = false;
      for (const std::string& id : spec.ids) ours = ours || e.data.find(id) != std::string::npos;
      for (const std::string& id : members) ours = ours || e.data.find(id) != std::string::npos;
      if (ours) {
        // Look now. The flag covers an event that arrives while the watcher
        // is reading (no timer to cancel then); several events coalesce.
        dirty = true;
        wake.cancel();
      }
      return !finished;
    };
    std::function<void(const std::string&)> on_drop = [this](const std::string& why) {
      view->note("event stream dropped: " + why);
    };
    co_await follower.run(on_event, on_drop);
  }

  WaitResult run() {
    signals.async_wait([this](const boost::system::error_code& ec, int) {
      if (ec) return;
      result.interrupted = true;
      finish(ok_status());
    });
    asio::co_spawn(io, follow(), asio::detached);
    asio::co_spawn(io, watch(), asio::detached);
    io.run();
    return std::move(result);
  }

  ApiClient& api;
  const WaitSpec& spec;
  asio::io_context io;
  http::HttpClient client;
  asio::steady_timer wake;
  asio::signal_set signals;
  std::unique_ptr<ProgressView> view;
  std::chrono::milliseconds poll;
  SteadyClock::time_point started;
  SteadyClock::time_point deadline;
  std::vector<std::string> members;
  bool finished = false;
  bool dirty = false;  // an event named what we wait on since the last look
  WaitResult result;
};

}  // namespace

WaitResult wait_for(ApiClient& api, const WaitSpec& spec, std::ostream& progress, bool tty, int width) {
  auto waiter = std::make_unique<Waiter>(api, spec, progress, tty, width);
  return waiter->run();
}

}  // namespace kiln::cli
