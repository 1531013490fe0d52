#pragma once
// A request body from `-f FILE` (YAML or JSON, spec_file.h) and flags that
// each fill one field of it, flags winning over the file. The create and
// patch verbs of every resource describe their flags as data (BodyFlag) and
// share this one reading of them. Pure but for reading the file; any thread.

#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/args.h"
#include "common/result.h"

namespace kiln::cli {

// --flag fills the body's `pointer`; `type` says how the word becomes JSON:
// 's' the string, 'i' an integer, 'a' repeatable into an array of strings,
// 'b' a switch that sets true, 'n' a switch that sets false (--private sets
// /public to false). 'b' and 'n' flags must be in args.cc's switches.
struct BodyFlag {
  std::string flag;
  std::string pointer;
  char type = 's';
};

// The body: the file's object (when -f is given) with the flags' fields set
// over it. Errors: kInvalidArgument naming the file (unreadable, not YAML,
// not an object) or the flag (an 'i' flag that is no integer).
Result<nlohmann::json> body_from(const Args& args, const std::vector<BodyFlag>& flags);

// The flag names a verb taking `flags` accepts: theirs and "file".
std::set<std::string> flag_names(const std::vector<BodyFlag>& flags);

// "(-f FILE | --name V | --public)" for a usage line.
std::string flags_usage(const std::vector<BodyFlag>& flags, const std::string& file_word = "FILE");

}  // namespace kiln::cli
