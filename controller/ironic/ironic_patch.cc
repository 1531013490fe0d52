#include "controller/ironic/ironic_patch.h"

#include <charconv>

namespace kiln::ironic {
namespace {

using nlohmann::json;

Error op_error(std::size_t i, std::string_view member, std::string message) {
  return Error::invalid("/" + std::to_string(i) + "/" + std::string(member), std::move(message));
}

// An array index token: "0" or digits without a leading zero.
std::optional<std::size_t> array_index(const std::string& t) {
  if (t.empty() || t.size() > 9 || (t.size() > 1 && t[0] == '0')) return std::nullopt;
  std::size_t n = 0;
  auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), n);
  if (ec != std::errc() || end != t.data() + t.size()) return std::nullopt;
  return n;
}

}  // namespace

Result<std::vector<std::string>> parse_pointer(std::string_view pointer) {
  if (pointer.empty() || pointer.front() != '/')
    return Error::invalid("path", "must be a JSON pointer starting with '/'");
  std::vector<std::string> tokens;
  std::string cur;
  for (std::size_t i = 1; i <= pointer.size(); ++i) {
    if (i == pointer.size() || pointer[i] == '/') {
      tokens.push_back(std::move(cur));
      cur.clear();
      if (tokens.size() > kMaxPathDepth)
        return Error::invalid("path", "deeper than " + std::to_string(kMaxPathDepth) + " levels");
      continue;
    }
    if (pointer[i] == '~') {
      if (i + 1 >= pointer.size() || (pointer[i + 1] != '0' && pointer[i + 1] != '1'))
        return Error::invalid("path", "'~' must be followed by 0 or 1 (RFC 6901)");
      cur.push_back(pointer[i + 1] == '0' ? '~' : '/');
      ++i;
      continue;
    }
    cur.push_back(pointer[i]);
  }
  return tokens;
}

Status apply_json_patch(json& doc, const json& patch) {
  if (!patch.is_array()) return Error::invalid("", "a JSON Patch must be an array of operations");
  if (patch.empty()) return Error::invalid("", "the patch holds no operation");
  if (patch.size() > kMaxPatchOps)
    return Error::invalid("", "at most " + std::to_string(kMaxPatchOps) + " operations per patch");
  json work = doc;
  for (std::size_t i = 0; i < patch.size(); ++i) {
    const json& op = patch[i];
    if (!op.is_object()) return Error::invalid("/" + std::to_string(i), "must be an object");
    for (const auto& [k, v] : op.items()) {
      (void)v;
      if (k != "op" && k != "path" && k != "value") return op_error(i, k, "unknown member");
    }
    auto op_it = op.find("op");
    if (op_it == op.end() || !op_it->is_string()) return op_error(i, "op", "required: add, replace or remove");
    const std::string name = op_it->get<std::string>();
    if (name != "add" && name != "replace" && name != "remove")
      return op_error(i, "op", "must be add, replace or remove");
    auto path_it = op.find("path");
    if (path_it == op.end() || !path_it->is_string()) return op_error(i, "path", "required: a JSON pointer");
    Result<std::vector<std::string>> tokens = parse_pointer(path_it->get<std::string>());
    if (!tokens) return op_error(i, "path", tokens.error().fields.front().message);
    const bool needs_value = name != "remove";
    auto value_it = op.find("value");
    if (needs_value && value_it == op.end()) return op_error(i, "value", "required for " + name);
    if (!needs_value && value_it != op.end()) return op_error(i, "value", "not allowed for remove");

    // Walk to the parent of the target.
    json* parent = &work;
    for (std::size_t t = 0; t + 1 < tokens->size(); ++t) {
      const std::string& tok = (*tokens)[t];
      if (parent->is_object()) {
        auto it = parent->find(tok);
        if (it == parent->end()) return op_error(i, "path", "no member at " + path_it->get<std::string>());
        parent = &*it;
      } else if (parent->is_array()) {
        std::optional<std::size_t> idx = array_index(tok);
        if (!idx || *idx >= parent->size()) return op_error(i, "path", "no element at " + path_it->get<std::string>());
        parent = &(*parent)[*idx];
      } else {
        return op_error(i, "path", "nothing to descend into at " + path_it->get<std::string>());
      }
    }
    const std::string& last = tokens->back();
    if (parent->is_object()) {
      const bool exists = parent->contains(last);
      if (name != "add" && !exists)
        return op_error(i, "path", "no member to " + name + " at " + path_it->get<std::string>());
      if (name == "remove")
        parent->erase(last);
      else
        (*parent)[last] = *value_it;
    } else if (parent->is_array()) {
      if (name == "add" && last == "-") {
        parent->push_back(*value_it);
        continue;
      }
      std::optional<std::size_t> idx = array_index(last);
      const std::size_t bound = name == "add" ? parent->size() + 1 : parent->size();
      if (!idx || *idx >= bound) return op_error(i, "path", "no element at " + path_it->get<std::string>());
      if (name == "add")
        parent->insert(parent->begin() + static_cast<std::ptrdiff_t>(*idx), *value_it);
      else if (name == "replace")
        (*parent)[*idx] = *value_it;
      else
        parent->erase(*idx);
    } else {
      return op_error(i, "path", "the parent of " + path_it->get<std::string>() + " is not an object or array");
    }
  }
  doc = std::move(work);
  return ok_status();
}

std::vector<std::string> patched_fields(const json& patch) {
  std::vector<std::string> out;
  if (!patch.is_array()) return out;
  for (const json& op : patch) {
    if (!op.is_object() || !op.contains("path") || !op["path"].is_string()) continue;
    Result<std::vector<std::string>> t = parse_pointer(op["path"].get<std::string>());
    if (t && !t->empty()) out.push_back(t->front());
  }
  return out;
}

}  // namespace kiln::ironic
