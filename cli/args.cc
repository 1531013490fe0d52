#include "cli/args.h"

namespace kiln::cli {

namespace {

// password-stdin: a secret read from standard input (secret_flag.h).
const std::set<std::string> kSwitches = {"wait",    "long", "help",  "follow",        "public",
                                         "private", "pxe",  "force", "password-stdin"};

std::string long_name(const std::string& word) {
  if (word == "-o") return "output";
  if (word == "-c") return "column";
  if (word == "-f") return "file";
  if (word == "-h") return "help";
  return word.substr(2);
}

}  // namespace

const std::set<std::string>& Args::global_flags() {
  static const std::set<std::string> flags = {"url", "token", "ca-file", "context", "output", "column", "long",
                                              "help"};
  return flags;
}

Result<Args> Args::parse(const std::vector<std::string>& words) {
  Args a;
  bool only_positional = false;
  for (std::size_t i = 0; i < words.size(); ++i) {
    const std::string& w = words[i];
    if (only_positional || w.size() < 2 || w[0] != '-' || (w[1] != '-' && w.size() != 2)) {
      a.positional_.push_back(w);
      continue;
    }
    if (w == "--") {
      only_positional = true;
      continue;
    }
    std::string name = long_name(w);
    std::optional<std::string> value;
    if (auto eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
    }
    if (!value && !kSwitches.count(name)) {
      if (i + 1 >= words.size()) {
        a.missing_value_ = name;  // reported by check_flags, after an unknown flag
        value = "";
      } else {
        value = words[++i];
      }
    }
    a.flags_.emplace(name, value.value_or(""));
    a.order_.push_back(name);
  }
  return a;
}

std::optional<std::string> Args::get(const std::string& flag) const {
  auto range = flags_.equal_range(flag);
  if (range.first == range.second) return std::nullopt;
  return std::prev(range.second)->second;
}

std::vector<std::string> Args::all(const std::string& flag) const {
  std::vector<std::string> out;
  auto range = flags_.equal_range(flag);
  for (auto it = range.first; it != range.second; ++it) out.push_back(it->second);
  return out;
}

Status Args::check_flags(const std::set<std::string>& allowed) const {
  for (const std::string& name : order_) {
    if (!allowed.count(name) && !global_flags().count(name))
      return Error::invalid("--" + name, "unknown flag for this command (see --help)");
  }
  if (!missing_value_.empty()) return Error::invalid("--" + missing_value_, "needs a value");
  return ok_status();
}

void Args::consume(std::size_t n) {
  positional_.erase(positional_.begin(), positional_.begin() + static_cast<std::ptrdiff_t>(std::min(n, positional_.size())));
}

}  // namespace kiln::cli
