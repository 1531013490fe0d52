#pragma once
// The body cloud-init's phone_home module POSTs (controller/tenancy/
// config_drive.h, "phone_home"), parsed as hostile input: it comes from the
// deployed OS, which is the tenant's.
//
// cc_phone_home.py hands `requests` a dict, so the body is
// application/x-www-form-urlencoded: `name=value` pairs joined by '&',
// '+' for a blank and %XX escapes. Fields (every one optional to the
// parser; "N/A" is cloud-init's word for a value it did not have, and
// reads as absent):
//   pub_key_rsa, pub_key_ecdsa, pub_key_ed25519
//       the whole /etc/ssh/ssh_host_*_key.pub file ("<type> <base64>
//       <comment>\n"), parsed by parse_ssh_host_key_line; the type must be
//       the field's (ssh-rsa; ecdsa-sha2-nistp*; ssh-ed25519)
//   hostname     parse_hostname
//   instance_id  printable, at most 128 bytes
//   fqdn         parse_hostname (cloud-init sends it with `post: all`)
// Other fields are ignored (cloud-init may grow some); a field given twice
// is refused. At least one host key must be present.
//
// Pure; any thread. Errors are kInvalidArgument with one FieldError naming
// the form field ("pub_key_ed25519", "hostname", "instance_id", "body");
// messages never echo the value.

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "common/ssh_host_key.h"

namespace kiln::api {

// The most of a phone-home body kilnd reads: three RSA-16384 key files fit
// in well under half of it. More is a 413.
inline constexpr std::size_t kPhoneHomeMaxBody = 64 * 1024;

struct PhoneHomePost {
  std::vector<SshHostKey> keys;  // in field order rsa, ecdsa, ed25519; 1-3
  std::string hostname;          // "" when absent
  std::string fqdn;              // "" when absent
  std::optional<std::string> instance_id;
};

Result<PhoneHomePost> parse_phone_home_form(std::string_view body);

}  // namespace kiln::api
