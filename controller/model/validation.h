#pragma once
// Hardware profiles, stored validation reports, and the hand-off gate's
// policy. Plain data and pure functions: no I/O.
//
// A Profile is one JSON document (schemas/profile.schema.json). kiln-agent
// reads its gpu/nvlink/pcie/rdma/nvme/jitter/thresholds sections
// (agent/validate/checks/profile.h: same field names), the gate reads
// `plans`, /v1/availability reads `price` and `virtual`.
//
// The gate (judge_report). A report gates on the checks the profile's plan
// lists (plans.quick / plans.full); a failing check the plan does not list is
// shown but does not fail the node (a profile without `plans` gates on every
// check). A failing gating check is either:
//   - a numeric miss: a throughput/latency check (kNumericChecks) that measured
//     a number and the number is on the wrong side of its {"min"} or {"max"}
//     threshold. Performance varies run to run (thermals, a noisy neighbour,
//     NCCL's ring choice), so the first numeric miss is retried once;
//   - anything else, which is hard and never retried: a missing or wrong GPU
//     (gpu_inventory), GPU faults and XIDs (gpu_health, dcgm_diag), degraded
//     PCIe links (pcie_links), NVLink down (nvlink, nvidia_smi_topo), inactive
//     or slow RDMA ports / no peermem (gpudirect_rdma), missing NVMe, and a
//     throughput check that measured nothing ("not measured", no value) or
//     whose value is within its threshold (it failed for another reason,
//     e.g. fewer NVMe devices than expected).
// A second numeric miss, or any hard failure, quarantines the node.

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "drivers/validation_plan.h"

namespace kiln {

struct Profile {
  std::string name;
  // The whole document as the API shows it, without the server's fields
  // (created_at, updated_at, version); doc["name"] == name.
  nlohmann::json doc = nlohmann::json::object();
  int64_t created_at = 0;
  int64_t updated_at = 0;
  int64_t version = 0;
};

// Why a report was run.
inline constexpr const char* kPhaseBurnIn = "burn_in";          // burning_in, plan full
inline constexpr const char* kPhasePreHandoff = "pre_handoff";  // validating, plan quick
inline constexpr const char* kPhaseOnDemand = "on_demand";      // POST /v1/nodes/{id}/validations

struct ValidationRecord {
  std::string id;         // UUID
  std::string node_id;
  std::string profile;    // the node's profile when it ran
  std::string node_kind;  // baremetal | virtual
  std::string plan;       // quick | full
  std::string phase;      // burn_in | pre_handoff | on_demand
  std::string result;     // pass | fail | error (the run itself failed: no report from the node)
  int attempt = 1;        // 2 for the retry of a numeric miss
  int64_t started_at = 0; // ms epoch
  int64_t finished_at = 0;
  nlohmann::json report = nlohmann::json::object();
};

// The checks kiln-agent runs (agent/validate/checks/plan.h), in plan order,
// then nccl_multinode, which kilnd adds (controller/agent/collective_rendezvous.h).
const std::vector<std::string>& known_check_names();
// Checks whose failure can be a numeric miss (retried once).
const std::vector<std::string>& numeric_check_names();
// The headline checks /v1/availability reports, with the unit of their value.
struct HeadlineCheck {
  const char* name;
  const char* unit;
  bool higher_is_better;
};
const std::vector<HeadlineCheck>& headline_checks();

enum class GateVerdict { kPass, kRetry, kQuarantine };

struct GateDecision {
  GateVerdict verdict = GateVerdict::kQuarantine;
  std::vector<std::string> failing;  // "name: reason" of each gating failure
  bool numeric_only = false;         // every gating failure was a numeric miss
  // For last_error when not kPass: "validation (full, attempt 2) failed: ..."
  std::string reason;
};

// Whether failing check `check` (one entry of report.checks) is a numeric miss.
bool is_numeric_miss(const nlohmann::json& check);

// The checks the profile lists for `plan` (its `plans.quick` / `plans.full`
// array, strings only): the one reader of those keys. Empty when the profile
// lists none, which the gate reads as "every check".
std::vector<std::string> plan_checks(const nlohmann::json& profile_doc, ValidationPlan plan);

// Judges `report` for `plan` against `profile_doc` (the Profile::doc; only
// `plans.quick` / `plans.full` is read) on attempt `attempt` (1 or 2). A
// report that is not an object with a "checks" array is a hard failure.
GateDecision judge_report(const nlohmann::json& report, const nlohmann::json& profile_doc, ValidationPlan plan,
                          int attempt);

// Appends `check` to report.checks and keeps summary and result true to it
// (a failing check makes the result "fail"). Used for nccl_multinode, which
// kilnd runs across an allocation after the node's own plan.
void add_check_to_report(nlohmann::json& report, const nlohmann::json& check);

// The headline figure of check `name` in `report` (its numeric value when the
// check passed), or null.
nlohmann::json headline_value(const nlohmann::json& report, const std::string& name);

}  // namespace kiln
