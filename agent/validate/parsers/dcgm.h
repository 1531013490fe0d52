#pragma once
// Parser for `dcgmi diag -r N` text output (DCGM 2.x to 4.x table layouts).
//
// The table has a name column and a result column; section rows
// ("|-----  Deployment  ---...|", "+-----  Integration  ---...+") set the
// category. Long texts wrap inside the result column, cut at a fixed width
// even mid-word, on rows whose name cell is blank; those continuation rows are
// joined back exactly (a chunk that fills the column is glued to the next one).
// Result forms read: "Pass", "Pass - All", "Pass - GPUs: 0, 2", "Fail - GPU: 1",
// "Fail - GPU 3", "Skip - All", "Not Run", DCGM 4's per-entity "GPU0: Pass"
// rows, and "Warning" / "Error" / "Info" message rows. Fragments (no header,
// no closing border, a cut last row) parse. Lines outside the table such as
// "Error: Unable to complete diagnostic ..." are collected as errors.
//
// Result shape:
//   {
//     "format": "dcgm",
//     "completed": bool,                       // "Successfully ran diagnostic for group."
//     "dcgm_version": str|null, "driver_version": str|null, "gpu_device_ids": [str],
//     "metadata": {"DCGM Version": "3.3.3", ...},
//     "run_level": 1..4 | null,                // inferred from which tests are present
//     "categories": ["Metadata", "Deployment", ...],
//     "tests": [{"category", "name", "result": "Pass"|"Fail"|"Skip"|"Warn"|"Not Run",
//                "result_text": "Pass - All", "all_gpus": bool,
//                "entities": [{"entity": "GPU0", "result": "Pass"}],
//                "messages": [{"kind": "Warning"|"Error"|"Info", "text": str}]}],
//     "category_messages": [{"category", "kind", "text"}],   // message rows with no test above
//     "errors": [str],                         // "Error: ..." lines outside the table
//     "overall": "pass" | "fail" | "warn" | "skip",
//     "health": {...}
//   }
// overall/health fail on any failed test, any Error message row, or any
// error line outside the table (the diagnostic did not run: never a pass).

#include <string_view>

#include <nlohmann/json.hpp>

#include "common/result.h"

namespace kiln::agent {

// Parses dcgmi diag text. kInvalidArgument when neither a diag table nor a
// DCGM diagnostic status/error line is present.
Result<nlohmann::json> parse_dcgm(std::string_view text);

}  // namespace kiln::agent
