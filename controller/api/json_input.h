#pragma once
// Request-body validation with JSON-pointer field errors.
//
// parse_json_body() checks Content-Type and syntax. ObjectReader then walks an
// object field by field: each accessor records a FieldError ("/bmc/address":
// "must be a string") instead of throwing, remembers which keys were read, and
// finish() reports every key nobody asked for as "unknown field". A handler
// reads everything, then turns the collected errors into one 400 listing them
// all. Null counts as "absent" for optional fields (JSON Merge Patch uses null
// to mean "reset to the default").

#include <utility>  // before Asio: Boost 1.74 awaitable.hpp uses std::exchange
#include <initializer_list>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "common/http/server.h"
#include "common/result.h"

namespace kiln::api {

namespace bhttp = boost::beast::http;

// Appends `key` to a JSON pointer, escaping '~' and '/' (RFC 6901).
std::string json_pointer_append(std::string_view base, std::string_view key);

// Checks Content-Type against `accepted` media types (parameters such as
// charset ignored; 415 otherwise) and parses the body with kiln::parse_json
// (common/json_text.h): 400 for malformed JSON or invalid UTF-8 (field "",
// with the byte offset only: the message never echoes body text, which may
// hold a password) and for nesting past 64 levels (naming the JSON pointer
// where it went too deep). An empty body is 400 unless `allow_empty`, which
// yields {}.
Result<nlohmann::json> parse_json_body(const http::Request& req,
                                       std::initializer_list<std::string_view> accepted,
                                       bool allow_empty = false);

// Field errors -> one 400 Error ("invalid request: /a: msg; /b: msg").
Error invalid_fields(std::vector<FieldError> errors);

class ObjectReader {
 public:
  // `value` must outlive the reader. When it is not an object, one error is
  // recorded at `pointer` and every accessor returns nothing.
  ObjectReader(const nlohmann::json& value, std::string pointer, std::vector<FieldError>& errors);

  bool is_object() const { return obj_ != nullptr; }
  std::string pointer(std::string_view key) const { return json_pointer_append(pointer_, key); }
  bool has(std::string_view key);  // present and not null; marks it read

  std::optional<std::string> string(std::string_view key, bool required = false);
  std::optional<bool> boolean(std::string_view key);
  std::optional<int64_t> integer(std::string_view key);
  // Present-and-not-null object/array members (type errors recorded).
  const nlohmann::json* object(std::string_view key, bool required = false);
  const nlohmann::json* array(std::string_view key);
  std::optional<std::vector<std::string>> string_array(std::string_view key);
  // Marks a key read without checking it (a caller reports on it itself).
  void mark(std::string_view key);
  void error(std::string_view key, std::string message);

  // Records "unknown field" for every key never accessed.
  void finish();

 private:
  const nlohmann::json* get(std::string_view key);

  const nlohmann::json* obj_ = nullptr;
  std::string pointer_;
  std::vector<FieldError>& errors_;
  std::set<std::string, std::less<>> seen_;
};

}  // namespace kiln::api
