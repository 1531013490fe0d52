#pragma once
// The plan runner: runs a named list of checks, cheapest first, and produces
// the validation report kilnd stores and gates hand-off on:
//
//   {"plan": "quick", "profile": "h100-sxm-8x", "result": "pass" | "fail",
//    "started_at": "2026-...Z", "duration_s": 41.2,
//    "summary": {"pass": 9, "fail": 0, "skip": 4},
//    "checks": [CheckResult, ...]}
//
// Plans (burn-in runs "full", pre-hand-off runs "quick"):
//   quick  gpu_inventory, gpu_health, pcie_links, gpudirect_rdma, jitter,
//          nvme_read, then kiln-gpucheck (nvlink, hbm_bandwidth,
//          pcie_bandwidth, nccl_allreduce up to 1 GiB, gemm for 3 s per GPU
//          and type), nvidia_smi_topo, dcgm_diag -r 1
//   full   the same with more iterations, NCCL up to 4 GiB and gemm for
//          20 s, dcgm_diag -r 3,
//          nccl_tests (all_reduce_perf) and ib_write_bw --use_cuda, then
//          gpudirect_rdma_latency, nccl_latency and gds_read (latency_checks.h)
//
// The GPU checks run in kiln-gpucheck (CUDA + NCCL), found at
// PlanOptions::gpucheck, else next to kiln-agent, else on the search path; its
// JSON is merged into the report. When it is absent, cannot run or prints no
// valid JSON, each GPU check is `fail` with that reason if the profile
// expects GPUs and `skip` if it expects none. The result is "fail" when any
// check fails; skips do not fail a plan.

#include <chrono>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "agent/validate/checks/sysfs.h"
#include "common/clock.h"
#include "common/result.h"

namespace kiln::agent {

struct PlanOptions {
  HostPaths paths;
  std::string nvml_library = "libnvidia-ml.so.1";
  std::string gpucheck;           // explicit kiln-gpucheck path; "" = look for it
  std::string agent_dir;          // "" = the directory of the running executable
  std::string search_path;        // tools and kiln-gpucheck; "" = $PATH
  std::string nvme_path;          // overrides the profile's NVMe target
  // kiln-gpucheck runs HBM, PCIe and NCCL sweeps on every GPU: minutes on an
  // 8-GPU node; a hung driver must not hang the agent.
  std::chrono::seconds gpucheck_timeout{std::chrono::minutes(20)};
  std::chrono::seconds tool_timeout{std::chrono::minutes(45)};  // dcgmi -r 3 takes ~30 min
  const Clock* clock = nullptr;   // started_at; nullptr = the system clock
};

// The plan names run_plan() accepts.
const std::vector<std::string>& plan_names();

// The GPU checks kiln-gpucheck reports, in the order they run.
const std::vector<std::string>& gpucheck_check_names();

// Where kiln-gpucheck is: `explicit_path` when set (it must be executable),
// else next to kiln-agent (`agent_dir`, "" = the running executable's
// directory), else on `search_path` ("" = $PATH). kNotFound saying where it
// looked. The plan runner and the multi-node collective both use it.
Result<std::string> find_gpucheck(const std::string& explicit_path, const std::string& agent_dir,
                                  const std::string& search_path);

// Runs `plan` against `profile` (the JSON profile.h describes). Blocking for
// the length of the plan (seconds to many minutes); call it off any I/O
// thread. Errors: kInvalidArgument for an unknown plan or a malformed
// profile. A failing check is not an error: it is in the report.
Result<nlohmann::json> run_plan(const std::string& plan, const nlohmann::json& profile, const PlanOptions& opts);

}  // namespace kiln::agent
