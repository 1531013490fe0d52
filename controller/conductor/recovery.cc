#include "controller/conductor/conductor_impl.h"

#include <functional>
#include <map>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>

#include "common/ids.h"
#include "controller/model/event_types.h"

// Taking over nodes in flight whose operation's runner is gone: a previous
// process of this kilnd (restart) or another conductor that stopped or went
// silent (takeover). Both are one path: the runner is judged from the
// reservation's prefix and the current membership view, and only the words
// of the reason differ. Every write is conditional on the old reservation,
// so a node is taken over once whoever else tries at the same moment.

namespace kiln {

namespace {

// The detail of a resumed operation's event (JSON built outside the
// coroutine: docs/coroutines.md).
nlohmann::json resumed_detail(const std::string& op, const Node& n, const std::string& cause) {
  return {{"op", op}, {"previous_op", n.reservation}, {"step", n.provision_step}, {"cause", cause}};
}

// "op" names the operation this event ends, as the runner's own
// power.transition / power.failed would have: a reader that joins each
// power.requested to its result by op (one result per op) finds the takeover
// too. previous_op says the same, kept for readers of the takeover shape.
nlohmann::json power_cleared_detail(const std::string& reason, const Node& n) {
  return {{"reason", reason}, {"op", n.reservation}, {"previous_op", n.reservation}};
}

// The registrations as the store has them now, by id.
using Registrations = std::map<std::string, ConductorRecord, std::less<>>;

// Why the runner is gone, as the opening words of the reasons: "kilnd
// restarted" when it was this process's previous incarnation (the same host
// and API URL, or any other registration when this kilnd is the store's
// only one) or is unknown (an operation id without a conductor, from before
// conductors existed, or a registration already forgotten); otherwise the
// conductor by id and host. The host alone is not enough: several
// instances may share a machine on different ports.
std::string cause_of(const Registrations& regs, const std::string& self, const std::string& runner, bool sole) {
  auto gone = regs.find(runner);
  auto me = regs.find(self);
  const bool previous = sole || (me != regs.end() && gone != regs.end() && gone->second.host == me->second.host &&
                                 gone->second.api_url == me->second.api_url);
  if (runner.empty() || gone == regs.end() || previous) return "kilnd restarted";
  return "conductor " + gone->second.id + " (" + gone->second.host + ")" +
         (gone->second.stopped_at != 0 ? " stopped" : " stopped heartbeating");
}

}  // namespace

asio::awaitable<Status> Conductor::Impl::take_over(bool at_start) {
  std::shared_ptr<const RingView> view = opt.membership ? opt.membership->view() : nullptr;
  if (view == nullptr && !at_start) co_return ok_status();
  // Between starts, only a conductor that died since this one started can
  // have left operations behind that the start-up pass did not see: while
  // there is none, the pass (a read of every node in flight) is skipped. So
  // a lone kilnd, whose previous processes are all dead before it starts,
  // never reads them again; after a death the pass reads them on every view
  // change and full pass (timeout_job.cc) for as long as the dead
  // registration is listed (an hour at most).
  if (!at_start) {
    bool any_dead = false;
    for (const ConductorState& c : view->conductors()) {
      if (c.alive) continue;
      const int64_t died = c.record.stopped_at != 0 ? c.record.stopped_at
                                                    : c.record.last_heartbeat_at + view->timeout_ms();
      any_dead |= died >= started_at_ms;
    }
    if (!any_dead) co_return ok_status();
  }
  ++job_store_calls;
  auto nodes = co_await db.run([&] { return store.nodes_in_flight(); });
  if (!nodes) co_return nodes.take_error();
  // Whether a runner lives is judged from the registrations read *after*
  // the nodes, not from the view: a conductor registers before it takes any
  // reservation, so every runner named by a node read above is in this list
  // unless it is long gone. The view may be a heartbeat old and miss a
  // conductor that just joined and resumed nodes under its own id; judged
  // by the view, that conductor would look unknown, hence gone, and its
  // fresh operations would be taken over again.
  Registrations regs;
  if (view != nullptr) {
    ++job_store_calls;
    auto rows = co_await db.run([&] { return store.list_conductors(); });
    if (!rows) co_return rows.take_error();
    for (ConductorRecord& r : *rows) regs.emplace(r.id, std::move(r));
  }
  const int64_t now = clock.now_ms();
  auto alive = [&](const std::string& runner) {
    auto r = regs.find(runner);
    return r != regs.end() && r->second.stopped_at == 0 && now - r->second.last_heartbeat_at <= view->timeout_ms();
  };
  int resumed = 0, failed = 0, power = 0;
  bool unjudged = false;  // a node skipped because this conductor was not acting
  for (const Node& n : *nodes) {
    const std::string runner = runner_of(n.reservation);
    if (view != nullptr) {
      // Ownership from the view published now, not the one the pass began
      // with: acting() is judged against the clock (own heartbeat + timeout),
      // and a pass that writes many nodes (a dead conductor's hundred, on a
      // busy store) outlasts that window of the view it captured. Judged by
      // it, every later node looked another's and waited for the next full
      // pass, a minute away.
      std::shared_ptr<const RingView> cur = opt.membership->view();
      if (!cur->acting()) {
        unjudged = true;
        continue;
      }
      if (!cur->is_mine(ownership_key(n))) continue;
      // Running here, or on a live conductor: not ours to touch.
      if (runner == view->self() || (!runner.empty() && alive(runner))) continue;
    }
    std::string cause = cause_of(regs, view != nullptr ? view->self() : std::string(), runner,
                                 opt.membership == nullptr || opt.membership->sole());
    std::string outcome = cause == "kilnd restarted" ? "restart" : "takeover";
    co_await take_over_node(n, cause, outcome, resumed, failed, power);
  }
  if (at_start || resumed + failed + power > 0)
    log.info(at_start ? "recovery done" : "takeover done", {{"resumed", std::to_string(resumed)},
                                                             {"failed", std::to_string(failed)},
                                                             {"power_cleared", std::to_string(power)}});
  // Nodes left unjudged while this conductor's own heartbeat was late: the
  // caller tries again after timeout_check_interval, not at the full pass.
  if (unjudged && !at_start) co_return Error(Code::kUnavailable, "this conductor was not acting; nodes in flight left unjudged");
  co_return ok_status();
}

asio::awaitable<void> Conductor::Impl::take_over_node(Node n, std::string cause, std::string outcome, int& resumed,
                                                      int& failed, int& power) {
  if (is_transient(n.provision_state)) {
    const TransientInfo& info = transient_info(n.provision_state);
    if (info.on_restart == RestartPolicy::kResume && !n.reservation.empty()) {
      std::string op_id = new_op_id();
      EventDraft ev;
      ev.type = event_type::kProvisionResumed;
      ev.node_id = n.id;
      ev.from_state = ev.to_state = std::string(to_string(n.provision_state));
      ev.detail = resumed_detail(op_id, n, cause);
      std::vector<EventDraft> events = {ev};
      auto w = co_await write(n.id, held_by(n.reservation, n.provision_state),
                              [&](Node& m) {
                                m.reservation = op_id;
                                if (m.deadline_at == 0)
                                  m.deadline_at = clock.now_ms() + timeout_ms(m.provision_state);
                                return ok_status();
                              }, std::move(events));
      if (w) {
        ++resumed;
        log.info("operation resumed", {{"node", n.id}, {"op", op_id}, {"previous_op", n.reservation}, {"cause", cause}});
        spawn_operation(op_id, n.id, std::string(to_string(n.provision_state)), "");
      }
      co_return;
    }
    std::string reason = cause + " while the node was " + std::string(to_string(n.provision_state)) + " (step " +
                         n.provision_step + "); the operation was interrupted";
    const bool w = co_await fail_transient(n, outcome, reason);
    if (w) {
      ++failed;
      holds.taken(n.id);
    }
    co_return;
  }
  // A stable node still holding a reservation was in a power action or
  // an on-demand validation (which records its step).
  std::string reason = n.provision_step.empty()
                           ? cause + " during a power action; the power state is unknown until re-read"
                           : cause + " during an on-demand validation (step " + n.provision_step +
                                 "); no report was stored and the power state is unknown until re-read";
  EventDraft ev;
  ev.type = event_type::kPowerFailed;
  ev.node_id = n.id;
  ev.from_state = std::string(to_string(n.power_state));
  ev.to_state = "unknown";
  ev.detail = power_cleared_detail(reason, n);
  std::vector<EventDraft> events = {ev};
  auto w = co_await write(n.id, held_by(n.reservation),
                          [&](Node& m) {
                            m.reservation.clear();
                            m.provision_step.clear();
                            m.target_power_state.reset();
                            m.power_state = PowerState::kUnknown;
                            m.last_error = reason;
                            return ok_status();
                          }, std::move(events));
  if (w) ++power;
}

asio::awaitable<void> Conductor::Impl::adopt_handed_over() {
  if (opt.membership == nullptr || stopped) co_return;
  const std::string prefix = self_id() + "/";
  ++job_store_calls;
  auto nodes = co_await db.run([&] { return store.nodes_held_by_prefix(prefix); });
  if (!nodes) {
    log.warn("adoption pass failed", {{"error", nodes.error().message}});
    co_return;
  }
  for (const HeldNode& n : *nodes) {
    // Power actions and on-demand validations are never handed over; a
    // provisioning operation named for this conductor and not running here
    // was handed to it (spawn_operation refuses one that runs).
    if (!is_transient(n.provision_state)) continue;
    if (spawn_operation(n.reservation, n.node_id, std::string(to_string(n.provision_state)), ""))
      log.info("operation adopted", {{"node", n.node_id}, {"op", n.reservation}});
  }
}

asio::awaitable<bool> Conductor::Impl::handover_published() {
  // An event-driven pass used to read the nodes this conductor holds at
  // every event anywhere; on a table PostgreSQL has no statistics for yet
  // (a database minutes old, a fleet being enrolled) that read is a scan of
  // every node, once per create. The events since the last look are a range
  // of the feed's index instead, and name every handover.
  constexpr int kPage = 256;
  constexpr int kMostRead = 4 * kPage;  // beyond that, reading the nodes is cheaper
  const std::string prefix = self_id() + "/";
  if (handover_checked_seq >= 0) {
    int64_t since = handover_checked_seq;
    for (int read = 0; read < kMostRead; read += kPage) {
      ++job_store_calls;
      auto page = co_await db.run([&] { return store.list_events(since, kPage, std::nullopt, std::nullopt); });
      if (!page) co_return true;
      for (const EventRecord& e : *page) {
        since = e.seq;
        auto op = e.detail.find("op");
        if (op != e.detail.end() && op->is_string() && op->get_ref<const std::string&>().starts_with(prefix)) {
          handover_checked_seq = since;
          co_return true;
        }
      }
      handover_checked_seq = since;
      if (static_cast<int>(page->size()) < kPage) co_return false;
    }
  }
  // The first look, or too many to look through: the nodes tell. Anything
  // handed over up to `last` is in the store before they are read; what is
  // published later is in the events read next time.
  ++job_store_calls;
  Result<int64_t> last = co_await db.run([&] { return store.last_event_seq(); });
  handover_checked_seq = last ? *last : -1;
  co_return true;
}

void Conductor::Impl::kick_adoption() {
  if (opt.membership == nullptr || opt.membership->sole() || stopped) return;
  adopt_again = true;
  if (adopt_running.exchange(true)) return;  // the running pass loops once more
  auto self = shared_from_this();
  asio::co_spawn(
      io,
      [self]() -> asio::awaitable<void> {
        for (;;) {
          while (self->adopt_again.exchange(false) && !self->stopped) {
            try {
              if (co_await self->handover_published()) co_await self->adopt_handed_over();
            } catch (const std::exception& e) {
              self->log.error("adoption pass crashed", {{"error", e.what()}});
            }
          }
          self->adopt_running = false;
          // A kick between the loop's last check and the line above found
          // the pass still running: take its turn.
          if (!self->adopt_again || self->adopt_running.exchange(true)) break;
        }
      },
      asio::detached);
}

}  // namespace kiln
