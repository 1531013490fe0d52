#include "common/json_text.h"

#include <algorithm>
#include <string>
#include <vector>

namespace kiln {
namespace {

using json = nlohmann::json;

// Builds the value through nlohmann's own DOM builder while keeping the path
// to the current value, so a container past the depth limit is refused before
// it is built and named by its JSON pointer. With `members`, a top-level
// object member not named there is parsed (and so checked) but never handed
// to the DOM builder: skip_depth_ is how deep inside such a member the parser
// is, 0 when it is in none.
class BoundedDomBuilder {
 public:
  BoundedDomBuilder(json& out, std::size_t max_depth, std::span<const std::string_view> members = {})
      : dom_(out, /*allow_exceptions=*/false), max_depth_(max_depth), members_(members) {}

  bool null() { return scalar() || dom_.null(); }
  bool boolean(bool v) { return scalar() || dom_.boolean(v); }
  bool number_integer(json::number_integer_t v) { return scalar() || dom_.number_integer(v); }
  bool number_unsigned(json::number_unsigned_t v) { return scalar() || dom_.number_unsigned(v); }
  bool number_float(json::number_float_t v, const json::string_t& s) { return scalar() || dom_.number_float(v, s); }
  bool string(json::string_t& v) { return scalar() || dom_.string(v); }
  bool binary(json::binary_t& v) { return scalar() || dom_.binary(v); }

  bool start_object(std::size_t n) { return open(false) && (skipping() || dom_.start_object(n)); }
  bool key(json::string_t& k) {
    frames_.back().key = k;
    if (skipping()) return true;
    if (!members_.empty() && frames_.size() == 1 &&
        std::find(members_.begin(), members_.end(), std::string_view(k)) == members_.end()) {
      skip_depth_ = 1;  // the member's value starts now; nothing of it is built
      return true;
    }
    return dom_.key(k);
  }
  bool end_object() { return close() || dom_.end_object(); }
  bool start_array(std::size_t n) { return open(true) && (skipping() || dom_.start_array(n)); }
  bool end_array() { return close() || dom_.end_array(); }

  bool parse_error(std::size_t position, const std::string& /*last_token*/, const nlohmann::detail::exception& ex) {
    error_byte_ = position;
    // nlohmann's message quotes the input; keep only the kind of error.
    bad_utf8_ = std::string_view(ex.what()).find("UTF-8") != std::string_view::npos;
    return false;
  }

  bool too_deep() const { return too_deep_; }
  const std::string& too_deep_pointer() const { return too_deep_pointer_; }
  std::size_t error_byte() const { return error_byte_; }
  bool bad_utf8() const { return bad_utf8_; }

 private:
  struct Frame {
    bool array = false;
    std::size_t next_index = 0;  // arrays: index the next value gets
    std::size_t index = 0;       // arrays: index of the current value
    std::string key;             // objects: key of the current value
  };

  // A value starts inside the innermost container: advance its position.
  void value() {
    if (!frames_.empty() && frames_.back().array) frames_.back().index = frames_.back().next_index++;
  }

  bool skipping() const { return skip_depth_ > 0; }

  // A scalar value: true when it belongs to a skipped member (which it ends
  // when it is that member's whole value), false when the DOM must take it.
  bool scalar() {
    value();
    if (!skipping()) return false;
    if (skip_depth_ == 1) skip_depth_ = 0;
    return true;
  }

  bool open(bool array) {
    value();
    if (frames_.size() >= max_depth_) {
      too_deep_ = true;
      too_deep_pointer_ = pointer();
      return false;
    }
    frames_.push_back(Frame{array, 0, 0, {}});
    if (skipping()) ++skip_depth_;
    return true;
  }

  // A container ends: true when it was inside a skipped member.
  bool close() {
    frames_.pop_back();
    if (!skipping()) return false;
    if (--skip_depth_ == 1) skip_depth_ = 0;
    return true;
  }

  std::string pointer() const {
    std::string out;
    for (const Frame& f : frames_) {
      out.push_back('/');
      if (f.array) {
        out.append(std::to_string(f.index));
        continue;
      }
      for (char c : f.key) {
        if (c == '~') out.append("~0");
        else if (c == '/') out.append("~1");
        else out.push_back(c);
      }
    }
    return out;
  }

  nlohmann::detail::json_sax_dom_parser<json> dom_;
  const std::size_t max_depth_;
  const std::span<const std::string_view> members_;
  std::size_t skip_depth_ = 0;
  std::vector<Frame> frames_;
  bool too_deep_ = false;
  std::string too_deep_pointer_;
  std::size_t error_byte_ = 0;
  bool bad_utf8_ = false;
};

// Length of the well-formed UTF-8 sequence at s[i], or 0 when ill-formed
// (Unicode 15, table 3-7).
std::size_t utf8_sequence(std::string_view s, std::size_t i) {
  const auto b = [&](std::size_t k) { return static_cast<unsigned char>(s[i + k]); };
  const std::size_t left = s.size() - i;
  const unsigned char c = b(0);
  if (c < 0x80) return 1;
  const auto cont = [&](std::size_t k, unsigned char lo = 0x80, unsigned char hi = 0xBF) {
    return k < left && b(k) >= lo && b(k) <= hi;
  };
  if (c >= 0xC2 && c <= 0xDF) return cont(1) ? 2 : 0;
  if (c == 0xE0) return cont(1, 0xA0) && cont(2) ? 3 : 0;
  if ((c >= 0xE1 && c <= 0xEC) || c == 0xEE || c == 0xEF) return cont(1) && cont(2) ? 3 : 0;
  if (c == 0xED) return cont(1, 0x80, 0x9F) && cont(2) ? 3 : 0;
  if (c == 0xF0) return cont(1, 0x90) && cont(2) && cont(3) ? 4 : 0;
  if (c >= 0xF1 && c <= 0xF3) return cont(1) && cont(2) && cont(3) ? 4 : 0;
  if (c == 0xF4) return cont(1, 0x80, 0x8F) && cont(2) && cont(3) ? 4 : 0;
  return 0;
}

}  // namespace

Result<json> parse_json(std::string_view text, const JsonLimits& limits) { return parse_json_members(text, {}, limits); }

Result<json> parse_json_members(std::string_view text, std::span<const std::string_view> members,
                                const JsonLimits& limits) {
  json out;
  BoundedDomBuilder builder(out, limits.max_depth, members);
  const bool ok = json::sax_parse(text.begin(), text.end(), &builder, json::input_format_t::json,
                                  /*strict=*/true, /*ignore_comments=*/false);
  if (ok) return out;
  if (builder.too_deep()) {
    std::string msg = "nested deeper than " + std::to_string(limits.max_depth) + " levels";
    std::string field = builder.too_deep_pointer();
    return Error(Code::kInvalidArgument, (field.empty() ? std::string("body") : field) + ": " + msg,
                 {{field, msg}});
  }
  std::string msg = std::string(builder.bad_utf8() ? "invalid UTF-8" : "malformed JSON") + " near byte " +
                    std::to_string(builder.error_byte());
  return Error(Code::kInvalidArgument, msg, {{"", msg}});
}

std::string dump_json(const json& value, int indent) {
  return value.dump(indent, ' ', /*ensure_ascii=*/false, json::error_handler_t::replace);
}

bool is_valid_utf8(std::string_view s) {
  for (std::size_t i = 0; i < s.size();) {
    std::size_t n = utf8_sequence(s, i);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

std::string to_valid_utf8(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size();) {
    std::size_t n = utf8_sequence(s, i);
    if (n == 0) {
      out.append("\xEF\xBF\xBD");
      ++i;
      continue;
    }
    out.append(s.substr(i, n));
    i += n;
  }
  return out;
}

}  // namespace kiln
