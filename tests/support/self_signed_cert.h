#pragma once
// SelfSignedCert: a throw-away EC P-256 key and self-signed certificate, written
// as PEM into a fresh temporary directory that the destructor removes.
//
// The certificate says CN=localhost, is valid for one day and carries the
// given subjectAltNames (default: DNS:localhost, IP:127.0.0.1), so it can be
// used both as a server certificate and as the client's CA file. Throws
// std::runtime_error when OpenSSL or the file system fails.

#include <string>
#include <vector>

namespace kiln::testing {

class SelfSignedCert {
 public:
  explicit SelfSignedCert(std::vector<std::string> subject_alt_names = {"DNS:localhost",
                                                                       "IP:127.0.0.1"});
  ~SelfSignedCert();
  SelfSignedCert(const SelfSignedCert&) = delete;
  SelfSignedCert& operator=(const SelfSignedCert&) = delete;

  const std::string& cert_file() const { return cert_file_; }
  const std::string& key_file() const { return key_file_; }
  const std::string& dir() const { return dir_; }

 private:
  std::string dir_;
  std::string cert_file_;
  std::string key_file_;
};

}  // namespace kiln::testing
