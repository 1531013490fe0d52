#include "tests/support/self_signed_cert.h"

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <stdexcept>

namespace kiln::testing {

namespace {

struct PkeyFree { void operator()(EVP_PKEY* p) const { EVP_PKEY_free(p); } };
struct X509Free { void operator()(X509* p) const { X509_free(p); } };
struct FileClose { void operator()(FILE* f) const { std::fclose(f); } };

void check(bool ok, const char* what) {
  if (!ok) throw std::runtime_error(std::string("self-signed cert: ") + what);
}

void add_ext(X509* cert, int nid, const std::string& value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, cert, cert, nullptr, nullptr, 0);
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value.c_str());
  check(ext != nullptr, "bad extension");
  const int rc = X509_add_ext(cert, ext, -1);
  X509_EXTENSION_free(ext);
  check(rc == 1, "X509_add_ext");
}

}  // namespace

SelfSignedCert::SelfSignedCert(std::vector<std::string> subject_alt_names) {
  std::string tmpl = (std::filesystem::temp_directory_path() / "kiln-cert-XXXXXX").string();
  check(::mkdtemp(tmpl.data()) != nullptr, "mkdtemp");
  dir_ = tmpl;
  cert_file_ = dir_ + "/cert.pem";
  key_file_ = dir_ + "/key.pem";

  std::unique_ptr<EVP_PKEY, PkeyFree> key(EVP_EC_gen("P-256"));
  check(key != nullptr, "key generation");
  std::unique_ptr<X509, X509Free> cert(X509_new());
  check(cert != nullptr, "X509_new");
  X509_set_version(cert.get(), 2);
  uint32_t serial = 0;
  check(RAND_bytes(reinterpret_cast<unsigned char*>(&serial), sizeof serial) == 1, "RAND_bytes");
  ASN1_INTEGER_set(X509_get_serialNumber(cert.get()), static_cast<long>(serial & 0x7fffffff));
  X509_gmtime_adj(X509_getm_notBefore(cert.get()), -60);
  X509_gmtime_adj(X509_getm_notAfter(cert.get()), 24 * 3600);
  check(X509_set_pubkey(cert.get(), key.get()) == 1, "X509_set_pubkey");
  X509_NAME* name = X509_get_subject_name(cert.get());
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>("localhost"), -1, -1, 0);
  check(X509_set_issuer_name(cert.get(), name) == 1, "X509_set_issuer_name");
  add_ext(cert.get(), NID_basic_constraints, "critical,CA:TRUE");
  add_ext(cert.get(), NID_key_usage, "critical,digitalSignature,keyCertSign");
  add_ext(cert.get(), NID_subject_key_identifier, "hash");
  if (!subject_alt_names.empty()) {
    std::string sans;
    for (const auto& s : subject_alt_names) sans += (sans.empty() ? "" : ",") + s;
    add_ext(cert.get(), NID_subject_alt_name, sans);
  }
  check(X509_sign(cert.get(), key.get(), EVP_sha256()) > 0, "X509_sign");

  std::unique_ptr<FILE, FileClose> kf(std::fopen(key_file_.c_str(), "w"));
  check(kf != nullptr, "open key file");
  check(PEM_write_PrivateKey(kf.get(), key.get(), nullptr, nullptr, 0, nullptr, nullptr) == 1,
        "write key");
  std::unique_ptr<FILE, FileClose> cf(std::fopen(cert_file_.c_str(), "w"));
  check(cf != nullptr, "open cert file");
  check(PEM_write_X509(cf.get(), cert.get()) == 1, "write cert");
}

SelfSignedCert::~SelfSignedCert() {
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
}

}  // namespace kiln::testing
