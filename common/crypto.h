#pragma once
// Cryptography Kiln needs, on OpenSSL 3:
//  - sha256_hex: token hashing (tokens are stored only as their SHA-256);
//  - SecretBox: AES-256-GCM sealing of secrets at rest (BMC passwords).
//
// Sealed format (base64 of): "k1" | 12-byte random nonce | ciphertext | 16-byte tag.
// The "k1" prefix versions the format so a key rotation can add "k2" later.

#include <array>
#include <string>
#include <string_view>

#include "common/result.h"

namespace kiln {

std::string sha256_hex(std::string_view data);

// Incremental SHA-256 (files and request bodies hashed as they pass).
class Sha256 {
 public:
  Sha256();  // throws std::runtime_error when OpenSSL cannot set up the digest
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;
  void update(std::string_view data);
  // The digest of everything passed so far, lowercase hex. Once only.
  std::string hex_digest();

 private:
  void* ctx_;  // EVP_MD_CTX
};
// Constant-time comparison of two equal-length strings (false when lengths differ).
bool constant_time_equal(std::string_view a, std::string_view b);

// The TLS pin kilnd hands its agents (docs/agent-protocol.md, "TLS"):
// SHA-256 hex of the DER encoding of the first certificate in PEM text (the
// leaf of a chain file). kInvalidArgument when there is no certificate.
Result<std::string> certificate_pem_sha256(std::string_view pem);
// The same for a PEM file; kInternal when it cannot be read.
Result<std::string> certificate_file_sha256(const std::string& path);

std::string base64_encode(std::string_view data);
Result<std::string> base64_decode(std::string_view text);

class SecretBox {
 public:
  using Key = std::array<unsigned char, 32>;
  explicit SecretBox(const Key& key) : key_(key) {}

  // Loads the 32-byte key from `path`, creating it (mode 0600, random) when absent.
  // Errors: kInternal when the file exists with the wrong size or cannot be written,
  // kPermissionDenied when an existing key file is readable by group/others.
  static Result<SecretBox> open_key_file(const std::string& path);

  // Encrypts `plaintext`; never fails short of an OpenSSL bug (then throws).
  std::string seal(std::string_view plaintext) const;
  // Decrypts a value produced by seal(); kInternal when tampered with or wrong key.
  Result<std::string> open(std::string_view sealed) const;

 private:
  Key key_;
};

}  // namespace kiln
