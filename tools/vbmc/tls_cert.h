#pragma once
// A throw-away self-signed certificate for kiln-vbmc's HTTPS listener:
// EC P-256, CN=kiln-vbmc, subjectAltName DNS:localhost + IP:127.0.0.1 + the
// listen host, valid 30 days, written as PEM into a fresh temporary directory
// that the destructor removes. Real BMCs ship exactly this kind of
// certificate, which is why the driver has verify_tls=false and ca_file.

#include <memory>
#include <string>

#include "common/result.h"

namespace kiln::vbmc {

class TempCert {
 public:
  // Errors: kInternal naming the OpenSSL or file-system step that failed.
  static Result<std::unique_ptr<TempCert>> generate(const std::string& host);
  ~TempCert();
  TempCert(const TempCert&) = delete;
  TempCert& operator=(const TempCert&) = delete;

  const std::string& cert_file() const { return cert_file_; }
  const std::string& key_file() const { return key_file_; }

 private:
  TempCert() = default;
  std::string dir_;
  std::string cert_file_;
  std::string key_file_;
};

}  // namespace kiln::vbmc
