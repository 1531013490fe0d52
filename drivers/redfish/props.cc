#include "drivers/redfish/props.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>

#include "common/machine_values.h"

namespace kiln::redfish {

namespace {

std::string trim(std::string s) {
  auto blank = [](unsigned char c) { return std::isspace(c) != 0; };
  while (!s.empty() && blank(static_cast<unsigned char>(s.back()))) s.pop_back();
  std::size_t i = 0;
  while (i < s.size() && blank(static_cast<unsigned char>(s[i]))) ++i;
  return s.substr(i);
}

std::optional<double> decimal(const std::string& s) {
  const std::string t = trim(s);
  if (t.empty()) return std::nullopt;
  double v = 0;
  auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
  if (ec != std::errc() || end != t.data() + t.size() || !std::isfinite(v)) return std::nullopt;
  return v;
}

}  // namespace

std::string lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

Props::Props(const nlohmann::json& resource, std::string uri, std::vector<std::string>& warnings)
    : r_(resource), uri_(std::move(uri)), warnings_(warnings) {}

Props::~Props() { flush(); }

void Props::note(const char* path) {
  if (std::find(noted_.begin(), noted_.end(), path) == noted_.end()) noted_.emplace_back(path);
}

std::string Props::clean(const char* path, const std::string& raw) {
  // printable_field also trims and folds blanks, which needs no warning;
  // a value check_printable would refuse does.
  if (!check_printable(raw, kMaxBmcText) && std::find(cleaned_.begin(), cleaned_.end(), path) == cleaned_.end())
    cleaned_.emplace_back(path);
  return printable_field(raw, kMaxBmcText);
}

void Props::flush() {
  // The URI is the BMC's text too.
  const std::string where = uri_.empty() ? std::string("(resource)") : printable_field(uri_, kMaxBmcText);
  auto list = [](const std::vector<std::string>& paths) {
    std::string l;
    for (std::size_t i = 0; i < paths.size(); ++i) l += (i ? ", " : "") + paths[i];
    return l;
  };
  if (!noted_.empty()) warnings_.push_back(where + ": null or wrongly typed: " + list(noted_) + "; treated as absent");
  if (!cleaned_.empty())
    warnings_.push_back(where + ": control characters, invalid UTF-8 or excess length removed from: " +
                        list(cleaned_));
  noted_.clear();
  cleaned_.clear();
}

const nlohmann::json* Props::find(const char* path) {
  const nlohmann::json* cur = &r_;
  std::string_view rest(path);
  while (true) {
    if (!cur->is_object()) {
      if (!cur->is_null() || cur != &r_) note(path);
      return nullptr;
    }
    const std::size_t dot = rest.find('.');
    const std::string key(rest.substr(0, dot));
    auto it = cur->find(key);
    if (it == cur->end()) return nullptr;
    cur = &*it;
    if (dot == std::string_view::npos) return cur;
    if (cur->is_null()) {
      note(path);
      return nullptr;
    }
    rest.remove_prefix(dot + 1);
  }
}

std::string Props::str(const char* path) {
  const nlohmann::json* v = find(path);
  if (!v) return {};
  if (v->is_string()) return clean(path, v->get<std::string>());
  note(path);
  return {};
}

std::optional<double> Props::number(const char* path) {
  const nlohmann::json* v = find(path);
  if (!v) return std::nullopt;
  if (v->is_number()) return v->get<double>();
  if (v->is_string()) {
    if (auto d = decimal(v->get<std::string>())) return d;
  }
  note(path);
  return std::nullopt;
}

std::optional<int64_t> Props::integer(const char* path) {
  const nlohmann::json* v = find(path);
  if (!v) return std::nullopt;
  if (v->is_number_integer()) return v->get<int64_t>();
  std::optional<double> d;
  if (v->is_number_float()) d = v->get<double>();
  if (v->is_string()) d = decimal(v->get<std::string>());
  // 2^62 keeps the cast defined; nothing a BMC counts comes near it.
  if (d && std::floor(*d) == *d && std::fabs(*d) < 4.6e18) return static_cast<int64_t>(*d);
  note(path);
  return std::nullopt;
}

std::optional<bool> Props::boolean(const char* path) {
  const nlohmann::json* v = find(path);
  if (!v) return std::nullopt;
  if (v->is_boolean()) return v->get<bool>();
  note(path);
  return std::nullopt;
}

std::string Props::link(const char* path) {
  const nlohmann::json* v = find(path);
  if (!v) return {};
  if (v->is_object()) {
    auto id = v->find("@odata.id");
    if (id != v->end() && id->is_string()) return id->get<std::string>();
  }
  note(path);
  return {};
}

std::vector<std::string> Props::links(const char* path) {
  std::vector<std::string> out;
  const nlohmann::json* v = find(path);
  if (!v) return out;
  auto one = [&](const nlohmann::json& l) {
    if (l.is_object()) {
      auto id = l.find("@odata.id");
      if (id != l.end() && id->is_string()) {
        out.push_back(id->get<std::string>());
        return;
      }
    }
    note(path);
  };
  if (v->is_array()) {
    for (const auto& l : *v) one(l);
  } else {
    one(*v);
  }
  return out;
}

std::vector<std::string> Props::strings(const char* path) {
  std::vector<std::string> out;
  const nlohmann::json* v = find(path);
  if (!v) return out;
  if (!v->is_array()) {
    note(path);
    return out;
  }
  for (const auto& s : *v) {
    if (s.is_string()) out.push_back(clean(path, s.get<std::string>()));
    else note(path);
  }
  return out;
}

bool Props::absent() { return str("Status.State") == "Absent"; }

}  // namespace kiln::redfish
