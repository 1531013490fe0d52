#pragma once
// Validation as the conductor runs and records it: which plan each
// state runs, the node's profile as the agent receives it, the stored record
// of each report, and on-demand runs (POST /v1/nodes/{id}/validations).
//
//   burning_in   plan "full"  (the workflow's "burn_in"), phase burn_in
//   validating   plan "quick",                            phase pre_handoff
//   deploying    plan "quick",                            phase pre_handoff
//                (only an image without kiln-agent runs it there: in the
//                ramdisk, before the write)
//   on demand    either plan,                             phase on_demand
//
// The gate's policy (retry a numeric miss once, quarantine on anything else)
// is judge_report() in controller/model/validation.h; Workflow::validate
// applies it, and the conductor stores every attempt's report here and points
// the node's last_validation at the newest.
//
// On-demand runs hold the node's reservation (so no verb runs alongside)
// but never change its provision state: the report is stored and
// last_validation set, and an event says how it went; an operator decides
// what a failure means for a node already in the pool. Drivers without
// kiln-agent (fake) validate through their ValidateInterface directly.
// Agent-driven nodes (redfish, ipmi) at rest (manageable, available,
// quarantined) boot the deploy ramdisk for it: Workflow::run_on_demand runs
// on_demand_flow() (controller/model/steps.h), each step recorded on the node
// (on_demand_ramdisk() in controller/model/node.h tells the boot script and
// the broker). An active node runs the tenant's OS: 409.

#include <optional>
#include <string>
#include <utility>  // before Asio (docs/coroutines.md)

#include <boost/asio/awaitable.hpp>
#include <nlohmann/json.hpp>

#include "common/blocking_pool.h"
#include "common/clock.h"
#include "common/crypto.h"
#include "common/log.h"
#include "common/result.h"
#include "controller/model/node.h"
#include "controller/model/states.h"
#include "controller/model/validation.h"
#include "controller/store/catalogue_store.h"
#include "controller/store/event_log.h"
#include "controller/conductor/workflow.h"
#include "drivers/driver.h"

namespace kiln {

struct ValidationPhase {
  ValidationPlan plan;
  const char* phase;  // kPhaseBurnIn | kPhasePreHandoff
};

// The plan and phase of the reports a state may make; nullopt for the others.
std::optional<ValidationPhase> validation_phase_for(ProvisionState state);

// Blocking (run it on the BlockingPool). The node's profile document, as
// stored (what the agent gets as "profile"); null JSON when the node names
// no profile. kUnprocessable "node X names profile P, which does not
// exist" when the catalogue lacks it.
Result<nlohmann::json> load_profile_doc(CatalogueStore& store, const Node& node);

// The longest run a report's duration_s may claim (a week; the full plan takes
// hours): anything else is an agent's error or a lie, and dates nothing.
inline constexpr double kMaxReportedRunSeconds = 7 * 24 * 3600;

// The record of one report of `node`. started_at is finished_ms less the
// report's duration_s when that lies in [0, kMaxReportedRunSeconds], else
// finished_ms.
ValidationRecord make_validation_record(const Node& node, ValidationPlan plan, const char* phase, int attempt,
                                        const nlohmann::json& report, const nlohmann::json& profile_doc,
                                        int64_t finished_ms);

// The report stored when a run produced none (the driver or agent failed):
// {"result": "error", "error": message}; its record's result is "error".
nlohmann::json error_report(const std::string& message);

// The "validation.recorded" event for `rec`.
EventDraft validation_event(const Node& node, const ValidationRecord& rec, const std::string& request_id);

// Whether an on-demand run may start for `node` driven by `driver` (null:
// not built in): kConflict with the reason otherwise.
Status on_demand_allowed(const Node& node, const Driver* driver);

// Runs `plan` once through the node's driver with `profile_doc` in the
// target (no retry, no state change) and returns the report. Errors are the
// driver's.
asio::awaitable<Result<nlohmann::json>> run_validation_plan(const DriverRegistry& drivers, const SecretBox& secrets,
                                                           Node node, ValidationPlan plan, nlohmann::json profile_doc);

}  // namespace kiln
