#pragma once
// Parser for `nvidia-smi topo -m` (the GPU/NIC connection matrix).
//
// The header names the devices (GPU0.., NIC0.. or, on old drivers, mlx5_0..)
// followed by the affinity columns ("CPU Affinity", "NUMA Affinity",
// "GPU NUMA ID"). Cells are tab-separated; nvidia-smi writes an extra tab
// before "GPU NUMA ID" and leaves affinity cells empty on some machines, and
// pasted captures add runs of spaces next to the tabs, so cells are split on
// tabs and trimmed (falling back to whitespace when a capture lost its tabs).
// ANSI underline escapes around the header are removed.
//
// Result shape:
//   {
//     "format": "topo",
//     "devices": ["GPU0", .., "NIC0", ..],     // matrix order
//     "gpus": [{"name": "GPU0", "index": 0, "cpu_affinity": str, "numa_affinity": str,
//               "gpu_numa_id": str}],          // affinity strings as printed ("" when blank)
//     "nics": [{"name": "NIC0", "index": 0 | null, "device": "mlx5_0" | null}],
//     "matrix": {"GPU0": {"GPU0": "X", "GPU1": "NV18", "NIC0": "PIX", ..}, ..},
//     "nvlink_pairs": [{"a": "GPU0", "b": "GPU1", "links": 18}],   // each GPU pair once
//     "legend": {"X": "Self", "SYS": "...", ..},
//     "summary": {"gpu_count", "nic_count", "gpu_pairs",
//                 "all_gpu_pairs_nvlink": bool,  // false with fewer than 2 GPUs
//                 "min_nvlinks_per_pair": int|null, "max_nvlinks_per_pair": int|null,
//                 "gpu_pair_connections": {"NV18": 28, ..}},
//     "health": {...}
//   }
// Health only fails on a malformed matrix (a GPU row missing, cells that are
// not connection types); whether the topology is the expected one is for the
// gate to decide against the profile. Mixed NVLink/PCIe GPU pairs and unequal
// NVLink counts are warnings.

#include <string_view>

#include <nlohmann/json.hpp>

#include "common/result.h"

namespace kiln::agent {

// Parses `nvidia-smi topo -m` text. kInvalidArgument when no device header
// row with at least one GPU column and a matching GPU row is found.
Result<nlohmann::json> parse_topo(std::string_view text);

}  // namespace kiln::agent
