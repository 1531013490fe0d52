#pragma once
// The gemm check's verdict: what the GPUs measured (gemm.cc fills these
// plain structs) in, the CheckResult out. Host-only and pure, so the floors,
// the throttle rules and the report's shape are unit-tested without a GPU
// (tests/unit/agent_checks/gemm_verdict_test.cc). The shape is the one the
// price per measured TFLOP reads (docs/validation.md, "gemm"):
//
//   {"name": "gemm", "status", "value": <the slowest GPU's median BF16 TFLOPS>,
//    "unit": "TFLOPS", "threshold": {"min": x} | null,
//    "details": {"dtype": "bf16", "seconds", "shape": {"m","n","k"}, "algo",
//      "node_tflops": <sum of the GPUs' median BF16 TFLOPS>,
//      "spec_tflops": <dense BF16 peak per GPU, or null>,
//      "per_gpu": [{"index", "name", "tflops_min", "tflops_median",
//                   "sm_clock_mhz_median", "power_w_median", "throttle_reasons"}],
//      "fp8": {the same for FP8} | absent, "tf32": ... | absent,
//      "reason" (fail/skip), "reasons", "warnings"}}
//
// The rules, per GPU and type:
//   - the floor is the larger of min_tflops (BF16 only: it is a BF16 figure)
//     and min_fraction_of_spec x the GPU's spec for the type (when the model
//     has a spec); a median under it fails, naming the GPU, the figure and
//     the floor;
//   - NVML clock-event reasons seen during the timed run that mean a fault or
//     a limit being hit (HW slowdown, SW or HW thermal slowdown, HW power
//     brake; agent::throttle_is_harmful) fail, naming the reasons;
//   - the SW power cap alone is a warning. A dense GEMM on an SXM H100/H200
//     draws the board to its power limit by design and the driver's power
//     governor then trims clocks: that is the GPU working as specified, not
//     a fault, and the TFLOPS floor already says whether the result is good
//     enough. Under the floor, the failure says the power cap was seen;
//   - a GPU that measured nothing (a CUDA or cuBLAS error, a wrong result)
//     fails with that error.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "agent/gpucheck/gemm_math.h"
#include "agent/validate/checks/check_result.h"

namespace kiln::gpucheck {

// What one GPU measured for one type.
struct GemmGpuRun {
  int index = 0;
  std::string name;                  // "NVIDIA H100 80GB HBM3"
  std::string error;                 // non-empty: nothing usable was measured
  GemmShape shape;                   // the shape this GPU's search chose
  nlohmann::json algo;               // cuBLASLt's algorithm as chosen ({"id", "tile", ...})
  std::vector<double> tflops;        // one sample per timed window
  std::vector<double> sm_clock_mhz;  // NVML samples during the timed run
  std::vector<double> power_w;
  std::uint64_t throttle_mask = 0;   // OR of every NVML clock-event-reason sample
  bool nvml_sampled = false;         // false: NVML gave nothing (reasons unknown)
};

struct GemmTypeRun {
  GemmDtype dtype = GemmDtype::kBf16;
  std::vector<GemmGpuRun> gpus;
  nlohmann::json search = nlohmann::json::array();  // the candidates timed, for the record
};

struct GemmFloors {
  std::optional<double> min_tflops;            // BF16, per GPU
  std::optional<double> min_fraction_of_spec;  // every type whose spec is known
};

// Builds the report. `runs` holds BF16 first (the caller always runs it),
// then FP8 and TF32 when they ran; `skipped` names types asked for but not
// run, with why ({"fp8": "compute capability 8.0 has no FP8 tensor cores"}).
// `seconds` is the timed length per GPU and type.
agent::CheckResult gemm_verdict(const std::vector<GemmTypeRun>& runs, const GemmFloors& floors, int seconds,
                                const nlohmann::json& skipped = nlohmann::json::object());

}  // namespace kiln::gpucheck
