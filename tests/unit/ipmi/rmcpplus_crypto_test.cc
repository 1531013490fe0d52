// RAKP codes, key derivation, integrity and AES-CBC against vectors computed
// independently with the OpenSSL command line while writing these tests:
//
//   mac() { echo -n "$3" | xxd -r -p > in.bin;
//           openssl mac -digest $1 -macopt hexkey:$2 -in in.bin HMAC; }
//   KEY=$(printf password | xxd -p)
//   RM=000102..0f RC=101112..1f GUID=a123456789abcdefa123456789abcdef
//   SIDM=44332211 SIDC=88776655 (0x11223344 / 0x55667788, little-endian)
//   ROLE=14 ULEN=05 UNAME=$(printf admin | xxd -p)
//   rakp2 = mac SHA1 $KEY $SIDM$SIDC$RM$RC$GUID$ROLE$ULEN$UNAME
//   rakp3 = mac SHA1 $KEY $RC$SIDM$ROLE$ULEN$UNAME
//   sik   = mac SHA1 $KEY $RM$RC$ROLE$ULEN$UNAME
//   rakp4 = mac SHA1 $SIK $RM$SIDC$GUID          (first 12 bytes)
//   k1/k2 = mac SHA1 $SIK 0101..01 / 0202..02    (20 bytes of constant)
// and the same with SHA256 (rakp4 truncated to 16 bytes).

#include <catch2/catch.hpp>

#include "drivers/ipmi/rmcpplus_crypto.h"
#include "tests/unit/ipmi/test_bytes.h"

using namespace kiln;
using namespace kiln::ipmi;
using namespace kiln::ipmi::test;

namespace {

RakpContext vector_context() {
  RakpContext c;
  c.console_session_id = 0x11223344;
  c.bmc_session_id = 0x55667788;
  c.console_random = arr<16>("000102030405060708090a0b0c0d0e0f");
  c.bmc_random = arr<16>("101112131415161718191a1b1c1d1e1f");
  c.bmc_guid = arr<16>("a123456789abcdefa123456789abcdef");
  c.role = 0x14;
  c.username = "admin";
  return c;
}

}  // namespace

TEST_CASE("cipher suites 3 and 17 map to their algorithms, others are refused", "[crypto]") {
  auto s3 = cipher_suite(3);
  REQUIRE(s3.ok());
  CHECK(s3->auth == AuthAlg::kHmacSha1);
  CHECK(s3->integrity == IntegrityAlg::kHmacSha1_96);
  CHECK(s3->confidentiality == ConfidentialityAlg::kAesCbc128);
  auto s17 = cipher_suite(17);
  REQUIRE(s17.ok());
  CHECK(s17->auth == AuthAlg::kHmacSha256);
  CHECK(s17->integrity == IntegrityAlg::kHmacSha256_128);
  auto s0 = cipher_suite(0);
  REQUIRE_FALSE(s0.ok());
  CHECK(s0.error().code == Code::kInvalidArgument);
  REQUIRE(s0.error().fields.size() == 1);
  CHECK(s0.error().fields[0].field == "/bmc/options/cipher_suite");
}

TEST_CASE("RAKP-HMAC-SHA1 codes and keys match openssl-computed vectors", "[crypto]") {
  const RakpContext c = vector_context();
  const Bytes kuid = password_key("password");
  CHECK(to_hex(rakp2_auth_code(AuthAlg::kHmacSha1, kuid, c)) ==
        "240c5a27681d42df77950fff8f135946624cc7dd");
  CHECK(to_hex(rakp3_auth_code(AuthAlg::kHmacSha1, kuid, c)) ==
        "4402012e214da511895a399bd77d5396e7998a4d");
  const Bytes sik = session_integrity_key(AuthAlg::kHmacSha1, kuid, c);
  CHECK(to_hex(sik) == "122c77c4b11ccd93251cbae6c34a9cb6310da154");
  CHECK(to_hex(rakp4_icv(AuthAlg::kHmacSha1, sik, c)) == "8a3c78ca69486f6f72a19f83");

  const SessionKeys keys = derive_session_keys(*cipher_suite(3), sik);
  CHECK(to_hex(keys.k1) == "e4472be78f9a81fa68297aab696a7be8c97fc9f8");
  CHECK(to_hex(keys.aes_key) == "2b6552012a2517cb3b5713901d757a6e");  // K2[0..16)
}

TEST_CASE("RAKP-HMAC-SHA256 codes and keys match openssl-computed vectors", "[crypto]") {
  const RakpContext c = vector_context();
  const Bytes kuid = password_key("password");
  CHECK(to_hex(rakp2_auth_code(AuthAlg::kHmacSha256, kuid, c)) ==
        "80f2102ed5de97c415bad87ff147260f00d53c87ed29783bed9aa22dc13aec0d");
  CHECK(to_hex(rakp3_auth_code(AuthAlg::kHmacSha256, kuid, c)) ==
        "e6f17841e92f8c11cbc4fd1cafcc9c21e3d814e713e13e9ee640103b50c0ef15");
  const Bytes sik = session_integrity_key(AuthAlg::kHmacSha256, kuid, c);
  CHECK(to_hex(sik) == "e5935f7199865ad961063477b0662684e2ce9b1da8f2b8d41c5ce127d37e9bcf");
  CHECK(to_hex(rakp4_icv(AuthAlg::kHmacSha256, sik, c)) == "17cdc74a3b9a1bad99d8087fa4921727");

  const SessionKeys keys = derive_session_keys(*cipher_suite(17), sik);
  CHECK(to_hex(keys.k1) == "dc4fe73d075306f6897115dd63257385e845c10404fa1d73991790c6a101bec2");
  CHECK(to_hex(keys.aes_key) == "2a4f969ea6dfa83066f36674fdc2fea2");
}

TEST_CASE("a different password, role or name changes the RAKP2 code", "[crypto]") {
  RakpContext c = vector_context();
  const Bytes good = rakp2_auth_code(AuthAlg::kHmacSha1, password_key("password"), c);
  CHECK_FALSE(bytes_equal(good, rakp2_auth_code(AuthAlg::kHmacSha1, password_key("passwore"), c)));
  c.role = 0x04;  // the whole role byte, name-only bit included, is hashed
  CHECK_FALSE(bytes_equal(good, rakp2_auth_code(AuthAlg::kHmacSha1, password_key("password"), c)));
  c = vector_context();
  c.username = "root";
  CHECK_FALSE(bytes_equal(good, rakp2_auth_code(AuthAlg::kHmacSha1, password_key("password"), c)));
}

TEST_CASE("passwords are used as at most 20 bytes of key", "[crypto]") {
  CHECK(password_key("0123456789abcdefghijKLMN").size() == 20);
  CHECK(password_key("").empty());
}

TEST_CASE("AES-CBC-128 encryption uses the IPMI pad and matches openssl enc", "[crypto]") {
  // openssl enc -aes-128-cbc -K 2b65..7a6e -iv f0f1..ff -nopad over
  // 2000e08114016a 0102030405060708 08 (7 data bytes, 8 pad bytes, pad length).
  const Bytes key = hex("2b6552012a2517cb3b5713901d757a6e");
  const Bytes iv = hex("f0f1f2f3f4f5f6f7f8f9fafbfcfdfeff");
  const Bytes msg = hex("2000e08114016a");
  const Bytes enc = aes_cbc_encrypt(key, iv, msg);
  CHECK(to_hex(enc) == "f0f1f2f3f4f5f6f7f8f9fafbfcfdfeffd8b1282157fc70ab67225ea360c87f31");
  auto dec = aes_cbc_decrypt(key, enc);
  REQUIRE(dec.ok());
  CHECK(*dec == msg);
}

TEST_CASE("AES-CBC-128 round trips every payload length from 0 to 64", "[crypto]") {
  const Bytes key = random_bytes(16);
  for (size_t n = 0; n <= 64; ++n) {
    const Bytes msg = random_bytes(n);
    const Bytes enc = aes_cbc_encrypt(key, random_bytes(16), msg);
    CHECK(enc.size() % 16 == 0);
    CHECK(enc.size() >= 16 + n + 1);
    auto dec = aes_cbc_decrypt(key, enc);
    REQUIRE(dec.ok());
    CHECK(*dec == msg);
  }
}

TEST_CASE("AES-CBC-128 decryption rejects bad lengths and malformed padding", "[crypto]") {
  const Bytes key = hex("2b6552012a2517cb3b5713901d757a6e");
  const Bytes iv = hex("f0f1f2f3f4f5f6f7f8f9fafbfcfdfeff");
  Bytes enc = aes_cbc_encrypt(key, iv, hex("2000e08114016a"));

  CHECK_FALSE(aes_cbc_decrypt(key, Bytes(enc.begin(), enc.begin() + 16)).ok());  // IV only
  CHECK_FALSE(aes_cbc_decrypt(key, Bytes(enc.begin(), enc.end() - 1)).ok());     // not a block
  CHECK_FALSE(aes_cbc_decrypt(key, Bytes{}).ok());

  // A wrong key decrypts to garbage: the pad check must catch it (with
  // overwhelming probability for this fixed vector).
  auto wrong = aes_cbc_decrypt(hex("00000000000000000000000000000000"), enc);
  CHECK_FALSE(wrong.ok());

  // Flip the last ciphertext bit: pad length byte changes.
  enc.back() ^= 0x01;
  CHECK_FALSE(aes_cbc_decrypt(key, enc).ok());
}

TEST_CASE("integrity MACs truncate to 12 (SHA1-96) and 16 (SHA256-128) bytes", "[crypto]") {
  const Bytes k1 = hex("e4472be78f9a81fa68297aab696a7be8c97fc9f8");
  const Bytes data = hex("06c088776655070000002000");
  CHECK(integrity_mac(IntegrityAlg::kHmacSha1_96, k1, data).size() == 12);
  CHECK(integrity_mac(IntegrityAlg::kHmacSha256_128, k1, data).size() == 16);
  CHECK(integrity_mac_len(IntegrityAlg::kHmacSha1_96) == 12);
  CHECK(integrity_mac_len(IntegrityAlg::kHmacSha256_128) == 16);
  CHECK(rakp_auth_code_len(AuthAlg::kHmacSha1) == 20);
  CHECK(rakp_auth_code_len(AuthAlg::kHmacSha256) == 32);
}
