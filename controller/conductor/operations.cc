#include "controller/conductor/conductor_impl.h"

#include <cassert>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>

#include "common/ids.h"
#include "controller/conductor/validation_runs.h"
#include "controller/model/event_types.h"
#include "controller/model/image_use.h"
#include "controller/model/node_allocation.h"

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

}  // namespace

asio::awaitable<Result<Node>> Conductor::Impl::provision(std::string node, ProvisionEvent verb, ProvisionArgs args, Actor actor) {
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
      holds.taken(before.id);
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
    } else if (!args.image.empty()) {
      // A driver that writes no image (fake) needs none, but one it is
      // told to deploy that is catalogued and not ready is refused alike.
      std::string ref = args.image;
      Result<Image> named = co_await db.run([&] { return store.get_image(ref); });
      if (named) {
        Status ready = image_deployable(*named);
        if (!ready) co_return ready.take_error();
      }
    }
    detail["image"] = args.image;
    if (!args.allocation.empty()) detail["allocation"] = args.allocation;
  }

  // The operation is named for the node's owner as the verb leaves it (a
  // deploy with an allocation moves it to the allocation's owner).
  Node after = before;
  allocation_after_verb(after, verb, args.allocation);
  std::string op_id = is_transient(*to) ? new_op_id_for(after) : std::string();
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
                            if (verb == ProvisionEvent::kDeploy) m.image = args.image;
                            allocation_after_verb(m, verb, args.allocation);
                            return ok_status();
                          }, std::move(events));
  if (!w) co_return w;
  log.info("provision verb", {{"node", before.id},
                              {"verb", std::string(to_string(verb))},
                              {"from", std::string(to_string(from))},
                              {"to", std::string(to_string(*to))},
                              {"request_id", actor.request_id}});
  if (!op_id.empty() && runner_of(op_id) == self_id()) {
    spawn_operation(op_id, before.id, std::string(to_string(verb)), actor.request_id);
  } else if (!op_id.empty()) {
    log.info("operation handed to the node's owner", {{"node", before.id}, {"op", op_id}});
  } else {
    count(std::string(to_string(verb)), "success");
  }
  co_return w;
}

asio::awaitable<Result<Node>> Conductor::Impl::power(std::string node, PowerAction action, Actor actor) {
  auto n = co_await db.run([&] { return store.get_node(node); });
  if (!n) co_return n.take_error();
  std::string op_id = new_op_id();
  PowerState target = power_action_result(action);
  EventDraft ev;
  ev.type = event_type::kPowerRequested;
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

asio::awaitable<Result<Node>> Conductor::Impl::validate_now(std::string node, ValidationPlan plan, Actor actor) {
  auto n = co_await db.run([&] { return store.get_node(node); });
  if (!n) co_return n.take_error();
  Node before = *n;
  Status allowed = on_demand_allowed(before, drivers.find(before.bmc.driver));
  if (!allowed) co_return allowed.take_error();
  Result<nlohmann::json> doc = co_await db.run([&] { return load_profile_doc(store, before); });
  if (!doc) co_return Error(Code::kConflict, doc.error().message);
  nlohmann::json profile_doc = *doc;
  std::string op_id = new_op_id();
  ProvisionState state = before.provision_state;
  EventDraft ev;
  ev.type = event_type::kValidationRequested;
  ev.node_id = before.id;
  ev.detail = actor_json(actor);
  ev.detail["plan"] = std::string(to_string(plan));
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

asio::awaitable<Status> Conductor::Impl::check_os_image(std::string ref) {
  if (ref.empty()) co_return Error::invalid("/image", "is required to deploy this node");
  Result<Image> image = co_await db.run([&] { return store.get_image(ref); });
  if (!image && image.error().code != Code::kNotFound) co_return image.take_error();
  // The deploy verb is staff's: every image is theirs to use.
  std::optional<std::string> refused = image_use_refusal(image ? &*image : nullptr, ref, /*sees_private=*/true);
  if (refused) co_return Error::invalid("/image", *refused);
  co_return image_deployable(*image);  // 409 naming the image and its state
}

bool Conductor::Impl::spawn_operation(std::string op_id, std::string node_id, std::string kind, std::string request_id) {
  {
    std::lock_guard<std::mutex> l(live_mu);
    if (!live_ops.insert(op_id).second) return false;
  }
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
        {
          std::lock_guard<std::mutex> l(self->live_mu);
          self->live_ops.erase(op_id);
        }
        self->running--;
      },
      asio::detached);
  return true;
}

asio::awaitable<void> Conductor::Impl::fail_held(std::string op_id, std::string node_id, std::string reason,
                                                 std::string request_id) {
  auto n = co_await read_held(node_id);
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

asio::awaitable<void> Conductor::Impl::run_operation(std::string op_id, std::string node_id, std::string kind,
                                                     std::string request_id) {
  Workflow wf(drivers, secrets, log.with("node", node_id).with("op", op_id));
  wf.set_tenant_access(opt.tenant_access);
  wf.set_own_config_drive(opt.own_config_drive);
  wf.set_phone_home(opt.phone_home);
  wf.set_phone_home_wait(opt.phone_home_wait);
  NodeHolds::Guard guard{&holds, node_id, holds.hold(node_id, op_id)};
  for (;;) {
    if (stopped) co_return;
    auto cur = co_await read_held(node_id);
    if (!cur || cur->reservation != op_id || !is_transient(cur->provision_state)) {
      count(kind, "aborted");
      co_return;
    }
    Node before = *cur;
    ProvisionState state = before.provision_state;

    // Progress is shown on the node; a lost reservation stops us here too.
    SetStep set_step = step_recorder(node_id, op_id, state);

    std::shared_ptr<NodeHolds::Flag> flag = guard.flag;
    HeldCheck held_check = [this, flag, node_id, state]() { return holds.still_held(flag, node_id, state); };

    // burning_in / validating (and deploying, which validates in the ramdisk
    // for an image without kiln-agent): the node's profile goes to the
    // driver (the agent) and to the gate.
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

    if (vphase) {
      // Every attempt's report is stored as the gate gets it, even when the
      // node is lost meanwhile, and before the flow goes on (an image
      // without kiln-agent writes after validating).
      ValidationPhase vp = *vphase;
      wf.set_report_sink([this, before, vp, profile_doc, request_id](nlohmann::json report,
                                                                     int attempt) -> asio::awaitable<void> {
        ValidationRecord rec =
            make_validation_record(before, vp.plan, vp.phase, attempt, report, profile_doc, clock.now_ms());
        std::vector<EventDraft> rec_events = {validation_event(before, rec, request_id)};
        Result<ValidationRecord> saved = co_await db.run([&] { return store.record_validation(rec, rec_events); });
        if (!saved) log.warn("validation report not stored", {{"node", before.id}, {"error", saved.error().message}});
      });
    }

    // Deploying and validating run the flows of the image's kind: whether
    // its OS runs kiln-agent (controller/model/steps.h). An image kilnd does
    // not find (an out-of-band driver's deploy names one kilnd never
    // checked) keeps the flows of images with an agent, as before.
    bool os_agent = true;
    Status image_read = ok_status();
    if ((state == ProvisionState::kDeploying || state == ProvisionState::kValidating) && !before.image.empty()) {
      std::string ref = before.image;
      Result<Image> image = co_await db.run([&] { return store.get_image(ref); });
      if (image) {
        os_agent = image->os_agent;
      } else if (image.error().code != Code::kNotFound) {
        image_read = Error(image.error().code, "image " + ref + ": " + image.error().message);
      }
    }
    StepOutcome out;
    if (image_read) {
      wf.set_os_agent(os_agent);
      out = co_await wf.run_state(before, state, set_step, held_check);
    } else {
      out.status = std::move(image_read);
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

// Each step a flow starts is recorded with a provision.step event in the same
// transaction, so anyone following the event stream (the portal, kiln
// --wait) sees a node's progress between state changes without polling.
SetStep Conductor::Impl::step_recorder(std::string node_id, std::string op_id, std::optional<ProvisionState> state) {
  return [this, node_id, op_id, state](std::string step) -> asio::awaitable<bool> {
    std::vector<EventDraft> events = step_events(node_id, step, op_id);
    auto w = co_await write(node_id, held_by(op_id, state),
                            [&](Node& m) {
                              m.provision_step = step;
                              return ok_status();
                            }, std::move(events));
    co_return w.ok();
  };
}

std::vector<EventDraft> Conductor::Impl::step_events(const std::string& node_id, const std::string& step,
                                                     const std::string& op_id) {
  EventDraft e;
  e.type = event_type::kProvisionStep;
  e.node_id = node_id;
  e.detail = {{"step", step}, {"op", op_id}};
  return {std::move(e)};
}

asio::awaitable<void> Conductor::Impl::run_on_demand(std::string op_id, std::string node_id, ValidationPlan plan,
                                                     nlohmann::json profile_doc, std::string request_id) {
  auto cur = co_await read_held(node_id);
  if (!cur || cur->reservation != op_id) co_return;
  Node node = *cur;
  NodeHolds::Guard guard{&holds, node_id, holds.hold(node_id, op_id)};
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
      std::shared_ptr<NodeHolds::Flag> flag = guard.flag;
      ProvisionState state = node.provision_state;
      HeldCheck held_check = [this, flag, node_id, state]() { return holds.still_held(flag, node_id, state); };
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

asio::awaitable<void> Conductor::Impl::run_power(std::string op_id, std::string node_id, PowerAction action,
                                                 std::string request_id) {
  std::string kind = "power_" + std::string(to_string(action));
  auto cur = co_await read_held(node_id);
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
  ev.type = r ? event_type::kPowerTransition : event_type::kPowerFailed;
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

}  // namespace kiln
