#include "cli/cluster_spec.h"

#include <set>

namespace kiln::cli {

namespace {

using nlohmann::json;

constexpr int64_t kMinLease = 60;             // kilnd's floor (allocation_input.h)
constexpr int64_t kMaxLease = 365LL * 86400;  // and its ceiling
constexpr int64_t kMaxCount = 10000;
// kilnd's bound on an allocation's user_data (controller/api/allocation_input.h),
// checked here too so a CI job learns it before anything is created.
constexpr std::size_t kMaxUserData = 64 * 1024;
constexpr std::size_t kMaxAllocationName = 63;

// A cluster or group name: a-z, 0-9, '_' and '-', starting with a letter or
// digit, with no "--" and no '-' at the end (the allocation name's
// separator must stay unambiguous; cluster_spec.h). The schema's pattern
// ^[a-z0-9][a-z0-9_]*(-[a-z0-9_]+)*$ says the same.
bool name_chars(const std::string& s) {
  if (s.empty() || s.size() > kMaxAllocationName) return false;
  if (s[0] == '-' || s[0] == '_' || s.back() == '-' || s.find("--") != std::string::npos) return false;
  for (char c : s) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
    if (!ok) return false;
  }
  return true;
}

constexpr const char* kNameRule =
    "must be 1-63 characters of a-z, 0-9, '-' and '_', starting with a letter or digit, "
    "with no \"--\" and no '-' at the end";

class Checker {
 public:
  void error(const std::string& field, const std::string& message) { errors_.push_back({field, message}); }

  void unknown_fields(const json& obj, const std::string& prefix, const std::set<std::string>& known) {
    for (auto it = obj.begin(); it != obj.end(); ++it)
      if (!known.count(it.key())) error(prefix + it.key(), "unknown field");
  }

  // A required (or, when !required, optional) string; nullopt when absent or wrong.
  std::optional<std::string> string(const json& obj, const std::string& key, const std::string& field, bool required) {
    if (!obj.contains(key)) {
      if (required) error(field, "is required");
      return std::nullopt;
    }
    if (!obj[key].is_string() || obj[key].get<std::string>().empty()) {
      error(field, "must be a non-empty string");
      return std::nullopt;
    }
    return obj[key].get<std::string>();
  }

  std::vector<std::string> strings(const json& obj, const std::string& key, const std::string& field, bool required,
                                   bool non_empty) {
    std::vector<std::string> out;
    if (!obj.contains(key)) {
      if (required) error(field, "is required");
      return out;
    }
    const json& v = obj[key];
    if (!v.is_array() || (non_empty && v.empty())) {
      error(field, non_empty ? "must be a list of one or more strings" : "must be a list of strings");
      return out;
    }
    for (std::size_t i = 0; i < v.size(); ++i) {
      if (!v[i].is_string() || v[i].get<std::string>().empty()) error(field + "[" + std::to_string(i) + "]", "must be a non-empty string");
      else out.push_back(v[i].get<std::string>());
    }
    return out;
  }

  std::vector<FieldError> take() { return std::move(errors_); }

 private:
  std::vector<FieldError> errors_;
};

}  // namespace

std::string ClusterSpec::allocation_name(const ClusterGroup& g) const {
  return name + (g.name.find('-') == std::string::npos ? "-" : "--") + g.name;
}

std::optional<ClusterPart> split_allocation_name(const std::string& allocation_name) {
  if (const auto sep = allocation_name.find("--"); sep != std::string::npos) {
    if (sep == 0 || sep + 2 >= allocation_name.size()) return std::nullopt;
    return ClusterPart{allocation_name.substr(0, sep), allocation_name.substr(sep + 2)};
  }
  const auto dash = allocation_name.rfind('-');
  if (dash == std::string::npos || dash == 0 || dash + 1 == allocation_name.size()) return std::nullopt;
  return ClusterPart{allocation_name.substr(0, dash), allocation_name.substr(dash + 1)};
}

Result<ClusterSpec> parse_cluster_spec(const json& doc) {
  Checker ck;
  ClusterSpec spec;
  if (!doc.is_object()) {
    return Error(Code::kInvalidArgument, "the spec must be a mapping",
                 {FieldError{"(spec)", "must be a mapping with name, ssh_keys and groups"}});
  }
  ck.unknown_fields(doc, "", {"name", "lease_seconds", "ssh_keys", "user_data", "groups"});
  if (auto n = ck.string(doc, "name", "name", true)) {
    if (!name_chars(*n)) ck.error("name", kNameRule);
    spec.name = *n;
  }
  if (doc.contains("lease_seconds")) {
    const json& l = doc["lease_seconds"];
    if (!l.is_number_integer() || l.get<int64_t>() < kMinLease || l.get<int64_t>() > kMaxLease)
      ck.error("lease_seconds", "must be an integer from " + std::to_string(kMinLease) + " to " + std::to_string(kMaxLease));
    else
      spec.lease_seconds = l.get<int64_t>();
  }
  spec.ssh_keys = ck.strings(doc, "ssh_keys", "ssh_keys", true, true);
  if (doc.contains("user_data")) {
    const json& u = doc["user_data"];
    if (!u.is_string())
      ck.error("user_data", "must be a string (the cloud-init user-data, e.g. starting #cloud-config)");
    else if (u.get_ref<const std::string&>().size() > kMaxUserData)
      ck.error("user_data", "must be at most " + std::to_string(kMaxUserData) + " bytes");
    else
      spec.user_data = u.get<std::string>();
  }

  if (!doc.contains("groups")) {
    ck.error("groups", "is required");
  } else if (!doc["groups"].is_array() || doc["groups"].empty()) {
    ck.error("groups", "must be a list of one or more groups");
  } else {
    std::set<std::string> seen;
    const json& groups = doc["groups"];
    for (std::size_t i = 0; i < groups.size(); ++i) {
      const std::string at = "groups[" + std::to_string(i) + "]";
      const json& g = groups[i];
      if (!g.is_object()) {
        ck.error(at, "must be a mapping with name, profile, kind, count and image");
        continue;
      }
      ck.unknown_fields(g, at + ".", {"name", "profile", "kind", "count", "image", "traits"});
      ClusterGroup group;
      if (auto n = ck.string(g, "name", at + ".name", true)) {
        group.name = *n;
        if (!name_chars(*n)) {
          ck.error(at + ".name", kNameRule);
        } else if (!seen.insert(*n).second) {
          ck.error(at + ".name", "duplicate group name " + *n);
        } else if (!spec.name.empty() && spec.allocation_name(group).size() > kMaxAllocationName) {
          ck.error(at + ".name", "makes the allocation name " + spec.allocation_name(group) + " longer than 63 characters");
        }
      }
      if (auto p = ck.string(g, "profile", at + ".profile", true)) group.profile = *p;
      if (auto k = ck.string(g, "kind", at + ".kind", true)) {
        if (*k != "baremetal" && *k != "virtual") ck.error(at + ".kind", "must be baremetal or virtual");
        group.kind = *k;
      }
      if (!g.contains("count")) {
        ck.error(at + ".count", "is required");
      } else if (!g["count"].is_number_integer() || g["count"].get<int64_t>() < 1) {
        ck.error(at + ".count", "must be an integer >= 1");
      } else if (g["count"].get<int64_t>() > kMaxCount) {
        ck.error(at + ".count", "must be at most " + std::to_string(kMaxCount));
      } else {
        group.count = g["count"].get<int64_t>();
      }
      if (auto im = ck.string(g, "image", at + ".image", true)) group.image = *im;
      group.traits = ck.strings(g, "traits", at + ".traits", false, false);
      spec.groups.push_back(std::move(group));
    }
  }
  std::vector<FieldError> errors = ck.take();
  if (!errors.empty()) {
    std::string msg = errors[0].field + ": " + errors[0].message;
    return Error(Code::kInvalidArgument, std::move(msg), std::move(errors));
  }
  return spec;
}

}  // namespace kiln::cli
