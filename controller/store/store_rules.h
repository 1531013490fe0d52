#pragma once
// What every store dialect applies the same way (internal to
// controller/store): the checks behind NodeCondition, the identity
// invariants, the error texts callers see, and how JSON columns are written.
// Keeping them in one place is what makes the SQLite and the PostgreSQL store
// answer alike (the conformance suite in tests/unit/store checks that).

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

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

// The node create_node writes: id filled (new UUID when empty) and lowercased,
// created_at kept when set (else `now`), updated_at = `now`, version kept when
// > 0 (else 1), ports given ids, the node's id and created_at. Errors as
// check_identity.
Result<Node> node_to_create(const Node& node, int64_t now);

// Applies update_node_if's mutation `mutate` to a copy of `before` and puts
// back what the caller may not change (id, created_at, ports); version + 1,
// updated_at = max(now, before's). The Error of `mutate`, or of
// check_identity.
Result<Node> node_after_mutate(const Node& before, const std::function<Status(Node&)>& mutate, int64_t now);

// The port create_port writes: id and created_at filled when empty.
Port port_to_create(const Port& port, int64_t now);

// The transient provision states as a SQL list ('deploying', ...) for an
// IN (...) clause. State names are [a-z_], so inlining them is safe.
std::string transient_states_sql();

// kInternal "store: node <id> has unknown <column> '<value>'": a stored enum
// this binary does not know (a newer kilnd wrote it, or the row is corrupt).
Error unknown_node_value(const std::string& id, std::string_view column, const std::string& value);

// An optional enum as stored: its to_string text, or NULL when unset.
template <typename E>
std::optional<std::string> opt_text(const std::optional<E>& e) {
  if (!e) return std::nullopt;
  return std::string(to_string(*e));
}

// The strings of a JSON array column (traits, addresses); other elements
// and non-arrays are skipped, as a hand-edited row should not stop reads.
std::vector<std::string> string_list(const nlohmann::json& list);

// Statement text over one column list, in both dialects' placeholder
// spellings: `placeholder` is '?' (SQLite, ?N) or '$' (PostgreSQL, $N).
// "a, b, c"
std::string column_list(std::span<const char* const> columns);
// "INSERT INTO t (a, b) VALUES (?1, ?2)"
std::string insert_sql(std::string_view table, std::span<const char* const> columns, char placeholder);
// "UPDATE t SET b = ?2, c = ?3 WHERE a = ?1": the first column is the key.
std::string update_by_key_sql(std::string_view table, std::span<const char* const> columns, char placeholder);

}  // namespace kiln::store_rules
