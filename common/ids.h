#pragma once
// Identifiers: random UUIDv4 strings and URL-safe random tokens.

#include <string>
#include <string_view>

namespace kiln {

// A random (version 4) UUID in lowercase canonical form, from OpenSSL's CSPRNG.
std::string new_uuid();
// True when `s` is a canonical UUID (8-4-4-4-12 hex, either case).
bool is_uuid(std::string_view s);
// `bytes` random bytes as lowercase hex (2*bytes characters). Used for tokens.
std::string random_hex(size_t bytes);

}  // namespace kiln
