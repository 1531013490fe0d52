#include "controller/ironic/ironic_auth.h"

#include <cctype>

#include "common/crypto.h"
#include "common/http/field_value.h"

namespace kiln::ironic {
namespace {

namespace bhttp = boost::beast::http;

// Whether `value` starts with `scheme` followed by a space, any case.
bool has_scheme(std::string_view value, std::string_view scheme) {
  if (value.size() <= scheme.size() || value[scheme.size()] != ' ') return false;
  for (std::size_t i = 0; i < scheme.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(value[i])) != scheme[i]) return false;
  return true;
}

// A secret or user as sent must be printable ASCII: anything else is no
// token Kiln issued, and would otherwise reach logs via the user name.
bool printable(std::string_view s) {
  for (char c : s)
    if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) > 0x7e) return false;
  return true;
}

constexpr std::size_t kMaxCredential = 4096;

}  // namespace

Result<PresentedCredential> read_credential(const http::Request& req) {
  if (auto it = req.find("X-Auth-Token"); it != req.end()) {
    std::string_view secret = http::trim_ows(it->value());
    if (secret.empty()) return Error(Code::kUnauthenticated, "X-Auth-Token is empty");
    if (secret.size() > kMaxCredential || !printable(secret))
      return Error(Code::kUnauthenticated, "X-Auth-Token is not a Kiln token");
    return PresentedCredential{std::string(secret), std::nullopt};
  }
  auto it = req.find(bhttp::field::authorization);
  if (it == req.end())
    return Error(Code::kUnauthenticated,
                 "authentication required: send X-Auth-Token: <token> or "
                 "Authorization: Basic base64(<token id or name>:<token>)");
  std::string_view value = http::trim_ows(it->value());
  if (value.size() > kMaxCredential) return Error(Code::kUnauthenticated, "Authorization header too long");
  if (has_scheme(value, "bearer")) {
    std::string_view secret = http::trim_ows(value.substr(7));
    if (secret.empty() || !printable(secret)) return Error(Code::kUnauthenticated, "malformed bearer token");
    return PresentedCredential{std::string(secret), std::nullopt};
  }
  if (!has_scheme(value, "basic"))
    return Error(Code::kUnauthenticated, "Authorization must be 'Basic <base64>' or 'Bearer <token>'");
  Result<std::string> decoded = base64_decode(http::trim_ows(value.substr(6)));
  if (!decoded) return Error(Code::kUnauthenticated, "Authorization: Basic credentials are not base64");
  std::size_t colon = decoded->find(':');
  if (colon == std::string::npos)
    return Error(Code::kUnauthenticated, "Authorization: Basic credentials must be <token id or name>:<token>");
  std::string user = decoded->substr(0, colon);
  std::string secret = decoded->substr(colon + 1);
  if (user.empty() || secret.empty() || !printable(user) || !printable(secret))
    return Error(Code::kUnauthenticated, "Authorization: Basic credentials must be <token id or name>:<token>");
  return PresentedCredential{std::move(secret), std::move(user)};
}

asio::awaitable<Result<api::Principal>> authenticate(const http::Request& req, NodeStore& store,
                                                     BlockingPool& db, const Clock& clock) {
  Result<PresentedCredential> cred = read_credential(req);
  if (!cred) co_return cred.error();
  Result<api::Principal> p = co_await api::principal_for_secret(cred->secret, store, db, clock);
  if (!p) co_return p.error();
  // The same answer as an unknown secret: a caller learns nothing about
  // which names go with which secrets.
  if (cred->user && *cred->user != p->token_id && *cred->user != p->name)
    co_return Error(Code::kUnauthenticated, "unknown or revoked token");
  co_return p;
}

}  // namespace kiln::ironic
