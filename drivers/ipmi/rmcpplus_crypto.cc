#include "drivers/ipmi/rmcpplus_crypto.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <cassert>
#include <memory>
#include <stdexcept>

#include "drivers/ipmi/byte_order.h"

namespace kiln::ipmi {
namespace {

const EVP_MD* digest_for(AuthAlg alg) {
  switch (alg) {
    case AuthAlg::kHmacSha1: return EVP_sha1();
    case AuthAlg::kHmacSha256: return EVP_sha256();
    case AuthAlg::kHmacMd5: return EVP_md5();
    case AuthAlg::kNone: break;
  }
  assert(false && "no digest for AuthAlg::kNone");
  return EVP_sha1();
}

AuthAlg auth_alg_for(IntegrityAlg alg) {
  switch (alg) {
    case IntegrityAlg::kHmacSha1_96: return AuthAlg::kHmacSha1;
    case IntegrityAlg::kHmacSha256_128: return AuthAlg::kHmacSha256;
    case IntegrityAlg::kHmacMd5_128: return AuthAlg::kHmacMd5;
    default: break;
  }
  assert(false && "unsupported integrity algorithm");
  return AuthAlg::kHmacSha1;
}

void append(Bytes& out, ByteView v) { out.insert(out.end(), v.begin(), v.end()); }

void append_user(Bytes& out, const RakpContext& c) {
  out.push_back(c.role);
  out.push_back(static_cast<uint8_t>(c.username.size()));
  out.insert(out.end(), c.username.begin(), c.username.end());
}

struct CipherCtxFree {
  void operator()(EVP_CIPHER_CTX* c) const { EVP_CIPHER_CTX_free(c); }
};

}  // namespace

Result<CipherSuite> cipher_suite(int id) {
  switch (id) {
    case 3:
      return CipherSuite{3, AuthAlg::kHmacSha1, IntegrityAlg::kHmacSha1_96,
                         ConfidentialityAlg::kAesCbc128};
    case 17:
      return CipherSuite{17, AuthAlg::kHmacSha256, IntegrityAlg::kHmacSha256_128,
                         ConfidentialityAlg::kAesCbc128};
    default:
      return Error::invalid("/bmc/options/cipher_suite",
                            "unsupported IPMI cipher suite " + std::to_string(id) +
                                " (supported: 3, 17)");
  }
}

size_t rakp_auth_code_len(AuthAlg alg) {
  switch (alg) {
    case AuthAlg::kHmacSha1: return 20;
    case AuthAlg::kHmacSha256: return 32;
    case AuthAlg::kHmacMd5: return 16;
    case AuthAlg::kNone: return 0;
  }
  return 0;
}

size_t rakp4_icv_len(AuthAlg alg) {
  switch (alg) {
    case AuthAlg::kHmacSha1: return 12;
    case AuthAlg::kHmacSha256: return 16;
    case AuthAlg::kHmacMd5: return 16;
    case AuthAlg::kNone: return 0;
  }
  return 0;
}

size_t integrity_mac_len(IntegrityAlg alg) {
  switch (alg) {
    case IntegrityAlg::kHmacSha1_96: return 12;
    case IntegrityAlg::kHmacSha256_128: return 16;
    case IntegrityAlg::kHmacMd5_128: return 16;
    case IntegrityAlg::kMd5_128: return 16;
    case IntegrityAlg::kNone: return 0;
  }
  return 0;
}

Bytes hmac(AuthAlg alg, ByteView key, ByteView data) {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  // HMAC() with a null key pointer and zero length is fine in OpenSSL 3, but a
  // stable non-null pointer keeps sanitizers quiet about span::data() of empty.
  static const unsigned char kEmpty = 0;
  const unsigned char* k = key.empty() ? &kEmpty : key.data();
  const unsigned char* d = data.empty() ? &kEmpty : data.data();
  if (HMAC(digest_for(alg), k, static_cast<int>(key.size()), d, data.size(), out, &len) ==
      nullptr) {
    throw std::runtime_error("OpenSSL HMAC failed");
  }
  return Bytes(out, out + len);
}

bool bytes_equal(ByteView a, ByteView b) {
  if (a.size() != b.size()) return false;
  if (a.empty()) return true;
  return CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

Bytes password_key(std::string_view password) {
  std::string_view p = password.substr(0, 20);
  return Bytes(p.begin(), p.end());
}

Bytes rakp2_auth_code(AuthAlg alg, ByteView kuid, const RakpContext& c) {
  Bytes in;
  put_u32le(in, c.console_session_id);
  put_u32le(in, c.bmc_session_id);
  append(in, c.console_random);
  append(in, c.bmc_random);
  append(in, c.bmc_guid);
  append_user(in, c);
  return hmac(alg, kuid, in);
}

Bytes rakp3_auth_code(AuthAlg alg, ByteView kuid, const RakpContext& c) {
  Bytes in;
  append(in, c.bmc_random);
  put_u32le(in, c.console_session_id);
  append_user(in, c);
  return hmac(alg, kuid, in);
}

Bytes session_integrity_key(AuthAlg alg, ByteView kg_or_kuid, const RakpContext& c) {
  Bytes in;
  append(in, c.console_random);
  append(in, c.bmc_random);
  append_user(in, c);
  return hmac(alg, kg_or_kuid, in);
}

Bytes rakp4_icv(AuthAlg alg, ByteView sik, const RakpContext& c) {
  Bytes in;
  append(in, c.console_random);
  put_u32le(in, c.bmc_session_id);
  append(in, c.bmc_guid);
  Bytes mac = hmac(alg, sik, in);
  mac.resize(rakp4_icv_len(alg));
  return mac;
}

SessionKeys derive_session_keys(const CipherSuite& suite, ByteView sik) {
  const Bytes c1(20, 0x01);
  const Bytes c2(20, 0x02);
  SessionKeys keys;
  keys.suite = suite;
  keys.k1 = hmac(suite.auth, sik, c1);
  Bytes k2 = hmac(suite.auth, sik, c2);
  keys.aes_key.assign(k2.begin(), k2.begin() + 16);
  return keys;
}

Bytes integrity_mac(IntegrityAlg alg, ByteView k1, ByteView data) {
  Bytes mac = hmac(auth_alg_for(alg), k1, data);
  mac.resize(integrity_mac_len(alg));
  return mac;
}

Bytes aes_cbc_encrypt(ByteView key, ByteView iv, ByteView plaintext) {
  assert(key.size() == 16 && iv.size() == 16);
  Bytes padded(plaintext.begin(), plaintext.end());
  const size_t mod = (plaintext.size() + 1) % 16;
  const uint8_t pad_len = mod == 0 ? 0 : static_cast<uint8_t>(16 - mod);
  for (uint8_t i = 1; i <= pad_len; ++i) padded.push_back(i);
  padded.push_back(pad_len);

  std::unique_ptr<EVP_CIPHER_CTX, CipherCtxFree> ctx(EVP_CIPHER_CTX_new());
  Bytes out(iv.begin(), iv.end());
  out.resize(16 + padded.size());
  int n1 = 0, n2 = 0;
  if (!ctx || EVP_EncryptInit_ex(ctx.get(), EVP_aes_128_cbc(), nullptr, key.data(), iv.data()) != 1 ||
      EVP_CIPHER_CTX_set_padding(ctx.get(), 0) != 1 ||
      EVP_EncryptUpdate(ctx.get(), out.data() + 16, &n1, padded.data(),
                        static_cast<int>(padded.size())) != 1 ||
      EVP_EncryptFinal_ex(ctx.get(), out.data() + 16 + n1, &n2) != 1) {
    throw std::runtime_error("OpenSSL AES-CBC encrypt failed");
  }
  out.resize(16 + static_cast<size_t>(n1 + n2));
  return out;
}

Result<Bytes> aes_cbc_decrypt(ByteView key, ByteView iv_and_ciphertext) {
  assert(key.size() == 16);
  if (iv_and_ciphertext.size() < 32 || iv_and_ciphertext.size() % 16 != 0) {
    return Error(Code::kInvalidArgument,
                 "encrypted payload length " + std::to_string(iv_and_ciphertext.size()) +
                     " is not an IV plus whole AES blocks");
  }
  ByteView iv = iv_and_ciphertext.first(16);
  ByteView ct = iv_and_ciphertext.subspan(16);
  std::unique_ptr<EVP_CIPHER_CTX, CipherCtxFree> ctx(EVP_CIPHER_CTX_new());
  Bytes out(ct.size());
  int n1 = 0, n2 = 0;
  if (!ctx || EVP_DecryptInit_ex(ctx.get(), EVP_aes_128_cbc(), nullptr, key.data(), iv.data()) != 1 ||
      EVP_CIPHER_CTX_set_padding(ctx.get(), 0) != 1 ||
      EVP_DecryptUpdate(ctx.get(), out.data(), &n1, ct.data(), static_cast<int>(ct.size())) != 1 ||
      EVP_DecryptFinal_ex(ctx.get(), out.data() + n1, &n2) != 1) {
    return Error(Code::kInternal, "OpenSSL AES-CBC decrypt failed");
  }
  out.resize(static_cast<size_t>(n1 + n2));
  if (out.empty()) return Error(Code::kInvalidArgument, "empty decrypted payload");
  const uint8_t pad_len = out.back();
  if (pad_len > 15 || static_cast<size_t>(pad_len) + 1 > out.size()) {
    return Error(Code::kInvalidArgument,
                 "confidentiality pad length " + std::to_string(pad_len) + " is invalid");
  }
  const size_t payload_len = out.size() - 1 - pad_len;
  for (size_t i = 0; i < pad_len; ++i) {
    if (out[payload_len + i] != static_cast<uint8_t>(i + 1)) {
      return Error(Code::kInvalidArgument, "confidentiality pad bytes are malformed");
    }
  }
  out.resize(payload_len);
  return out;
}

Bytes random_bytes(size_t n) {
  Bytes out(n);
  if (n > 0 && RAND_bytes(out.data(), static_cast<int>(n)) != 1) {
    throw std::runtime_error("OpenSSL RAND_bytes failed");
  }
  return out;
}

}  // namespace kiln::ipmi
