#include "controller/tenancy/ssh_key.h"

#include <cstdint>
#include <optional>
#include <vector>

#include "common/crypto.h"

namespace kiln {
namespace {

// Reads the SSH wire format's length-prefixed strings (RFC 4251 section 5).
class WireReader {
 public:
  explicit WireReader(std::string_view data) : data_(data) {}
  std::optional<std::string_view> string() {
    if (data_.size() - pos_ < 4) return std::nullopt;
    uint32_t n = 0;
    for (int i = 0; i < 4; ++i) n = (n << 8) | static_cast<unsigned char>(data_[pos_ + i]);
    pos_ += 4;
    if (data_.size() - pos_ < n) return std::nullopt;
    std::string_view out = data_.substr(pos_, n);
    pos_ += n;
    return out;
  }
  bool done() const { return pos_ == data_.size(); }

 private:
  std::string_view data_;
  std::size_t pos_ = 0;
};

// Bits of an mpint (RFC 4251 section 5): big-endian two's complement, with a
// leading zero byte when the top bit is set.
std::size_t mpint_bits(std::string_view v) {
  std::size_t i = 0;
  while (i < v.size() && v[i] == 0) ++i;
  if (i == v.size()) return 0;
  unsigned char top = static_cast<unsigned char>(v[i]);
  std::size_t bits = (v.size() - i - 1) * 8;
  while (top != 0) {
    ++bits;
    top >>= 1;
  }
  return bits;
}

std::string_view curve_of(std::string_view type) {
  if (type == "ecdsa-sha2-nistp256" || type == "sk-ecdsa-sha2-nistp256@openssh.com") return "nistp256";
  if (type == "ecdsa-sha2-nistp384") return "nistp384";
  if (type == "ecdsa-sha2-nistp521") return "nistp521";
  return "";
}

// The fields after the type, per type; empty when they are complete.
std::string check_blob_fields(std::string_view type, WireReader& r) {
  if (type == "ssh-ed25519" || type == "sk-ssh-ed25519@openssh.com") {
    auto pk = r.string();
    if (!pk || pk->size() != 32) return "ed25519 key must be 32 bytes";
  } else if (type == "ssh-rsa") {
    auto e = r.string();
    auto n = r.string();
    if (!e || !n) return "truncated RSA key";
    std::size_t bits = mpint_bits(*n);
    if (bits < 2048) return "RSA key of " + std::to_string(bits) + " bits; at least 2048 are required";
  } else {
    auto curve = r.string();
    auto point = r.string();
    if (!curve || !point) return "truncated ECDSA key";
    if (*curve != curve_of(type)) return "ECDSA key names curve '" + std::string(*curve) + "'";
    if (point->empty() || (*point)[0] != 0x04) return "ECDSA point must be uncompressed";
  }
  if (type.rfind("sk-", 0) == 0) {
    auto application = r.string();
    if (!application) return "security key without an application";
  }
  if (!r.done()) return "key blob has trailing data";
  return "";
}

bool known_type(std::string_view t) {
  return t == "ssh-ed25519" || t == "ssh-rsa" || t == "sk-ssh-ed25519@openssh.com" || !curve_of(t).empty();
}

std::vector<std::string_view> split_fields(std::string_view line) {
  std::vector<std::string_view> out;
  std::size_t i = 0;
  while (i < line.size() && out.size() < 2) {
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
    std::size_t start = i;
    while (i < line.size() && line[i] != ' ' && line[i] != '\t') ++i;
    if (i > start) out.push_back(line.substr(start, i - start));
  }
  return out;
}

}  // namespace

Status check_ssh_public_key(std::string_view line, const std::string& field) {
  if (line.empty()) return Error::invalid(field, "must not be empty");
  if (line.size() > 16384) return Error::invalid(field, "longer than 16384 characters");
  for (char c : line)
    if (c == '\n' || c == '\r' || c == '\0') return Error::invalid(field, "must be a single line");
  std::vector<std::string_view> f = split_fields(line);
  if (f.size() < 2) return Error::invalid(field, "must be '<type> <base64 key> [comment]' (OpenSSH public key)");
  std::string_view type = f[0];
  if (!known_type(type)) {
    std::string shown(type.substr(0, 40));
    return Error::invalid(field, "unknown key type '" + shown +
                                     "' (ssh-ed25519, ssh-rsa, ecdsa-sha2-nistp256/384/521, sk-* accepted; "
                                     "authorized_keys options are not)");
  }
  Result<std::string> blob = base64_decode(f[1]);
  if (!blob) return Error::invalid(field, "key is not valid base64");
  WireReader r(*blob);
  auto inner = r.string();
  if (!inner) return Error::invalid(field, "key blob is truncated");
  if (*inner != type) return Error::invalid(field, "key blob is a " + std::string(inner->substr(0, 40)) + " key, not " +
                                                       std::string(type));
  std::string problem = check_blob_fields(type, r);
  if (!problem.empty()) return Error::invalid(field, problem);
  return ok_status();
}

}  // namespace kiln
