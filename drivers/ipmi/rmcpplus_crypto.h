#pragma once
// RMCP+ (IPMI v2.0 "lanplus") cryptography: cipher suites, the RAKP
// authentication codes, session key derivation, per-packet integrity and
// AES-CBC-128 confidentiality. Pure functions over bytes, no I/O, no state.
//
// Spec references are to the IPMI v2.0 rev 1.1 specification:
//   13.28  RAKP authentication algorithms (RAKP-HMAC-SHA1, RAKP-HMAC-SHA256)
//   13.31  RMCP+ session key generation (SIK, K1, K2)
//   13.28.4 integrity algorithms (HMAC-SHA1-96, HMAC-SHA256-128)
//   13.29  AES-CBC-128 confidentiality: header (IV) and trailer (padding)
//   22.15.2 cipher suite ids (3 = SHA1/SHA1-96/AES, 17 = SHA256/SHA256-128/AES)
//
// Naming follows the spec's (confusing) subscripts spelled out: "console" is
// the remote console (Kiln), "bmc" is the managed system.

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"

namespace kiln::ipmi {

using Bytes = std::vector<uint8_t>;
using ByteView = std::span<const uint8_t>;

// Table 13-17: authentication algorithm numbers.
enum class AuthAlg : uint8_t { kNone = 0x00, kHmacSha1 = 0x01, kHmacMd5 = 0x02, kHmacSha256 = 0x03 };
// Table 13-18: integrity algorithm numbers.
enum class IntegrityAlg : uint8_t {
  kNone = 0x00,
  kHmacSha1_96 = 0x01,
  kHmacMd5_128 = 0x02,
  kMd5_128 = 0x03,
  kHmacSha256_128 = 0x04,
};
// Table 13-19: confidentiality algorithm numbers.
enum class ConfidentialityAlg : uint8_t { kNone = 0x00, kAesCbc128 = 0x01 };

struct CipherSuite {
  int id = 3;
  AuthAlg auth = AuthAlg::kHmacSha1;
  IntegrityAlg integrity = IntegrityAlg::kHmacSha1_96;
  ConfidentialityAlg confidentiality = ConfidentialityAlg::kAesCbc128;
};

// The suites Kiln speaks: 3 and 17 (both authenticate, sign and encrypt).
// kInvalidArgument for any other id.
Result<CipherSuite> cipher_suite(int id);

// Length of the RAKP2/RAKP3 key exchange authentication code: the full HMAC
// (20 bytes for SHA1, 32 for SHA256).
size_t rakp_auth_code_len(AuthAlg alg);
// Length of the RAKP4 integrity check value: HMAC truncated to 12 (SHA1) or
// 16 (SHA256) bytes (13.28.1, 13.28.1b).
size_t rakp4_icv_len(AuthAlg alg);
// Length of the per-packet AuthCode: 12 for HMAC-SHA1-96, 16 for HMAC-SHA256-128.
size_t integrity_mac_len(IntegrityAlg alg);

// HMAC with the hash of `alg` (SHA1 or SHA256). Returns the full digest.
Bytes hmac(AuthAlg alg, ByteView key, ByteView data);
// Constant-time equality of two byte ranges (false when the sizes differ).
bool bytes_equal(ByteView a, ByteView b);

// Everything the RAKP exchange mixes into its codes. `role` is the entire
// RAKP1 privilege byte (e.g. 0x14: name-only lookup + ADMINISTRATOR).
struct RakpContext {
  uint32_t console_session_id = 0;  // SIDm
  uint32_t bmc_session_id = 0;      // SIDc
  std::array<uint8_t, 16> console_random{};  // Rm
  std::array<uint8_t, 16> bmc_random{};      // Rc
  std::array<uint8_t, 16> bmc_guid{};        // GUIDc
  uint8_t role = 0x14;
  std::string username;  // at most 16 bytes
};

// Kuid: the user's password as the HMAC key (at most 20 bytes). HMAC zero-pads
// keys to the block size, so the spec's "padded to 20 bytes" is the same key.
Bytes password_key(std::string_view password);

// RAKP2 key exchange authentication code (13.21), keyed with Kuid:
//   HMAC(SIDm | SIDc | Rm | Rc | GUIDc | ROLEm | ULENGTHm | UNAMEm)
Bytes rakp2_auth_code(AuthAlg alg, ByteView kuid, const RakpContext& c);
// RAKP3 key exchange authentication code (13.22), keyed with Kuid:
//   HMAC(Rc | SIDm | ROLEm | ULENGTHm | UNAMEm)
Bytes rakp3_auth_code(AuthAlg alg, ByteView kuid, const RakpContext& c);
// Session Integrity Key (13.31), keyed with Kg (the BMC key) or Kuid when Kg
// is unset:  SIK = HMAC(Rm | Rc | ROLEm | ULENGTHm | UNAMEm)
Bytes session_integrity_key(AuthAlg alg, ByteView kg_or_kuid, const RakpContext& c);
// RAKP4 integrity check value (13.23), keyed with SIK, truncated:
//   HMAC(Rm | SIDc | GUIDc)[0 .. rakp4_icv_len)
Bytes rakp4_icv(AuthAlg alg, ByteView sik, const RakpContext& c);

// Session keys derived from the SIK (13.31): K1 = HMAC_SIK(20 x 0x01) keys the
// per-packet integrity MAC; K2 = HMAC_SIK(20 x 0x02), of which the first 16
// bytes are the AES-128 key.
struct SessionKeys {
  CipherSuite suite;
  Bytes k1;
  Bytes aes_key;  // 16 bytes
};
SessionKeys derive_session_keys(const CipherSuite& suite, ByteView sik);

// Per-packet AuthCode (13.28.4): MAC over the bytes from the session header's
// auth type through the Next Header byte, keyed with K1, truncated.
Bytes integrity_mac(IntegrityAlg alg, ByteView k1, ByteView data);

// AES-CBC-128 confidentiality (13.29). The payload is padded with bytes
// 1, 2, 3, ... N then the pad length N so that plaintext + pad + 1 is a
// multiple of 16; the result is IV (16 bytes) | ciphertext.
// `iv` must be 16 bytes (callers draw it from random_bytes()).
Bytes aes_cbc_encrypt(ByteView key, ByteView iv, ByteView plaintext);
// Inverse of aes_cbc_encrypt. kInvalidArgument when the input is not IV plus
// a whole number of blocks, or the confidentiality trailer is malformed.
Result<Bytes> aes_cbc_decrypt(ByteView key, ByteView iv_and_ciphertext);

// Cryptographically random bytes (OpenSSL RAND_bytes).
Bytes random_bytes(size_t n);

}  // namespace kiln::ipmi
