#pragma once
// Parser for `nvidia-smi -q` (full, `-a`, or `-d ECC,PERFORMANCE,...` subsets).
//
// The output is an indented tree ("    Section" / "        Key   : Value");
// each "GPU 00000000:19:00.0" block is read into a nested object first
// ("fields", exactly as printed), then the facts validation needs are pulled
// out of it by section and key name, so driver generations that add, rename
// or split keys (535's "SRAM Uncorrectable Parity/SEC-DED", "Clocks Event
// Reasons" vs the older "Clocks Throttle Reasons", old "Single Bit / Double
// Bit" ECC counters) still parse. Excerpts without the banner, elided lines
// ("[...]") and several snapshots in one capture are accepted.
//
// Result shape:
//   {
//     "format": "smi-query",
//     "timestamp", "driver_version", "cuda_version": str | null,
//     "attached_gpus": int | null,
//     "gpus": [{
//       "bus_id": "00000000:19:00.0", "product_name": str | null, "uuid": str | null,
//       "persistence_mode", "display_mode", "mig_mode_current", "performance_state": str | null,
//       "pcie": {"gen_current", "gen_max", "width_current", "width_max", "replays_since_reset"} (int|null),
//       "clock_event_reasons": {"Idle": "Active", "HW Slowdown": "Not Active", ..},
//       "active_clock_event_reasons": [names that are Active],
//       "ecc_mode": {"current", "pending"} | null,
//       "ecc_errors": {"volatile": {"SRAM Correctable": 0, ..}, "aggregate": {..},   // ints, or str ("N/A")
//                      "volatile_correctable", "volatile_uncorrectable",
//                      "aggregate_correctable", "aggregate_uncorrectable": int | null,
//                      "sram_threshold_exceeded": bool | null} | null,
//       "retired_pages": {"single_bit_ecc", "double_bit_ecc": int | null, "pending": bool | null} | null,
//       "remapped_rows": {"correctable", "uncorrectable": int | null, "pending", "failure": bool | null,
//                         "histogram": {"max", "high", "partial", "low", "none"}} | null,
//       "temperature": {"gpu_c", "memory_c", "t_limit_c", "shutdown_c", "slowdown_c"} (double|null),
//       "power": {"draw_w", "limit_w", "samples": {"max_w", "min_w", "avg_w", "count"} | null},
//       "clocks": {"graphics_mhz", "sm_mhz", "memory_mhz", "max_graphics_mhz", "max_sm_mhz"},
//       "fabric": {"state", "status"} | null,
//       "reset_required", "drain_and_reset_recommended": bool | null,
//       "fields": {...the whole block...},
//       "health": {...}
//     }],
//     "health": {...}                          // all GPUs' reasons, prefixed with the bus id
//   }
// A GPU fails on: pending row remap, remapping failure, volatile uncorrectable
// ECC errors, pending page retirement, SRAM threshold exceeded, an Active HW
// Slowdown / HW Thermal / HW Power Brake / SW Thermal slowdown, reset required,
// fabric state not completed/success. Correctable/aggregate errors, SW power
// cap and ECC disabled are warnings.

#include <string_view>

#include <nlohmann/json.hpp>

#include "common/result.h"

namespace kiln::agent {

// Parses nvidia-smi -q text. kInvalidArgument when there is no NVSMI banner,
// "Attached GPUs" line or "GPU <bus id>" block.
Result<nlohmann::json> parse_smi_query(std::string_view text);

}  // namespace kiln::agent
