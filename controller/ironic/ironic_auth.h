#pragma once
// Who is calling the Ironic-compatible API: a Kiln token, presented the two
// ways keystoneauth's plugins send one.
//
//  - `X-Auth-Token: <secret>`: the `admin_token` (and `token_endpoint`) plugin.
//  - `Authorization: Basic base64(<user>:<secret>)`: the `http_basic` plugin.
//    <user> is the token's id or its name; <secret> is the token's secret
//    (what POST /v1/tokens showed once). The secret authenticates (it is
//    looked up by its hash, as a Bearer token is); the user must then be that
//    token's id or name, so a secret sent under another token's name is
//    refused. Names containing ':' cannot be sent (RFC 7617): use the id.
//  - `Authorization: Bearer <secret>`: accepted too, as on /v1.
//
// Every path ends in api::principal_for_secret(), so expiry, revocation and
// roles are exactly /v1's. Errors: kUnauthenticated (none given, malformed,
// unknown, expired, user not the secret's token), kInternal (store).

#include <utility>  // before Asio: Boost 1.74 awaitable.hpp uses std::exchange
#include <optional>
#include <string>

#include <boost/asio/awaitable.hpp>

#include "common/blocking_pool.h"
#include "common/clock.h"
#include "common/http/server.h"
#include "common/result.h"
#include "controller/api/auth.h"

namespace kiln {
class NodeStore;  // controller/store/store.h
}  // namespace kiln

namespace kiln::ironic {

// A credential as sent, before any store lookup.
struct PresentedCredential {
  std::string secret;
  std::optional<std::string> user;  // Basic only: the token id or name it claims
};

// Reads the credential from the headers (X-Auth-Token first, then
// Authorization). Errors: kUnauthenticated naming what is wrong (never
// echoing a secret). Pure; exposed for tests and the fuzz target.
Result<PresentedCredential> read_credential(const http::Request& req);

// read_credential() and then the token lookup (see above). The whole store
// only because api::principal_for_secret takes it (it reads tokens).
asio::awaitable<Result<api::Principal>> authenticate(const http::Request& req, NodeStore& store,
                                                     BlockingPool& db, const Clock& clock);

}  // namespace kiln::ironic
