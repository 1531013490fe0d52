#pragma once
// Usage ledger rows over the SQL seam (internal to controller/store): the
// one INSERT and the one UPDATE of usage_records, run inside a caller's
// transaction. sql/usage.cc's open_usage and close_usage wrap each in its own
// transaction; sql/allocations.cc's update_allocation_with_usage runs them in
// the allocation's, so a state change and its billing commit together.

#include <cstdint>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "controller/store/allocation_store.h"
#include "controller/store/sql/conn.h"

namespace kiln::usage_rows {

// Inserts a row per record, except where the (allocation, node) already has
// an open row, which is kept with its start (the partial unique index
// usage_open). Errors are the connection's.
Status open_rows(db::Conn& c, const std::vector<UsageRecord>& rows);

// Closes the open rows of `allocation` (of `node_id` only, when not empty) at
// `at_ms`, or at a row's start when that is later (a clock behind the
// opener's). Rows already closed keep their end.
Status close_rows(db::Conn& c, std::string_view allocation, std::string_view node_id, int64_t at_ms);

}  // namespace kiln::usage_rows
