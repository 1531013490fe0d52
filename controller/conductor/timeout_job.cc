#include "controller/conductor/conductor_impl.h"

#include <algorithm>
#include <chrono>
#include <cstdio>

#include <boost/asio/post.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "controller/model/steps.h"

// The conductor's periodic job: failing nodes past their deadline, taking
// over what dead conductors left, adopting operations handed over by
// another instance. It used to wake every timeout_check_interval (2 s) and
// ask the store each time; now it sleeps until something can be due:
//
//  - the earliest deadline. After each deadline sweep it reads the next
//    deadline in the store (a min() over the partial deadline index), and
//    every node an operation of this process writes or reads brings its own
//    deadline (note_deadline): entering a transient state is a write, and
//    an operation resumed or adopted here reads its node first, so a
//    deadline written by another instance is learnt too. Only a deadline
//    sooner than the one the loop sleeps for wakes it, once.
//  - a membership view change (Membership::on_change): a conductor died,
//    stopped or joined, or this one acts again. Ownership may have moved, so
//    a full pass runs: late nodes, the next deadline re-read, takeover,
//    adoption. That is when takeover has work; between changes it had none
//    (recovery.cc skips it in memory while no conductor has died).
//  - between conductors sharing a store, the adoption pass every
//    timeout_check_interval: the safety net of kick() for an event missed.
//    A sole kilnd (SQLite) has no peers and no such pass.
//  - full_pass_interval (60 s) at most, for whatever wake-up was missed: a
//    deadline written by another instance that no operation here reads
//    before it passes, a takeover whose view change arrived while a pass
//    failed.
// A pass whose store read fails is tried again after timeout_check_interval.
// So an idle conductor with nothing in a transient state makes two cheap
// indexed reads a minute (a sole kilnd) instead of a full-row query every
// 2 s.
//
// The loop and its timer live on job_strand; wake-ups (from any thread) set
// what is due and post the timer's cancel there, as the allocation engine
// does, so a wake-up cannot be lost between the loop's look and its wait.

namespace kiln {

namespace {

// Late nodes read per store call; a full batch is followed at once by another.
constexpr int kLateBatch = 500;

// "1800s", or "0.3s" below ten seconds where the fraction matters.
std::string format_duration(int64_t ms) {
  if (ms % 1000 == 0 || ms >= 10000) return std::to_string(ms / 1000) + "s";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1fs", static_cast<double>(ms) / 1000.0);
  return buf;
}

}  // namespace

asio::awaitable<Conductor::Impl::LateNodes> Conductor::Impl::check_timeouts(int64_t now_ms) {
  ++job_store_calls;
  auto late = co_await db.run([&] { return store.nodes_past_deadline(now_ms, kLateBatch); });
  if (!late) {
    log.warn("timeout check failed", {{"error", late.error().message}});
    co_return LateNodes::kFailed;
  }
  bool wrote = false;
  for (const Node& n : *late) {
    if (!is_transient(n.provision_state)) continue;
    if (!owns(ownership_key(n))) continue;  // its owner's sweep fails it
    const std::string after = format_duration(timeout_ms(n.provision_state));
    std::string reason = late_step_reason(n.provision_state, n.provision_step, after);
    if (reason.empty())
      reason = "timed out after " + after + " in " + std::string(to_string(n.provision_state)) + " (step " +
               n.provision_step + ")";
    const bool w = co_await fail_transient(n, "timeout", reason);
    if (w) {
      wrote = true;
      holds.taken(n.id);
      log.warn("operation timed out", {{"node", n.id}, {"reason", reason}});
      count(std::string(to_string(n.provision_state)), "timeout");
    }
  }
  // A full batch of which nothing was ours to fail would read the same
  // batch again: more only when this one moved something.
  co_return late->size() == static_cast<std::size_t>(kLateBatch) && wrote ? LateNodes::kMore : LateNodes::kDone;
}

asio::awaitable<void> Conductor::Impl::deadline_pass(bool in_loop) {
  for (;;) {
    // Forgotten before the reads: a deadline noted from here on lowers it
    // again, and the one read below is kept only if it is sooner.
    deadline_due.store(kNoDeadline);
    const int64_t now = clock.now_ms();
    const LateNodes late = co_await check_timeouts(now);
    if (late == LateNodes::kMore && !stopped) continue;
    int64_t due = now + opt.timeout_check_interval.count();  // a retry, unless the read below succeeds
    if (late == LateNodes::kDone) {
      ++job_store_calls;
      Result<std::optional<int64_t>> next = co_await db.run([&] { return store.next_deadline(now); });
      if (next) due = next->value_or(kNoDeadline);
      else log.warn("next deadline not read", {{"error", next.error().message}});
    }
    lower_deadline_due(due, !in_loop);
    co_return;
  }
}

void Conductor::Impl::lower_deadline_due(int64_t due_ms, bool wake) {
  int64_t cur = deadline_due.load();
  while (due_ms < cur) {
    if (deadline_due.compare_exchange_weak(cur, due_ms)) {
      if (wake) wake_job();
      return;
    }
  }
}

void Conductor::Impl::note_deadline(int64_t deadline_ms) {
  if (deadline_ms > 0) lower_deadline_due(deadline_ms, true);
}

void Conductor::Impl::membership_changed() {
  view_changed = true;
  wake_job();
}

void Conductor::Impl::wake_job() {
  asio::post(job_strand, [self = shared_from_this()] { self->timeout_timer.cancel(); });
}

asio::awaitable<void> Conductor::Impl::timeout_loop() {
  using steady = std::chrono::steady_clock;
  const bool peers = opt.membership != nullptr && !opt.membership->sole();
  const auto retry = opt.timeout_check_interval;
  // start() ran the first deadline pass and the takeover: the loop begins
  // with a plan.
  steady::time_point full_at = steady::now() + opt.full_pass_interval;
  steady::time_point adopt_at = steady::now() + retry;
  while (!stopped) {
    const steady::time_point now = steady::now();
    const bool full = view_changed.exchange(false) || now >= full_at;
    const bool deadlines = full || deadline_due.load() < clock.now_ms();
    const bool adopt = peers && (full || now >= adopt_at);
    try {
      if (deadlines) co_await deadline_pass(true);
      if (full) {
        // The takeover pass reads the store only while a conductor that
        // died since this one started is listed (recovery.cc).
        Status t = co_await take_over(false);
        full_at = now + (t ? opt.full_pass_interval : retry);
        if (!t) log.warn("takeover pass failed", {{"error", t.error().message}});
      }
      if (adopt) {
        co_await adopt_handed_over();
        adopt_at = steady::now() + retry;
      }
    } catch (const std::exception& e) {
      log.error("timeout check crashed", {{"error", e.what()}});
      full_at = now + retry;
    }
    // On the strand from here to the start of the wait: a wake-up's cancel
    // runs either before this look or after the wait began.
    if (stopped) break;
    if (view_changed) continue;
    steady::time_point wake = peers ? std::min(full_at, adopt_at) : full_at;
    const int64_t due = deadline_due.load();
    if (due != kNoDeadline) {
      // Late once the clock is past it: wake on the millisecond after.
      const int64_t in_ms = std::clamp<int64_t>(due + 1 - clock.now_ms(), 0, opt.full_pass_interval.count());
      wake = std::min(wake, steady::now() + std::chrono::milliseconds(in_ms));
    }
    timeout_timer.expires_at(wake);
    boost::system::error_code ec;
    co_await timeout_timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
  }
}

asio::awaitable<void> Conductor::Impl::sweep() {
  co_await deadline_pass(false);
  Status t = co_await take_over(false);
  if (!t) log.warn("takeover pass failed", {{"error", t.error().message}});
  if (opt.membership != nullptr && !opt.membership->sole()) co_await adopt_handed_over();
}

}  // namespace kiln
