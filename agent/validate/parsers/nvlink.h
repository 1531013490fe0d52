#pragma once
// Parser for `nvidia-smi nvlink -s` / `nvidia-smi nvlink --status`.
//
//   GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-2e37c77d-...)
//   \t Link 0: 26.562 GB/s
//            Link 3: <inactive>
//
// Link lines are indented with a tab, a tab and a space, or spaces (expanded
// tabs); all are accepted. A GPU may instead carry an NVML message such as
// "NVML: Unable to retrieve NVLink information as all links are inActive".
//
// Result shape:
//   {
//     "format": "nvlink",
//     "gpus": [{"index": 3, "name": "Tesla V100-SXM2-32GB", "uuid": str | null,
//               "links": [{"link": 0, "active": true, "speed_gb_s": 25.781 | null, "state": "25.781 GB/s"}],
//               "link_count", "active_links", "inactive_links", "messages": [str]}],
//     "summary": {"gpu_count", "link_count", "active_links", "inactive_links",
//                 "speeds_gb_s": [distinct speeds of active links]},
//     "health": {...}
//   }
// Health fails on any inactive link and on a GPU whose NVML message says all
// links are inactive. GPUs with different link counts are a warning.

#include <string_view>

#include <nlohmann/json.hpp>

#include "common/result.h"

namespace kiln::agent {

// Parses nvidia-smi nvlink status text. kInvalidArgument when there is no
// "GPU n: ..." header followed by link lines or an NVML message.
Result<nlohmann::json> parse_nvlink(std::string_view text);

}  // namespace kiln::agent
