#pragma once
// Command-line words as the verbs read them: positional words, and --flags
// with values (`--name value` or `--name=value`; `-o`, `-c`, `-f` are the
// short forms of --output, --column, --file). A flag is a switch (no value)
// when it is in kSwitches; every other flag takes the next word. Repeated
// flags keep every value in order (-c id -c name).
//
// Parsing knows nothing of verbs: each verb then says which flags it takes
// (Args::check_flags), so an unknown flag is a usage error naming it.

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "common/result.h"

namespace kiln::cli {

class Args {
 public:
  // Never fails today (a flag missing its value is reported by check_flags,
  // so an unknown flag is named first); Result for what a stricter parse may need.
  static Result<Args> parse(const std::vector<std::string>& words);

  const std::vector<std::string>& positional() const { return positional_; }
  bool has(const std::string& flag) const { return flags_.count(flag) > 0; }
  // The last value given for `flag`.
  std::optional<std::string> get(const std::string& flag) const;
  std::vector<std::string> all(const std::string& flag) const;
  // kInvalidArgument naming the first flag not in `allowed` (nor global),
  // else a flag given last without its value.
  Status check_flags(const std::set<std::string>& allowed) const;
  // Drops the first `n` positional words (the verb's own words).
  void consume(std::size_t n);

  // Flags every verb takes (connection, output, help).
  static const std::set<std::string>& global_flags();

 private:
  std::vector<std::string> positional_;
  std::multimap<std::string, std::string> flags_;
  std::vector<std::string> order_;  // flag names in order seen, for errors
  std::string missing_value_;       // a flag that ended the words without its value
};

}  // namespace kiln::cli
