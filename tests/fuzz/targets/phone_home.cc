// What a deployed OS posts to POST /v1/phone-home/{token} (cloud-init's
// phone_home, controller/api/phone_home_input.h), parsed as kilnd parses it,
// and the host key rule it uses (common/ssh_host_key.h). First byte picks:
// the whole form body, or one public key line. Every accepted value must be
// what the contracts promise: 1-3 keys, each a known type whose key is
// canonical base64 within the bound that parses again to the same key and
// fingerprint, of its field's type; a hostname of its charset; an
// instance_id that is printable and bounded; nothing echoed into messages.
#include <cstdint>
#include <string>
#include <string_view>

#include "common/machine_values.h"
#include "common/ssh_host_key.h"
#include "controller/api/phone_home_input.h"

namespace {

void check_key(const kiln::SshHostKey& k) {
  bool known = false;
  for (std::string_view t : kiln::ssh_host_key_types()) known = known || t == k.type;
  if (!known || k.key.empty() || k.key.size() > kiln::kMaxSshHostKeyBase64) __builtin_trap();
  for (char c : k.key)
    if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '+' || c == '/' ||
          c == '='))
      __builtin_trap();
  if (k.sha256.rfind("SHA256:", 0) != 0 || k.sha256.size() != 7 + 43) __builtin_trap();
  kiln::Result<kiln::SshHostKey> again = kiln::parse_ssh_host_key(k.type, k.key);
  if (!again || !(*again == k)) __builtin_trap();
}

bool host_char(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || c == '-' || c == '.'; }

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  if (data[0] % 2 == 0) {
    kiln::Result<kiln::SshHostKey> k = kiln::parse_ssh_host_key_line(text);
    if (k) check_key(*k);
    else if (k.error().fields.size() != 1 || k.error().fields[0].field != "key") __builtin_trap();
    return 0;
  }
  kiln::Result<kiln::api::PhoneHomePost> post = kiln::api::parse_phone_home_form(text);
  if (!post) {
    if (post.error().fields.size() != 1 || post.error().message.size() > 400) __builtin_trap();
    return 0;
  }
  if (post->keys.empty() || post->keys.size() > 3) __builtin_trap();
  for (const kiln::SshHostKey& k : post->keys) check_key(k);
  for (const std::string* h : {&post->hostname, &post->fqdn})
    for (char c : *h)
      if (!host_char(c)) __builtin_trap();
  if (post->instance_id && !kiln::check_printable(*post->instance_id, 128)) __builtin_trap();
  return 0;
}
