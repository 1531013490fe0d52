#pragma once
// An SSH host public key a machine reports (cloud-init's phone_home, a
// kilnd node's `ssh_host_keys`), parsed before anything stores it or writes
// it into a known_hosts file.
//
// The one home of the rule (kilnd's phone-home route and the CLI's
// known_hosts writer both call it): the type is one of OpenSSH's host key
// types; the key is strict base64 (canonical, padded, at most
// kMaxSshHostKeyBase64 characters) whose decoded blob is a complete key of
// that type in the SSH wire format, its embedded type string the same one.
// A key that ssh would read as another type, or text that would be a second
// known_hosts field, is thereby impossible.
//
// Pure functions, any thread, never throw. Error messages never echo the
// input (it is the machine's, and may be megabytes or terminal escapes).

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"

namespace kiln {

// A 16384-bit RSA key is ~2.8k characters of base64; this leaves room for
// every key OpenSSH makes and bounds what a machine can make kilnd store.
inline constexpr std::size_t kMaxSshHostKeyBase64 = 16384;

// ssh-ed25519, ecdsa-sha2-nistp256/384/521, ssh-rsa and the FIDO (sk-)
// variants; no DSA (OpenSSH dropped it), no certificates (a known_hosts
// certificate line is a @cert-authority marker, never written from these).
const std::vector<std::string_view>& ssh_host_key_types();

struct SshHostKey {
  std::string type;    // one of ssh_host_key_types()
  std::string key;     // canonical base64 of the blob
  std::string sha256;  // "SHA256:<unpadded base64>", as `ssh-keygen -l` prints it
  bool operator==(const SshHostKey&) const = default;
};

// `type` and `base64` checked as above. Errors (kInvalidArgument with one
// field, "type" or "key"): an unknown type; a key that is not canonical
// base64 of 4-kMaxSshHostKeyBase64 characters; a blob that is not a complete
// key of `type` (truncated, padded, another type's, the wrong part count).
Result<SshHostKey> parse_ssh_host_key(std::string_view type, std::string_view base64);

// One OpenSSH public key line as a `*.pub` file holds it ("<type> <base64>
// [comment]", one trailing newline allowed): the comment is dropped (it is
// the machine's free text and nothing needs it). Errors as
// parse_ssh_host_key, plus "key" when the line holds a control character
// or has fewer than two fields.
Result<SshHostKey> parse_ssh_host_key_line(std::string_view line);

// "SHA256:" + base64 without padding of the SHA-256 of `blob` (the decoded
// key), as `ssh-keygen -l` and ssh's host key prompts print it.
std::string ssh_key_sha256_fingerprint(std::string_view blob);

}  // namespace kiln
