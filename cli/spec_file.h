#pragma once
// Reading a -f file (YAML or JSON; JSON is YAML) into JSON, keeping YAML's
// types: a plain 2 is a number, "2" a string, true a boolean, ~ null. So a
// spec's `count: "2"` stays a string and the schema check can say so.

#include <string>

#include <nlohmann/json.hpp>

#include "common/result.h"

namespace kiln::cli {

// `path` "-" reads stdin. Errors: kInvalidArgument naming the file (missing,
// unreadable, not YAML, with the line of the syntax error).
Result<nlohmann::json> read_spec_file(const std::string& path);

// The same for text already read. `source` names it in errors.
Result<nlohmann::json> parse_yaml_text(const std::string& text, const std::string& source);

}  // namespace kiln::cli
