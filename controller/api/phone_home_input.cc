#include "controller/api/phone_home_input.h"

#include <map>

#include "common/machine_values.h"

namespace kiln::api {
namespace {

constexpr std::size_t kMaxInstanceId = 128;

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// One form-encoded name or value (HTML's application/x-www-form-urlencoded
// parser: '+' is a blank, %XX a byte); a '%' not followed by two hex digits
// is refused rather than kept, so no two readers see different text.
Result<std::string> form_decode(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '+') {
      out.push_back(' ');
    } else if (s[i] == '%') {
      if (i + 2 >= s.size()) return Error::invalid("body", "holds a bad % escape");
      const int hi = hex_digit(s[i + 1]);
      const int lo = hex_digit(s[i + 2]);
      if (hi < 0 || lo < 0) return Error::invalid("body", "holds a bad % escape");
      out.push_back(static_cast<char>(hi * 16 + lo));
      i += 2;
    } else {
      out.push_back(s[i]);
    }
  }
  return out;
}

bool absent(const std::string& v) { return v.empty() || v == "N/A"; }

// The host key types a field may hold.
bool type_fits(std::string_view field, std::string_view type) {
  if (field == "pub_key_rsa") return type == "ssh-rsa";
  if (field == "pub_key_ed25519") return type == "ssh-ed25519";
  return type.rfind("ecdsa-sha2-nistp", 0) == 0;  // pub_key_ecdsa
}

}  // namespace

Result<PhoneHomePost> parse_phone_home_form(std::string_view body) {
  if (body.size() > kPhoneHomeMaxBody) return Error::invalid("body", "is larger than 64 KiB");
  std::map<std::string, std::string> fields;
  std::size_t start = 0;
  while (start <= body.size()) {
    std::size_t end = body.find('&', start);
    if (end == std::string_view::npos) end = body.size();
    std::string_view pair = body.substr(start, end - start);
    start = end + 1;
    if (pair.empty()) continue;
    const std::size_t eq = pair.find('=');
    Result<std::string> name = form_decode(pair.substr(0, eq));
    if (!name) return name.take_error();
    Result<std::string> value = form_decode(eq == std::string_view::npos ? "" : pair.substr(eq + 1));
    if (!value) return value.take_error();
    const bool known = *name == "pub_key_rsa" || *name == "pub_key_ecdsa" || *name == "pub_key_ed25519" ||
                       *name == "hostname" || *name == "fqdn" || *name == "instance_id";
    if (!known) continue;
    if (!fields.emplace(*name, std::move(*value)).second) return Error::invalid(*name, "is given more than once");
  }

  PhoneHomePost post;
  for (const char* field : {"pub_key_rsa", "pub_key_ecdsa", "pub_key_ed25519"}) {
    auto it = fields.find(field);
    if (it == fields.end() || absent(it->second)) continue;
    Result<SshHostKey> key = parse_ssh_host_key_line(it->second);
    if (!key) return Error::invalid(field, key.error().fields.at(0).message);
    if (!type_fits(field, key->type)) return Error::invalid(field, "holds a " + key->type + " key");
    post.keys.push_back(std::move(*key));
  }
  if (post.keys.empty())
    return Error::invalid("pub_key_ed25519", "no SSH host key was posted (pub_key_rsa, pub_key_ecdsa, pub_key_ed25519)");
  for (const char* field : {"hostname", "fqdn"}) {
    auto it = fields.find(field);
    if (it == fields.end() || absent(it->second)) continue;
    Result<std::string> h = parse_hostname(it->second);
    if (!h) return Error::invalid(field, "is not a host name (RFC 1123)");
    (std::string_view(field) == "hostname" ? post.hostname : post.fqdn) = std::move(*h);
  }
  if (auto it = fields.find("instance_id"); it != fields.end() && !absent(it->second)) {
    Status clean = check_printable(it->second, kMaxInstanceId);
    if (!clean) return Error::invalid("instance_id", clean.error().message);
    post.instance_id = it->second;
  }
  return post;
}

}  // namespace kiln::api
