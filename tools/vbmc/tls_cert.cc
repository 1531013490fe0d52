#include "tools/vbmc/tls_cert.h"

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <arpa/inet.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>

namespace kiln::vbmc {

namespace {

struct PkeyFree { void operator()(EVP_PKEY* p) const { EVP_PKEY_free(p); } };
struct X509Free { void operator()(X509* p) const { X509_free(p); } };
struct FileClose { void operator()(FILE* f) const { std::fclose(f); } };

bool add_ext(X509* cert, int nid, const std::string& value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, cert, cert, nullptr, nullptr, 0);
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value.c_str());
  if (!ext) return false;
  const int rc = X509_add_ext(cert, ext, -1);
  X509_EXTENSION_free(ext);
  return rc == 1;
}

Error fail(const char* what) { return Error(Code::kInternal, std::string("self-signed certificate: ") + what); }

}  // namespace

Result<std::unique_ptr<TempCert>> TempCert::generate(const std::string& host) {
  std::unique_ptr<TempCert> out(new TempCert());
  std::string tmpl = (std::filesystem::temp_directory_path() / "kiln-vbmc-XXXXXX").string();
  if (::mkdtemp(tmpl.data()) == nullptr) return fail("mkdtemp");
  out->dir_ = tmpl;
  out->cert_file_ = out->dir_ + "/cert.pem";
  out->key_file_ = out->dir_ + "/key.pem";

  std::unique_ptr<EVP_PKEY, PkeyFree> key(EVP_EC_gen("P-256"));
  if (!key) return fail("key generation");
  std::unique_ptr<X509, X509Free> cert(X509_new());
  if (!cert) return fail("X509_new");
  X509_set_version(cert.get(), 2);
  uint32_t serial = 0;
  if (RAND_bytes(reinterpret_cast<unsigned char*>(&serial), sizeof serial) != 1) return fail("RAND_bytes");
  ASN1_INTEGER_set(X509_get_serialNumber(cert.get()), static_cast<long>(serial & 0x7fffffff));
  X509_gmtime_adj(X509_getm_notBefore(cert.get()), -60);
  X509_gmtime_adj(X509_getm_notAfter(cert.get()), 30L * 24 * 3600);
  if (X509_set_pubkey(cert.get(), key.get()) != 1) return fail("X509_set_pubkey");
  X509_NAME* name = X509_get_subject_name(cert.get());
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>("kiln-vbmc"), -1, -1, 0);
  X509_set_issuer_name(cert.get(), name);
  std::string san = "DNS:localhost,IP:127.0.0.1";
  unsigned char buf[16];
  if (!host.empty() && host != "localhost" && host != "127.0.0.1") {
    const bool ip = inet_pton(AF_INET, host.c_str(), buf) == 1 || inet_pton(AF_INET6, host.c_str(), buf) == 1;
    san += (ip ? ",IP:" : ",DNS:") + host;
  }
  if (!add_ext(cert.get(), NID_subject_alt_name, san)) return fail("subjectAltName");
  if (!add_ext(cert.get(), NID_basic_constraints, "critical,CA:TRUE")) return fail("basicConstraints");
  if (X509_sign(cert.get(), key.get(), EVP_sha256()) == 0) return fail("X509_sign");

  {
    std::unique_ptr<FILE, FileClose> f(std::fopen(out->key_file_.c_str(), "w"));
    if (!f) return fail("cannot write the key file");
    if (PEM_write_PrivateKey(f.get(), key.get(), nullptr, nullptr, 0, nullptr, nullptr) != 1) {
      return fail("PEM_write_PrivateKey");
    }
  }
  {
    std::unique_ptr<FILE, FileClose> f(std::fopen(out->cert_file_.c_str(), "w"));
    if (!f) return fail("cannot write the certificate file");
    if (PEM_write_X509(f.get(), cert.get()) != 1) return fail("PEM_write_X509");
  }
  return out;
}

TempCert::~TempCert() {
  if (!dir_.empty()) {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
}

}  // namespace kiln::vbmc
