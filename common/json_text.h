#pragma once
// JSON text from outside the process, and JSON text that leaves it.
//
// parse_json() is the one entry point for every JSON body kilnd reads from
// someone it does not control: API requests, agent reports, what a BMC
// answers. nlohmann::json parses iteratively, but copying, comparing and
// walking a value recurse, so a 20 KB body nested 10,000 deep overflows the
// stack later, far from the parser. The limit is therefore enforced while
// parsing (a SAX pass that builds the value and counts depth), before any
// copy exists. Invalid UTF-8 inside a string is a syntax error of its own.
//
// dump_json() is the one way JSON text is written for a client: strings that
// are not valid UTF-8 (an old row, a BMC's bytes) are written with U+FFFD
// instead of throwing, so a stored oddity can never turn a page into a 500.
//
// Thread-safety: pure functions.

#include <cstddef>
#include <span>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "common/result.h"

namespace kiln {

struct JsonLimits {
  // Objects and arrays nested deeper than this are refused. Kiln's own
  // documents are at most ~8 deep (a validation report's check details); 64
  // leaves room for any BMC while keeping recursion far from the stack's end.
  std::size_t max_depth = 64;
};

// Parses `text` as one JSON document. Errors (kInvalidArgument, one
// FieldError each; messages never quote the text, which may hold a secret):
//  - too deep: field = the JSON pointer of the first container past the
//    limit, "nested deeper than 64 levels";
//  - invalid UTF-8: field "", "invalid UTF-8 near byte N";
//  - any other syntax error: field "", "malformed JSON near byte N".
Result<nlohmann::json> parse_json(std::string_view text, const JsonLimits& limits = {});

// parse_json for a reader that wants a few members of a large object (a
// power sweep reads PowerState from a ComputerSystem of several KiB): when
// the document is an object, only its top-level members named in `members`
// are built; the others are still checked (syntax, UTF-8, depth), then
// dropped without a value ever being made of them. Any other document, and
// an empty `members`, is built whole. Errors as parse_json.
Result<nlohmann::json> parse_json_members(std::string_view text, std::span<const std::string_view> members,
                                          const JsonLimits& limits = {});

// Serializes `value` compactly (indent < 0) or indented, replacing invalid
// UTF-8 with U+FFFD. Never throws.
std::string dump_json(const nlohmann::json& value, int indent = -1);

// Whether `s` is well-formed UTF-8 (no overlongs, surrogates or code points
// past U+10FFFF).
bool is_valid_utf8(std::string_view s);

// `s` with every ill-formed sequence replaced by U+FFFD.
std::string to_valid_utf8(std::string_view s);

}  // namespace kiln
