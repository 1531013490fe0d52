#pragma once
// OpenSSH public keys as a tenant hands them over (one authorized_keys line:
// "<type> <base64 blob> [comment]", as `ssh-keygen` writes *.pub files;
// PROTOCOL.key / RFC 4253 section 6.6 for the blob). Checked before anything
// is reserved, so a typo is a 400 naming the key rather than a node nobody
// can log in to.
//
// Accepted types: ssh-ed25519, ssh-rsa (at least 2048 bits), ecdsa-sha2-
// nistp256/384/521, and the security-key types sk-ssh-ed25519@openssh.com and
// sk-ecdsa-sha2-nistp256@openssh.com. The blob must be valid base64 and must
// itself name the same type; its fields must be complete and nothing may
// follow them. authorized_keys options (`command="..." ssh-ed25519 ...`) are
// refused: they are the operator's business, not the tenant's.
//
// Pure: no I/O, thread-safe.

#include <string>
#include <string_view>

#include "common/result.h"

namespace kiln {

// ok, or kInvalidArgument naming `field` with the reason ("unknown key type
// 'ssh-foo'", "RSA key of 1024 bits; at least 2048 are required", ...).
Status check_ssh_public_key(std::string_view line, const std::string& field);

}  // namespace kiln
