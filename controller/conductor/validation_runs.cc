#include "controller/conductor/validation_runs.h"

#include "controller/conductor/driver_target.h"
#include "controller/model/event_types.h"

namespace kiln {

std::optional<ValidationPhase> validation_phase_for(ProvisionState state) {
  if (state == ProvisionState::kBurningIn) return ValidationPhase{ValidationPlan::kFull, kPhaseBurnIn};
  if (state == ProvisionState::kValidating) return ValidationPhase{ValidationPlan::kQuick, kPhasePreHandoff};
  // An image without kiln-agent: the same pre-hand-off plan, in the ramdisk
  // before the write (controller/model/steps.h).
  if (state == ProvisionState::kDeploying) return ValidationPhase{ValidationPlan::kQuick, kPhasePreHandoff};
  return std::nullopt;
}

Result<nlohmann::json> load_profile_doc(CatalogueStore& store, const Node& node) {
  if (node.profile.empty()) return nlohmann::json();
  Result<Profile> p = store.get_profile(node.profile);
  if (!p) {
    if (p.error().code == Code::kNotFound)
      return Error(Code::kUnprocessable, "node " + (node.name.empty() ? node.id : node.name) +
                                                  " names profile " + node.profile +
                                                  ", which does not exist (GET /v1/profiles)");
    return p.take_error();
  }
  return p->doc;
}

ValidationRecord make_validation_record(const Node& node, ValidationPlan plan, const char* phase, int attempt,
                                        const nlohmann::json& report, const nlohmann::json& profile_doc,
                                        int64_t finished_ms) {
  ValidationRecord r;
  r.node_id = node.id;
  r.profile = node.profile;
  r.node_kind = std::string(to_string(node.kind));
  r.plan = std::string(to_string(plan));
  r.phase = phase;
  r.attempt = attempt;
  r.report = report.is_object() ? report : nlohmann::json::object();
  r.finished_at = finished_ms;
  r.started_at = finished_ms;
  // The agent's duration_s dates the start; a value no run can have (negative,
  // past kMaxReportedRunSeconds, or too large for a double-to-integer
  // conversion to be defined) is not believed: the run is dated at its end.
  if (report.is_object() && report.contains("duration_s") && report["duration_s"].is_number()) {
    const double d = report["duration_s"].get<double>();
    if (d >= 0 && d <= kMaxReportedRunSeconds) r.started_at = finished_ms - static_cast<int64_t>(d * 1000.0);
  }
  if (report.is_object() && report.contains("error") && !report.contains("checks")) {
    r.result = "error";
  } else {
    // The gate's judgement: checks outside the profile's plan do not count.
    GateDecision d = judge_report(report, profile_doc, plan, 1);
    r.result = d.verdict == GateVerdict::kPass ? "pass" : "fail";
  }
  return r;
}

nlohmann::json error_report(const std::string& message) {
  return {{"result", "error"}, {"error", message}};
}

EventDraft validation_event(const Node& node, const ValidationRecord& rec, const std::string& request_id) {
  EventDraft e;
  e.type = event_type::kValidationRecorded;
  e.node_id = node.id;
  e.tenant = node.tenant;
  e.request_id = request_id;
  e.detail = {{"validation", rec.id}, {"plan", rec.plan},   {"phase", rec.phase},
              {"result", rec.result}, {"attempt", rec.attempt}, {"profile", rec.profile}};
  return e;
}

Status on_demand_allowed(const Node& node, const Driver* driver) {
  const std::string who = "node " + (node.name.empty() ? node.id : node.name);
  if (!node.reservation.empty()) return Error(Code::kConflict, "node is busy");
  if (node.profile.empty())
    return Error(Code::kConflict, who + " has no profile: set one (PATCH /v1/nodes/{id} {\"profile\": ...}) "
                                        "so there is something to validate against");
  if (driver == nullptr)
    return Error(Code::kConflict, "driver " + node.bmc.driver + " is not available in this build of kilnd");
  if (!driver->validate) return Error(Code::kConflict, "driver " + driver->name + " cannot validate");
  const ProvisionState s = node.provision_state;
  if (driver->agent) {
    if (s == ProvisionState::kActive)
      return Error(Code::kConflict, who + " is active: it runs its tenant's OS, so kilnd cannot boot the deploy "
                                          "ramdisk to validate it (undeploy first; deploy validates before hand-off)");
    if (s != ProvisionState::kManageable && s != ProvisionState::kAvailable && s != ProvisionState::kQuarantined)
      return Error(Code::kConflict, "cannot validate a node in state " + std::string(to_string(s)) +
                                        "; allowed for " + driver->name + " nodes: manageable, available, quarantined");
    if (node.ports.empty())
      return Error(Code::kConflict, who + " has no port: the deploy ramdisk's agent finds its node by MAC");
    if (!driver->power || !driver->management)
      return Error(Code::kConflict, "driver " + driver->name + " cannot boot the deploy ramdisk");
    return ok_status();
  }
  if (s != ProvisionState::kManageable && s != ProvisionState::kAvailable && s != ProvisionState::kActive &&
      s != ProvisionState::kQuarantined)
    return Error(Code::kConflict, "cannot validate a node in state " + std::string(to_string(s)) +
                                      "; allowed: manageable, available, active, quarantined");
  return ok_status();
}

namespace {

Result<DriverTarget> target_of(const Node& node, const SecretBox& secrets, nlohmann::json profile_doc) {
  Result<DriverTarget> t = driver_target(node, secrets);
  if (t) t->profile = std::move(profile_doc);
  return t;
}

}  // namespace

asio::awaitable<Result<nlohmann::json>> run_validation_plan(const DriverRegistry& drivers, const SecretBox& secrets,
                                                           Node node, ValidationPlan plan, nlohmann::json profile_doc) {
  Driver* d = drivers.find(node.bmc.driver);
  if (d == nullptr || !d->validate)
    co_return Error(Code::kUnprocessable, "driver " + node.bmc.driver + " cannot validate");
  Result<DriverTarget> t = target_of(node, secrets, std::move(profile_doc));
  if (!t) co_return t.take_error();
  Result<nlohmann::json> r = co_await d->validate->validate(*t, plan);
  co_return r;
}

}  // namespace kiln
