#pragma once
// Hardware profiles as the API reads and writes them (schemas/profile.schema.json)
// and the shipped defaults (schemas/profiles/*.json, embedded at build time).
//
// The document's sections and field names are the ones kiln-agent reads
// (agent/validate/checks/profile.h), so kilnd sends a stored profile to the
// agent as it is; the API adds `description`, `plans` (the checks that gate
// each plan), `price` and `virtual` (the VM flavour), which the agent
// ignores.

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/result.h"
#include "controller/model/validation.h"
#include "controller/store/store.h"

namespace kiln::api {

// Checks a whole profile document. kInvalidArgument listing every bad field
// by JSON pointer ("/thresholds/hbm_gbps_min": "must be a number >= 0"),
// unknown fields included. `name` must be present and well formed.
Status check_profile_doc(const nlohmann::json& doc);

// The defaults shipped in schemas/profiles (parsed and checked; a broken file
// is a build mistake and is skipped with its error in `errors`).
std::vector<Profile> default_profiles(std::vector<std::string>* errors = nullptr);

// Creates the shipped defaults that were never created before (an operator's
// edits and deletions are kept). Returns the names created.
Result<std::vector<std::string>> seed_default_profiles(NodeStore& store);

// The profile document the API shows: the stored doc plus created_at,
// updated_at (RFC 3339) and version.
nlohmann::json profile_json(const Profile& p);

}  // namespace kiln::api
