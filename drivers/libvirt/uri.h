#pragma once
// libvirt connection URIs as strings: finding and hiding a password in the
// userinfo. Pure; the API's host reader and the connection both use them.

#include <string>
#include <string_view>

namespace kiln::libvirt {

// Whether `uri`'s authority has a userinfo with a password
// ("qemu+ssh://user:pw@host/..."). A bare user ("root@host") is not one.
bool uri_has_password(std::string_view uri);
// `uri` with the password of its userinfo replaced by "***" (unchanged when
// it has none): the form to show in the API, errors and logs.
std::string display_uri(std::string_view uri);
// `text` with every occurrence of `secret` replaced by "***" (nothing when
// `secret` is empty). For messages that may echo a credential.
std::string scrub(std::string text, std::string_view secret);

}  // namespace kiln::libvirt
