#pragma once
// What every store dialect applies the same way (internal to
// controller/store): the checks behind NodeCondition, the identity
// invariants, the error texts callers see, and how JSON columns are written.
// Keeping them in one place is what makes the SQLite and the PostgreSQL store
// answer alike (the conformance suite in tests/unit/store checks that).

#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "common/result.h"
#include "controller/model/node.h"
#include "controller/store/node_repo.h"

namespace kiln::store_rules {

// JSON as stored in a TEXT column. Invalid UTF-8 is replaced rather than
// thrown on: a driver's garbage must not make a node unwritable.
std::string json_text(const nlohmann::json& j);

// kInvalidArgument naming "limit" unless positive.
Result<int> checked_limit(int limit);

// ASCII lowercase (UUIDs are stored lowercase and matched case-insensitively).
std::string lower(std::string_view s);

// kNotFound "node X not found".
Error node_not_found(std::string_view id_or_name);

// Checks `cond` against the node as stored: kPreconditionFailed on a version
// mismatch, kConflict on a reservation or state mismatch. The messages are
// shown to API callers, so they say what to do differently.
std::optional<Error> check_condition(const Node& n, const NodeCondition& cond);

// Store-side invariants the API also checks; kept here so no path around the
// API can break lookups (an id must be a UUID, a name must not look like one).
std::optional<Error> check_identity(const Node& n);

// The transient provision states as a SQL list ('deploying', ...) for an
// IN (...) clause. State names are [a-z_], so inlining them is safe.
std::string transient_states_sql();

}  // namespace kiln::store_rules
