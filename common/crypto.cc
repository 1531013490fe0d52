#include "common/crypto.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/rand.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <sstream>
#include <memory>
#include <stdexcept>

namespace kiln {
namespace {
struct CtxFree {
  void operator()(EVP_CIPHER_CTX* c) const { EVP_CIPHER_CTX_free(c); }
};
using CipherCtx = std::unique_ptr<EVP_CIPHER_CTX, CtxFree>;
constexpr size_t kNonce = 12, kTag = 16;
constexpr std::string_view kPrefix = "k1";
}  // namespace

namespace {
std::string to_hex(const unsigned char* md, unsigned len) {
  static const char hex[] = "0123456789abcdef";
  std::string out;
  out.reserve(len * 2);
  for (unsigned i = 0; i < len; ++i) {
    out.push_back(hex[md[i] >> 4]);
    out.push_back(hex[md[i] & 0xf]);
  }
  return out;
}
}  // namespace

std::string sha256_hex(std::string_view data) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (EVP_Digest(data.data(), data.size(), md, &len, EVP_sha256(), nullptr) != 1)
    throw std::runtime_error("EVP_Digest failed");
  return to_hex(md, len);
}

Sha256::Sha256() : ctx_(EVP_MD_CTX_new()) {
  auto* c = static_cast<EVP_MD_CTX*>(ctx_);
  if (c == nullptr || EVP_DigestInit_ex(c, EVP_sha256(), nullptr) != 1) {
    EVP_MD_CTX_free(c);
    throw std::runtime_error("sha256: EVP init failed");
  }
}

Sha256::~Sha256() { EVP_MD_CTX_free(static_cast<EVP_MD_CTX*>(ctx_)); }

void Sha256::update(std::string_view data) {
  if (EVP_DigestUpdate(static_cast<EVP_MD_CTX*>(ctx_), data.data(), data.size()) != 1)
    throw std::runtime_error("sha256: EVP update failed");
}

std::string Sha256::hex_digest() {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (EVP_DigestFinal_ex(static_cast<EVP_MD_CTX*>(ctx_), md, &len) != 1)
    throw std::runtime_error("sha256: EVP final failed");
  return to_hex(md, len);
}

Result<std::string> certificate_pem_sha256(std::string_view pem) {
  std::unique_ptr<BIO, decltype(&BIO_free)> bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())), BIO_free);
  if (!bio) throw std::runtime_error("BIO_new_mem_buf failed");
  std::unique_ptr<X509, decltype(&X509_free)> cert(PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr),
                                                  X509_free);
  if (!cert) return Error(Code::kInvalidArgument, "no PEM certificate found");
  unsigned char* der = nullptr;
  const int len = i2d_X509(cert.get(), &der);
  if (len <= 0) return Error(Code::kInvalidArgument, "the certificate cannot be DER-encoded");
  std::string hex = sha256_hex(std::string_view(reinterpret_cast<const char*>(der), static_cast<std::size_t>(len)));
  OPENSSL_free(der);
  return hex;
}

Result<std::string> certificate_file_sha256(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Error(Code::kInternal, "cannot read " + path);
  std::ostringstream text;
  text << in.rdbuf();
  return certificate_pem_sha256(text.str());
}

bool constant_time_equal(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

std::string base64_encode(std::string_view data) {
  std::string out(4 * ((data.size() + 2) / 3), '\0');
  int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                          reinterpret_cast<const unsigned char*>(data.data()),
                          static_cast<int>(data.size()));
  out.resize(static_cast<size_t>(n));
  return out;
}

Result<std::string> base64_decode(std::string_view text) {
  if (text.size() % 4 != 0) return Error(Code::kInvalidArgument, "base64 length is not a multiple of 4");
  std::string out(3 * text.size() / 4, '\0');
  int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                          reinterpret_cast<const unsigned char*>(text.data()),
                          static_cast<int>(text.size()));
  if (n < 0) return Error(Code::kInvalidArgument, "invalid base64");
  size_t pad = 0;
  if (!text.empty() && text.back() == '=') ++pad;
  if (text.size() > 1 && text[text.size() - 2] == '=') ++pad;
  out.resize(static_cast<size_t>(n) - pad);
  return out;
}

Result<SecretBox> SecretBox::open_key_file(const std::string& path) {
  Key key{};
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    struct stat st {};
    if (fstat(fd, &st) == 0 && (st.st_mode & 077) != 0) {
      ::close(fd);
      return Error(Code::kPermissionDenied, "key file " + path + " is readable by others; chmod 600 it");
    }
    ssize_t n = ::read(fd, key.data(), key.size());
    char extra;
    ssize_t more = ::read(fd, &extra, 1);
    ::close(fd);
    if (n != static_cast<ssize_t>(key.size()) || more != 0)
      return Error(Code::kInternal, "key file " + path + " must hold exactly 32 bytes");
    return SecretBox(key);
  }
  if (RAND_bytes(key.data(), static_cast<int>(key.size())) != 1)
    return Error(Code::kInternal, "RAND_bytes failed");
  fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) return Error(Code::kInternal, "cannot create key file " + path + ": " + std::strerror(errno));
  bool good = ::write(fd, key.data(), key.size()) == static_cast<ssize_t>(key.size()) && ::fsync(fd) == 0;
  ::close(fd);
  if (!good) return Error(Code::kInternal, "cannot write key file " + path);
  return SecretBox(key);
}

std::string SecretBox::seal(std::string_view plaintext) const {
  unsigned char nonce[kNonce];
  if (RAND_bytes(nonce, kNonce) != 1) throw std::runtime_error("RAND_bytes failed");
  CipherCtx ctx(EVP_CIPHER_CTX_new());
  std::string ct(plaintext.size(), '\0');
  unsigned char tag[kTag];
  int len = 0, fin = 0;
  if (!ctx || EVP_EncryptInit_ex(ctx.get(), EVP_aes_256_gcm(), nullptr, key_.data(), nonce) != 1 ||
      EVP_EncryptUpdate(ctx.get(), reinterpret_cast<unsigned char*>(ct.data()), &len,
                        reinterpret_cast<const unsigned char*>(plaintext.data()),
                        static_cast<int>(plaintext.size())) != 1 ||
      EVP_EncryptFinal_ex(ctx.get(), reinterpret_cast<unsigned char*>(ct.data()) + len, &fin) != 1 ||
      EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_GCM_GET_TAG, kTag, tag) != 1)
    throw std::runtime_error("AES-GCM encryption failed");
  std::string raw(kPrefix);
  raw.append(reinterpret_cast<char*>(nonce), kNonce);
  raw.append(ct);
  raw.append(reinterpret_cast<char*>(tag), kTag);
  return base64_encode(raw);
}

Result<std::string> SecretBox::open(std::string_view sealed) const {
  auto raw = base64_decode(sealed);
  if (!raw) return Error(Code::kInternal, "sealed secret is not base64");
  const std::string& r = *raw;
  if (r.size() < kPrefix.size() + kNonce + kTag || r.compare(0, kPrefix.size(), kPrefix) != 0)
    return Error(Code::kInternal, "sealed secret has an unknown format");
  const auto* nonce = reinterpret_cast<const unsigned char*>(r.data() + kPrefix.size());
  size_t ct_len = r.size() - kPrefix.size() - kNonce - kTag;
  const auto* ct = nonce + kNonce;
  unsigned char tag[kTag];
  std::memcpy(tag, ct + ct_len, kTag);
  CipherCtx ctx(EVP_CIPHER_CTX_new());
  std::string pt(ct_len, '\0');
  int len = 0, fin = 0;
  if (!ctx || EVP_DecryptInit_ex(ctx.get(), EVP_aes_256_gcm(), nullptr, key_.data(), nonce) != 1 ||
      EVP_DecryptUpdate(ctx.get(), reinterpret_cast<unsigned char*>(pt.data()), &len, ct,
                        static_cast<int>(ct_len)) != 1 ||
      EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_GCM_SET_TAG, kTag, tag) != 1 ||
      EVP_DecryptFinal_ex(ctx.get(), reinterpret_cast<unsigned char*>(pt.data()) + len, &fin) != 1)
    return Error(Code::kInternal, "sealed secret failed authentication (wrong key or tampered)");
  return pt;
}

}  // namespace kiln
