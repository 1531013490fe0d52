#include "controller/conductor/conductor.h"

#include <cstdio>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "common/ids.h"
#include "controller/model/steps.h"
#include "controller/conductor/validation_runs.h"
#include "controller/conductor/workflow.h"

namespace kiln {

namespace {

nlohmann::json actor_json(const Actor& a) {
  return {{"actor", a.name}, {"actor_id", a.token_id}, {"role", a.role}};
}

std::string join_verbs(const std::vector<ProvisionEvent>& verbs) {
  std::string out;
  for (ProvisionEvent v : verbs) {
    if (!out.empty()) out += ", ";
    out += to_string(v);
  }
  return out;
}

// "1800s", or "0.3s" below ten seconds where the fraction matters.
std::string format_duration(int64_t ms) {
  if (ms % 1000 == 0 || ms >= 10000) return std::to_string(ms / 1000) + "s";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1fs", static_cast<double>(ms) / 1000.0);
  return buf;
}

// Conditions, built outside coroutine bodies: GCC 12 rejects designated
// initialisers inside co_await arguments ("array used as initializer").
NodeCondition held_by(const std::string& op, std::optional<ProvisionState> state = std::nullopt) {
  NodeCondition c;
  c.reservation = op;
  c.provision_state = state;
  return c;
}
NodeCondition in_state(ProvisionState state) {
  NodeCondition c;
  c.provision_state = state;
  return c;
}

}  // namespace

struct Conductor::Impl : std::enable_shared_from_this<Conductor::Impl> {
  Impl(asio::io_context& io_, NodeStore& store_, BlockingPool& db_, const DriverRegistry& drivers_,
       const SecretBox& secrets_, const Clock& clock_, ConductorOptions opt_, Logger log_)
      : io(io_), store(store_), db(db_), drivers(drivers_), secrets(secrets_), clock(clock_),
        opt(std::move(opt_)), log(std::move(log_)), timeout_timer(io_),
        power_sync(io_, store_, db_, drivers_, secrets_, opt.power_sync, log.with("job", "power_sync")) {}

  asio::io_context& io;
  NodeStore& store;
  BlockingPool& db;
  const DriverRegistry& drivers;
  const SecretBox& secrets;
  const Clock& clock;
  ConductorOptions opt;
  Logger log;
  asio::steady_timer timeout_timer;
  PowerSync power_sync;
  std::atomic<bool> stopped{false};
  std::atomic<std::size_t> running{0};
  mutable std::mutex counts_mu;
  std::map<std::pair<std::string, std::string>, uint64_t> counts;

  // Whether each running operation still holds its node, by node id: an
  // abort or a timeout taken in this process clears it at once, so waits on
  // the node's agent (HeldCheck) end within a poll instead of at the deadline.
  struct HeldFlag {
    std::string op_id;
    std::atomic<bool> held{true};
    std::atomic<int64_t> last_read_ms{0};  // steady clock: the last store check
  };
  std::mutex held_mu;
  std::map<std::string, std::shared_ptr<HeldFlag>> held_flags;

  std::shared_ptr<HeldFlag> hold(const std::string& node_id, const std::string& op_id) {
    auto f = std::make_shared<HeldFlag>();
    f->op_id = op_id;
    std::lock_guard<std::mutex> l(held_mu);
    held_flags[node_id] = f;
    return f;
  }
  void unhold(const std::string& node_id, const std::shared_ptr<HeldFlag>& f) {
    std::lock_guard<std::mutex> l(held_mu);
    auto it = held_flags.find(node_id);
    if (it != held_flags.end() && it->second == f) held_flags.erase(it);
  }
  // The node was taken from whatever operation held it (abort, timeout).
  void taken(const std::string& node_id) {
    std::lock_guard<std::mutex> l(held_mu);
    auto it = held_flags.find(node_id);
    if (it != held_flags.end()) it->second->held = false;
  }
  // Removes the flag when the coroutine frame holding it ends, on any path.
  struct HoldGuard {
    Impl* impl;
    std::string node_id;
    std::shared_ptr<HeldFlag> flag;
    ~HoldGuard() { impl->unhold(node_id, flag); }
  };

  // Cheap check for long waits: the in-memory flag, and the store at most
  // every 2 s in case the node was taken by something this process did not see.
  asio::awaitable<bool> still_held(std::shared_ptr<HeldFlag> flag, std::string node_id, ProvisionState state) {
    if (stopped || !flag->held) co_return false;
    int64_t now = std::chrono::duration_cast<std::chrono::milliseconds>(
                      std::chrono::steady_clock::now().time_since_epoch()).count();
    if (now - flag->last_read_ms.load() < 2000) co_return true;
    flag->last_read_ms = now;
    auto n = co_await db.run([&] { return store.get_node(node_id); });
    if (n && (n->reservation != flag->op_id || n->provision_state != state)) flag->held = false;
    co_return flag->held.load();
  }

  int64_t timeout_ms(ProvisionState s) const {
    auto it = opt.timeouts.find(s);
    return (it != opt.timeouts.end() ? it->second : opt.default_timeout).count();
  }

  void count(const std::string& op, const std::string& result) {
    std::lock_guard<std::mutex> l(counts_mu);
    ++counts[{op, result}];
  }

  asio::awaitable<Result<Node>> write(std::string id, NodeCondition cond, std::function<Status(Node&)> mutate,
                                      std::vector<EventDraft> events) {
    co_return co_await db.run([&] { return store.update_node_if(id, cond, mutate, events); });
  }

  // Enters `to` (transient or stable) from inside a mutate function.
  void enter(Node& n, ProvisionState to) {
    n.provision_state = to;
    if (is_transient(to)) {
      n.provision_step = std::string(kStartingStep);
      n.deadline_at = clock.now_ms() + timeout_ms(to);
    } else {
      n.provision_step.clear();
      n.deadline_at = 0;
      n.reservation.clear();
      n.target_provision_state.reset();
    }
  }

  static EventDraft transition_event(const Node& before, ProvisionState to, nlohmann::json detail,
                                     const std::string& request_id) {
    EventDraft e;
    e.type = "provision.transition";
    e.node_id = before.id;
    e.from_state = std::string(to_string(before.provision_state));
    e.to_state = std::string(to_string(to));
    e.detail = std::move(detail);
    e.request_id = request_id;
    return e;
  }

  void spawn_operation(std::string op_id, std::string node_id, std::string kind, std::string request_id) {
    auto self = shared_from_this();
    asio::co_spawn(
        io,
        [self, op_id, node_id, kind, request_id]() -> asio::awaitable<void> {
          self->running++;
          std::string crash;
          try {
            co_await self->run_operation(op_id, node_id, kind, request_id);
          } catch (const std::exception& e) {
            crash = e.what();
          }
          if (!crash.empty()) {
            // A bug, not a node problem: fail the node with the reason rather
            // than leave it held until its deadline.
            self->log.error("operation crashed", {{"node", node_id}, {"op", op_id}, {"error", crash}});
            co_await self->fail_held(op_id, node_id, "internal error: " + crash, request_id);
            self->count(kind, "failure");
          }
          self->running--;
        },
        asio::detached);
  }

  // Moves a node held by `op_id` to its failed state (used when an operation
  // crashes). Quietly does nothing when the node is no longer held by it.
  asio::awaitable<void> fail_held(std::string op_id, std::string node_id, std::string reason,
                                  std::string request_id) {
    auto n = co_await db.run([&] { return store.get_node(node_id); });
    if (!n || n->reservation != op_id || !is_transient(n->provision_state)) co_return;
    ProvisionState to = failed_state(n->provision_state);
    Node before = *n;
    std::vector<EventDraft> events = {transition_event(before, to, nlohmann::json{{"outcome", "fail"}, {"reason", reason}}, request_id)};
    auto w = co_await write(node_id, held_by(op_id, before.provision_state),
                            [&](Node& m) {
                              enter(m, to);
                              m.last_error = reason;
                              return ok_status();
                            }, std::move(events));
    (void)w;
  }

  // Drives a node held by `op_id` from its current transient state until it
  // reaches a stable state or the operation loses the node.
  asio::awaitable<void> run_operation(std::string op_id, std::string node_id, std::string kind,
                                      std::string request_id) {
    Workflow wf(drivers, secrets, log.with("node", node_id).with("op", op_id));
    HoldGuard guard{this, node_id, hold(node_id, op_id)};
    for (;;) {
      if (stopped) co_return;
      auto cur = co_await db.run([&] { return store.get_node(node_id); });
      if (!cur || cur->reservation != op_id || !is_transient(cur->provision_state)) {
        count(kind, "aborted");
        co_return;
      }
      Node before = *cur;
      ProvisionState state = before.provision_state;

      // Progress is shown on the node; a lost reservation stops us here too.
      SetStep set_step = step_recorder(node_id, op_id, state);

      std::shared_ptr<HeldFlag> flag = guard.flag;
      HeldCheck held_check = [this, flag, node_id, state]() { return still_held(flag, node_id, state); };

      // burning_in / validating: the node's profile goes to the driver (the
      // agent) and to the gate.
      std::optional<ValidationPhase> vphase = validation_phase_for(state);
      nlohmann::json profile_doc;
      if (vphase) {
        Result<nlohmann::json> doc = co_await db.run([&] { return load_profile_doc(store, before); });
        if (doc) {
          profile_doc = *doc;
          wf.set_profile(profile_doc);
        } else {
          std::string problem = doc.error().message;
          wf.set_profile(nlohmann::json(), problem);
        }
      }

      StepOutcome out = co_await wf.run_state(before, state, set_step, held_check);
      if (vphase) {
        // Every attempt's report is kept, even when the node was lost meanwhile.
        for (std::size_t i = 0; i < out.validations.size(); ++i) {
          ValidationRecord rec = make_validation_record(before, vphase->plan, vphase->phase, static_cast<int>(i) + 1,
                                                        out.validations[i], profile_doc, clock.now_ms());
          std::vector<EventDraft> rec_events = {validation_event(before, rec, request_id)};
          Result<ValidationRecord> saved =
              co_await db.run([&] { return store.record_validation(rec, rec_events); });
          if (!saved) log.warn("validation report not stored", {{"node", node_id}, {"error", saved.error().message}});
        }
      }
      if (out.lost || stopped) {
        // Lost: someone else moved the node. Stopped: kilnd is shutting down;
        // the node keeps its reservation and the next start resumes it.
        count(kind, "aborted");
        co_return;
      }
      bool ok = out.status.ok();
      ProvisionEvent ev = ok ? ProvisionEvent::kDone : ProvisionEvent::kFail;
      auto to = next_state(state, ev);
      assert(to.has_value());
      nlohmann::json detail = {{"outcome", ok ? "done" : "fail"}, {"op", op_id}};
      if (!ok) detail["reason"] = out.status.error().message;
      if (!out.validation.is_null()) detail["validation"] = out.validation;
      if (!out.note.empty()) detail["note"] = out.note;
      // What inspection found, part by part, for holding against the profile
      // (the Redfish inventory carries its counts; inventory.h).
      if (out.inventory.is_object() && out.inventory.contains("counts")) {
        detail["inventory_counts"] = out.inventory["counts"];
      }
      std::vector<EventDraft> events = {transition_event(before, *to, detail, request_id)};
      auto w = co_await write(
          node_id, held_by(op_id, state),
          [&](Node& m) {
            enter(m, *to);
            if (!ok) m.last_error = out.status.error().message;
            if (!out.inventory.is_null()) m.inventory = out.inventory;
            if (out.power_state) m.power_state = *out.power_state;
            return ok_status();
          }, std::move(events));
      if (!w) {
        count(kind, "aborted");
        co_return;
      }
      log.info("provision transition", {{"node", node_id},
                                        {"from", std::string(to_string(state))},
                                        {"to", std::string(to_string(*to))},
                                        {"op", op_id}});
      if (!ok) {
        count(kind, "failure");
        co_return;
      }
      if (!is_transient(*to)) {
        count(kind, "success");
        co_return;
      }
    }
  }

  // On-demand validation (Conductor::validate_now; validation_runs.h).
  asio::awaitable<Result<Node>> validate_now(std::string node, std::string plan, Actor actor) {
    auto n = co_await db.run([&] { return store.get_node(node); });
    if (!n) co_return n.take_error();
    Node before = *n;
    Status allowed = on_demand_allowed(before, drivers.find(before.bmc.driver));
    if (!allowed) co_return allowed.take_error();
    Result<nlohmann::json> doc = co_await db.run([&] { return load_profile_doc(store, before); });
    if (!doc) co_return Error(Code::kConflict, doc.error().message);
    nlohmann::json profile_doc = *doc;
    std::string op_id = new_uuid();
    ProvisionState state = before.provision_state;
    EventDraft ev;
    ev.type = "validation.requested";
    ev.node_id = before.id;
    ev.detail = actor_json(actor);
    ev.detail["plan"] = plan;
    ev.detail["op"] = op_id;
    ev.request_id = actor.request_id;
    std::vector<EventDraft> events = {ev};
    auto w = co_await write(before.id, held_by(std::string(), state),
                            [&](Node& m) {
                              m.reservation = op_id;
                              return ok_status();
                            }, std::move(events));
    if (!w) co_return w;
    auto self = shared_from_this();
    std::string node_id = before.id;
    std::string request_id = actor.request_id;
    asio::co_spawn(
        io,
        [self, op_id, node_id, plan, profile_doc, request_id]() -> asio::awaitable<void> {
          self->running++;
          co_await self->run_on_demand(op_id, node_id, plan, profile_doc, request_id);
          self->running--;
        },
        asio::detached);
    co_return w;
  }

  // Records `step` on the node while `op_id` holds it (in `state`, when
  // given); false once the operation lost the node.
  SetStep step_recorder(std::string node_id, std::string op_id, std::optional<ProvisionState> state) {
    return [this, node_id, op_id, state](std::string step) -> asio::awaitable<bool> {
      auto w = co_await write(node_id, held_by(op_id, state),
                              [&](Node& m) {
                                m.provision_step = step;
                                return ok_status();
                              }, std::vector<EventDraft>());
      co_return w.ok();
    };
  }

  asio::awaitable<void> run_on_demand(std::string op_id, std::string node_id, std::string plan,
                                      nlohmann::json profile_doc, std::string request_id) {
    auto cur = co_await db.run([&] { return store.get_node(node_id); });
    if (!cur || cur->reservation != op_id) co_return;
    Node node = *cur;
    HoldGuard guard{this, node_id, hold(node_id, op_id)};
    Result<nlohmann::json> rep = Error(Code::kInternal, "validation did not run");
    const Driver* driver = drivers.find(node.bmc.driver);
    OnDemandOutcome ramdisk;
    try {
      if (driver != nullptr && driver->agent) {
        // Steps on the node, the same held check as a workflow's, and the
        // default state timeout for the whole run (a stable state has none).
        Workflow wf(drivers, secrets, log.with("node", node_id).with("op", op_id));
        wf.set_profile(profile_doc);
        SetStep set_step = step_recorder(node_id, op_id, std::nullopt);
        std::shared_ptr<HeldFlag> flag = guard.flag;
        ProvisionState state = node.provision_state;
        HeldCheck held_check = [this, flag, node_id, state]() { return still_held(flag, node_id, state); };
        std::chrono::milliseconds timeout = opt.default_timeout;
        ramdisk = co_await wf.run_on_demand(node, plan, set_step, held_check, timeout);
        rep = ramdisk.report;
      } else {
        rep = co_await run_validation_plan(drivers, secrets, node, plan, profile_doc);
      }
    } catch (const std::exception& e) {
      rep = Error(Code::kInternal, std::string("internal error: ") + e.what());
    }
    nlohmann::json report;
    if (rep) {
      report = *rep;
    } else {
      report = error_report(rep.error().message);
    }
    ValidationRecord rec = make_validation_record(node, plan, kPhaseOnDemand, 1, report, profile_doc, clock.now_ms());
    std::vector<EventDraft> rec_events = {validation_event(node, rec, request_id)};
    Result<ValidationRecord> saved = co_await db.run([&] { return store.record_validation(rec, rec_events); });
    if (!saved) log.warn("validation report not stored", {{"node", node_id}, {"error", saved.error().message}});
    std::vector<EventDraft> no_events;
    auto w = co_await write(node_id, held_by(op_id),
                            [&](Node& m) {
                              m.reservation.clear();
                              m.provision_step.clear();
                              if (ramdisk.power_state) m.power_state = *ramdisk.power_state;
                              if (!ramdisk.power_error.empty()) m.last_error = ramdisk.power_error;
                              return ok_status();
                            }, std::move(no_events));
    count("validate", !w ? "aborted" : (rec.result == "pass" ? "success" : "failure"));
  }

  // The agent writes the image to disk, so it must be a catalogued os image
  // (ramdisk images are what the agent itself boots). 400 naming /image.
  asio::awaitable<Status> check_os_image(std::string ref) {
    if (ref.empty()) co_return Error::invalid("/image", "is required to deploy this node");
    Result<Image> image = co_await db.run([&] { return store.get_image(ref); });
    if (!image) {
      if (image.error().code == Code::kNotFound) co_return Error::invalid("/image", "no such image: " + ref);
      co_return image.take_error();
    }
    if (image->kind != "os")
      co_return Error::invalid("/image", "must be an os image; " + ref + " is a " + image->kind + " image");
    if (!image->status.empty() && image->status != "ready")
      co_return Error::invalid("/image", "image " + ref + " is not ready (status " + image->status + ")");
    co_return ok_status();
  }

  asio::awaitable<Result<Node>> provision(std::string node, ProvisionEvent verb, ProvisionArgs args, Actor actor) {
    auto n = co_await db.run([&] { return store.get_node(node); });
    if (!n) co_return n.take_error();
    Node before = *n;
    ProvisionState from = before.provision_state;
    auto to = next_state(from, verb);
    if (!to) {
      auto allowed = allowed_verbs(from);
      std::string msg = "cannot " + std::string(to_string(verb)) + " a node in state " +
                        std::string(to_string(from));
      msg += allowed.empty() ? "; no verb is accepted in this state" : "; allowed: " + join_verbs(allowed);
      co_return Error(Code::kConflict, msg);
    }
    nlohmann::json detail = actor_json(actor);
    detail["verb"] = std::string(to_string(verb));

    if (verb == ProvisionEvent::kAbort) {
      std::string reason = "aborted by " + (actor.name.empty() ? actor.role : actor.name) + " in " +
                           std::string(to_string(from)) + " (step " + before.provision_step + ")";
      detail["reason"] = reason;
      std::vector<EventDraft> events = {transition_event(before, *to, detail, actor.request_id)};
      auto w = co_await write(before.id, in_state(from),
                              [&](Node& m) {
                                enter(m, *to);
                                m.last_error = reason;
                                return ok_status();
                              }, std::move(events));
      if (w) {
        taken(before.id);
        count("abort", "success");
      }
      co_return w;
    }

    if (before.maintenance && (verb == ProvisionEvent::kProvide || verb == ProvisionEvent::kDeploy))
      co_return Error(Code::kConflict, "node is in maintenance" +
                                           (before.maintenance_reason.empty() ? std::string()
                                                                              : ": " + before.maintenance_reason));
    if (verb == ProvisionEvent::kDeploy) {
      const Driver* d = drivers.find(before.bmc.driver);
      if (d != nullptr && d->agent) {
        std::string image = args.image;
        Status usable = co_await check_os_image(image);
        if (!usable) co_return usable.take_error();
      }
      detail["image"] = args.image;
      if (!args.allocation.empty()) detail["allocation"] = args.allocation;
    }

    std::string op_id = is_transient(*to) ? new_uuid() : std::string();
    if (!op_id.empty()) detail["op"] = op_id;
    std::vector<EventDraft> events = {transition_event(before, *to, detail, actor.request_id)};
    auto w = co_await write(before.id, held_by(std::string(), from),
                            [&](Node& m) {
                              enter(m, *to);
                              if (!op_id.empty()) {
                                m.reservation = op_id;
                                m.target_provision_state = final_target(*to);
                                m.last_error.clear();
                              }
                              if (verb == ProvisionEvent::kDeploy) {
                                m.image = args.image;
                                m.allocation = args.allocation;
                              }
                              // Back towards the pool: no longer part of an allocation.
                              if (verb == ProvisionEvent::kUndeploy || verb == ProvisionEvent::kProvide ||
                                  verb == ProvisionEvent::kManage)
                                m.allocation.clear();
                              return ok_status();
                            }, std::move(events));
    if (!w) co_return w;
    log.info("provision verb", {{"node", before.id},
                                {"verb", std::string(to_string(verb))},
                                {"from", std::string(to_string(from))},
                                {"to", std::string(to_string(*to))},
                                {"request_id", actor.request_id}});
    if (!op_id.empty()) {
      spawn_operation(op_id, before.id, std::string(to_string(verb)), actor.request_id);
    } else {
      count(std::string(to_string(verb)), "success");
    }
    co_return w;
  }

  asio::awaitable<Result<Node>> power(std::string node, PowerAction action, Actor actor) {
    auto n = co_await db.run([&] { return store.get_node(node); });
    if (!n) co_return n.take_error();
    std::string op_id = new_uuid();
    PowerState target = power_action_result(action);
    EventDraft ev;
    ev.type = "power.requested";
    ev.node_id = n->id;
    ev.from_state = std::string(to_string(n->power_state));
    ev.to_state = std::string(to_string(target));
    ev.detail = actor_json(actor);
    ev.detail["action"] = std::string(to_string(action));
    ev.detail["op"] = op_id;
    ev.request_id = actor.request_id;
    std::vector<EventDraft> events = {ev};
    auto w = co_await write(n->id, held_by(std::string()),
                            [&](Node& m) {
                              m.reservation = op_id;
                              m.target_power_state = target;
                              return ok_status();
                            }, std::move(events));
    if (!w) co_return w;
    auto self = shared_from_this();
    std::string node_id = n->id;
    std::string request_id = actor.request_id;
    asio::co_spawn(
        io,
        [self, op_id, node_id, action, request_id]() -> asio::awaitable<void> {
          self->running++;
          co_await self->run_power(op_id, node_id, action, request_id);
          self->running--;
        },
        asio::detached);
    co_return w;
  }

  asio::awaitable<void> run_power(std::string op_id, std::string node_id, PowerAction action,
                                  std::string request_id) {
    std::string kind = "power_" + std::string(to_string(action));
    auto cur = co_await db.run([&] { return store.get_node(node_id); });
    if (!cur || cur->reservation != op_id) co_return;
    Workflow wf(drivers, secrets, log.with("node", node_id).with("op", op_id));
    Result<PowerState> r = PowerState::kUnknown;
    try {
      r = co_await wf.power(*cur, action);
    } catch (const std::exception& e) {
      r = Error(Code::kInternal, std::string("internal error: ") + e.what());
    }
    Node before = *cur;
    EventDraft ev;
    ev.type = r ? "power.transition" : "power.failed";
    ev.node_id = node_id;
    ev.from_state = std::string(to_string(before.power_state));
    ev.to_state = std::string(to_string(r ? *r : before.power_state));
    ev.detail = {{"action", std::string(to_string(action))}, {"op", op_id}};
    if (!r) ev.detail["reason"] = r.error().message;
    ev.request_id = request_id;
    std::vector<EventDraft> events = {ev};
    auto w = co_await write(node_id, held_by(op_id),
                            [&](Node& m) {
                              m.reservation.clear();
                              m.target_power_state.reset();
                              if (r) {
                                m.power_state = *r;
                                m.last_error.clear();
                              } else {
                                m.last_error = r.error().message;
                              }
                              return ok_status();
                            }, std::move(events));
    count(kind, !w ? "aborted" : (r ? "success" : "failure"));
  }

  // Moves every node past its deadline to its failed state.
  asio::awaitable<void> check_timeouts() {
    auto late = co_await db.run([&] { return store.nodes_past_deadline(clock.now_ms(), 500); });
    if (!late) {
      log.warn("timeout check failed", {{"error", late.error().message}});
      co_return;
    }
    for (const Node& n : *late) {
      if (!is_transient(n.provision_state)) continue;
      const ProvisionState to = failed_state(n.provision_state);
      std::string reason = "timed out after " + format_duration(timeout_ms(n.provision_state)) + " in " +
                           std::string(to_string(n.provision_state)) + " (step " + n.provision_step + ")";
      std::vector<EventDraft> events = {transition_event(n, to, nlohmann::json{{"outcome", "timeout"}, {"reason", reason}}, "")};
      auto w = co_await write(n.id, held_by(n.reservation, n.provision_state),
                              [&](Node& m) {
                                enter(m, to);
                                m.last_error = reason;
                                return ok_status();
                              }, std::move(events));
      if (w) {
        taken(n.id);
        log.warn("operation timed out", {{"node", n.id}, {"reason", reason}});
        count(std::string(to_string(n.provision_state)), "timeout");
      }
    }
  }

  asio::awaitable<void> timeout_loop() {
    while (!stopped) {
      timeout_timer.expires_after(opt.timeout_check_interval);
      boost::system::error_code ec;
      co_await timeout_timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
      if (stopped) break;
      try {
        co_await check_timeouts();
      } catch (const std::exception& e) {
        log.error("timeout check crashed", {{"error", e.what()}});
      }
    }
  }

  // Start-up recovery; see the header.
  asio::awaitable<Status> recover() {
    auto nodes = co_await db.run([&] { return store.nodes_in_flight(); });
    if (!nodes) co_return nodes.take_error();
    int resumed = 0, failed = 0, power = 0;
    for (const Node& n : *nodes) {
      if (is_transient(n.provision_state)) {
        const TransientInfo& info = transient_info(n.provision_state);
        if (info.on_restart == RestartPolicy::kResume && !n.reservation.empty()) {
          std::string op_id = new_uuid();
          EventDraft ev;
          ev.type = "provision.resumed";
          ev.node_id = n.id;
          ev.from_state = ev.to_state = std::string(to_string(n.provision_state));
          ev.detail = {{"op", op_id}, {"previous_op", n.reservation}, {"step", n.provision_step}};
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
            spawn_operation(op_id, n.id, std::string(to_string(n.provision_state)), "");
          }
          continue;
        }
        std::string reason = "kilnd restarted while the node was " + std::string(to_string(n.provision_state)) +
                             " (step " + n.provision_step + "); the operation was interrupted";
        const ProvisionState to = failed_state(n.provision_state);
        std::vector<EventDraft> events = {transition_event(n, to, nlohmann::json{{"outcome", "restart"}, {"reason", reason}}, "")};
        auto w = co_await write(n.id, held_by(n.reservation, n.provision_state),
                                [&](Node& m) {
                                  enter(m, to);
                                  m.last_error = reason;
                                  return ok_status();
                                }, std::move(events));
        if (w) ++failed;
        continue;
      }
      // A stable node still holding a reservation was in a power action or
      // an on-demand validation (which records its step).
      EventDraft ev;
      ev.type = "power.failed";
      ev.node_id = n.id;
      ev.from_state = std::string(to_string(n.power_state));
      ev.to_state = "unknown";
      std::string reason = n.provision_step.empty()
                               ? "kilnd restarted during a power action; the power state is unknown until re-read"
                               : "kilnd restarted during an on-demand validation (step " + n.provision_step +
                                     "); no report was stored and the power state is unknown until re-read";
      ev.detail = {{"reason", reason}, {"previous_op", n.reservation}};
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
    log.info("recovery done", {{"resumed", std::to_string(resumed)},
                               {"failed", std::to_string(failed)},
                               {"power_cleared", std::to_string(power)}});
    co_return ok_status();
  }
};

Conductor::Conductor(asio::io_context& io, NodeStore& store, BlockingPool& db, const DriverRegistry& drivers,
                     const SecretBox& secrets, const Clock& clock, ConductorOptions options, Logger log)
    : impl_(std::make_shared<Impl>(io, store, db, drivers, secrets, clock, std::move(options), std::move(log))) {}

Conductor::~Conductor() { stop(); }

asio::awaitable<Status> Conductor::start() {
  Status s = co_await impl_->recover();
  if (!s) co_return s;
  auto self = impl_;
  asio::co_spawn(impl_->io, [self]() { return self->timeout_loop(); }, asio::detached);
  impl_->power_sync.start();
  co_return ok_status();
}

void Conductor::stop() {
  impl_->stopped = true;
  impl_->power_sync.stop();
  asio::post(impl_->io, [self = impl_] { self->timeout_timer.cancel(); });
}

asio::awaitable<Result<Node>> Conductor::provision(std::string node, ProvisionEvent verb, ProvisionArgs args,
                                                   Actor actor) {
  return impl_->provision(std::move(node), verb, std::move(args), std::move(actor));
}

asio::awaitable<Result<Node>> Conductor::power(std::string node, PowerAction action, Actor actor) {
  return impl_->power(std::move(node), action, std::move(actor));
}

asio::awaitable<Result<Node>> Conductor::validate_now(std::string node, std::string plan, Actor actor) {
  return impl_->validate_now(std::move(node), std::move(plan), std::move(actor));
}

Status Conductor::validate_bmc(const BmcInfo& bmc) const {
  if (bmc.driver.empty()) return Error::invalid("/bmc/driver", "is required");
  if (!DriverRegistry::is_known_driver_name(bmc.driver))
    return Error::invalid("/bmc/driver", "must be one of fake, redfish, ipmi, libvirt");
  const Driver* d = impl_->drivers.find(bmc.driver);
  if (d == nullptr) {
    // Accepted so the node can be enrolled now; `manage` fails with a reason.
    if (bmc.address.empty() && bmc.driver != "libvirt") return Error::invalid("/bmc/address", "is required");
    return ok_status();
  }
  if (d->power) return d->power->validate(bmc);
  if (d->management) return d->management->validate(bmc);
  return ok_status();
}

std::map<std::pair<std::string, std::string>, uint64_t> Conductor::operation_counts() const {
  std::lock_guard<std::mutex> l(impl_->counts_mu);
  return impl_->counts;
}

std::size_t Conductor::running_operations() const { return impl_->running.load(); }

PowerSync& Conductor::power_sync() { return impl_->power_sync; }

}  // namespace kiln
