#include "controller/api/json_input.h"

#include <algorithm>
#include <cctype>

#include "common/json_text.h"

namespace kiln::api {
namespace {

std::string lower_media_type(std::string_view ct) {
  std::size_t semi = ct.find(';');
  std::string_view t = ct.substr(0, semi);
  while (!t.empty() && std::isspace(static_cast<unsigned char>(t.back()))) t.remove_suffix(1);
  while (!t.empty() && std::isspace(static_cast<unsigned char>(t.front()))) t.remove_prefix(1);
  std::string out(t);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

}  // namespace

std::string json_pointer_append(std::string_view base, std::string_view key) {
  std::string out(base);
  out.push_back('/');
  for (char c : key) {
    if (c == '~') out.append("~0");
    else if (c == '/') out.append("~1");
    else out.push_back(c);
  }
  return out;
}

Result<nlohmann::json> parse_json_body(const http::Request& req,
                                       std::initializer_list<std::string_view> accepted,
                                       bool allow_empty) {
  const std::string& body = req.body();
  bool empty = std::all_of(body.begin(), body.end(),
                           [](unsigned char c) { return std::isspace(c) != 0; });
  auto ct_it = req.find(bhttp::field::content_type);
  if (empty && allow_empty) return nlohmann::json::object();
  std::string media = ct_it == req.end() ? std::string() : lower_media_type(ct_it->value());
  if (std::find(accepted.begin(), accepted.end(), media) == accepted.end()) {
    std::string list;
    for (std::string_view a : accepted) list.append(list.empty() ? "" : ", ").append(a);
    return Error(Code::kUnsupportedMedia,
                 (media.empty() ? std::string("missing Content-Type") : "Content-Type " + media +
                                                                            " not supported") +
                     "; use " + list);
  }
  if (empty) return Error(Code::kInvalidArgument, "request body is empty", {{"", "required"}});
  return parse_json(body);
}

Error invalid_fields(std::vector<FieldError> errors) {
  std::string detail = "invalid request";
  for (std::size_t i = 0; i < errors.size(); ++i)
    detail.append(i == 0 ? ": " : "; ").append(errors[i].field).append(": ").append(errors[i].message);
  return Error(Code::kInvalidArgument, std::move(detail), std::move(errors));
}

ObjectReader::ObjectReader(const nlohmann::json& value, std::string pointer,
                           std::vector<FieldError>& errors)
    : pointer_(std::move(pointer)), errors_(errors) {
  if (value.is_object()) obj_ = &value;
  else errors_.push_back({pointer_, "must be an object"});
}

const nlohmann::json* ObjectReader::get(std::string_view key) {
  if (!obj_) return nullptr;
  seen_.emplace(key);
  auto it = obj_->find(key);
  if (it == obj_->end() || it->is_null()) return nullptr;
  return &*it;
}

bool ObjectReader::has(std::string_view key) { return get(key) != nullptr; }

void ObjectReader::mark(std::string_view key) { seen_.emplace(key); }

void ObjectReader::error(std::string_view key, std::string message) {
  errors_.push_back({pointer(key), std::move(message)});
}

std::optional<std::string> ObjectReader::string(std::string_view key, bool required) {
  const nlohmann::json* v = get(key);
  if (!v) {
    if (required && obj_) error(key, "required");
    return std::nullopt;
  }
  if (!v->is_string()) {
    error(key, "must be a string");
    return std::nullopt;
  }
  return v->get<std::string>();
}

std::optional<bool> ObjectReader::boolean(std::string_view key) {
  const nlohmann::json* v = get(key);
  if (!v) return std::nullopt;
  if (!v->is_boolean()) {
    error(key, "must be a boolean");
    return std::nullopt;
  }
  return v->get<bool>();
}

std::optional<int64_t> ObjectReader::integer(std::string_view key) {
  const nlohmann::json* v = get(key);
  if (!v) return std::nullopt;
  if (!v->is_number_integer()) {
    error(key, "must be an integer");
    return std::nullopt;
  }
  return v->get<int64_t>();
}

const nlohmann::json* ObjectReader::object(std::string_view key, bool required) {
  const nlohmann::json* v = get(key);
  if (!v) {
    if (required && obj_) error(key, "required");
    return nullptr;
  }
  if (!v->is_object()) {
    error(key, "must be an object");
    return nullptr;
  }
  return v;
}

const nlohmann::json* ObjectReader::array(std::string_view key) {
  const nlohmann::json* v = get(key);
  if (!v) return nullptr;
  if (!v->is_array()) {
    error(key, "must be an array");
    return nullptr;
  }
  return v;
}

std::optional<std::vector<std::string>> ObjectReader::string_array(std::string_view key) {
  const nlohmann::json* v = array(key);
  if (!v) return std::nullopt;
  std::vector<std::string> out;
  bool ok = true;
  for (std::size_t i = 0; i < v->size(); ++i) {
    const nlohmann::json& item = (*v)[i];
    if (!item.is_string()) {
      errors_.push_back({json_pointer_append(pointer(key), std::to_string(i)), "must be a string"});
      ok = false;
      continue;
    }
    out.push_back(item.get<std::string>());
  }
  if (!ok) return std::nullopt;
  return out;
}

void ObjectReader::finish() {
  if (!obj_) return;
  for (auto it = obj_->begin(); it != obj_->end(); ++it)
    if (!seen_.contains(it.key())) errors_.push_back({pointer(it.key()), "unknown field"});
}

}  // namespace kiln::api
