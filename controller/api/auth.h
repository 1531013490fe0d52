#pragma once
// Bearer-token authentication and role checks.
//
// A token is "kiln_" + 48 hex characters, shown once at creation; the store
// keeps only its SHA-256, so authenticate() hashes the presented secret and
// looks the hash up: one indexed read, or none where a TokenCache holds the
// token from a read at the generation the request read first (the store's
// write generation, controller/store/store.h: SQLite's counter, or
// PostgreSQL's snapshot when the route is one the read cache keeps).
// Deleting a token is a write, so it takes effect on the very next request
// either way, through any kilnd sharing the database.
//
// Roles: admin (everything), operator (nodes, ports, verbs, maintenance,
// events; not tokens or audit), tenant (its own nodes: read, power verbs; its
// own nodes' events). Route handlers call the can_*() predicates below rather
// than comparing role strings.

#include <utility>  // before Asio: Boost 1.74 awaitable.hpp uses std::exchange
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>

#include <boost/asio/awaitable.hpp>

#include "common/blocking_pool.h"
#include "common/clock.h"
#include "common/http/server.h"
#include "common/result.h"
#include "controller/api/role.h"
#include "controller/store/store.h"

namespace kiln::api {

namespace bhttp = boost::beast::http;

// Who is calling: the token's public fields.
struct Principal {
  std::string token_id;
  std::string name;
  Role role = Role::kTenant;
  std::string tenant;  // role tenant only

  bool is_staff() const { return role == Role::kAdmin || role == Role::kOperator; }
  bool is_admin() const { return role == Role::kAdmin; }
  // Whether this caller may see a node owned by `node_tenant` (empty = provider's).
  bool sees_tenant(std::string_view node_tenant) const {
    return is_staff() || (!tenant.empty() && node_tenant == tenant);
  }
};

// Tokens found by the store, kept while the store's write generation
// (NodeStore::write_generation or database_generation) stays the one they
// were read at, so a request with a known token needs no store call. Unknown
// tokens are never kept (nobody fills it by guessing); expiry is checked at
// every use. At most kMaxEntries (emptied when an insert would pass it).
// Thread-safe.
class TokenCache {
 public:
  static constexpr std::size_t kMaxEntries = 1024;
  // The token whose secret hashes to `hash`, read at `generation` (the same
  // value: order and snapshot); nullopt when not held or read at another.
  std::optional<TokenRecord> find(const std::string& hash, const WriteGeneration& generation) const;
  void put(const std::string& hash, const WriteGeneration& generation, const TokenRecord& token);

 private:
  mutable std::mutex mu_;
  std::unordered_map<std::string, std::pair<WriteGeneration, TokenRecord>> tokens_;
};

// Where a lookup may take a token from memory: `cache`, at `generation`, the
// value the request read before anything else read the store. The cache is
// used only when both are set; otherwise every lookup reads the store.
struct TokenMemory {
  TokenCache* cache = nullptr;
  const WriteGeneration* generation = nullptr;
};

// Reads `Authorization: Bearer <token>` and resolves it through the store (on
// `db`), or `memory` when it holds the token. Errors: kUnauthenticated
// (missing, malformed, unknown or expired token), kInternal (store failure).
asio::awaitable<Result<Principal>> authenticate(const http::Request& req, NodeStore& store,
                                                BlockingPool& db, const Clock& clock,
                                                TokenMemory memory = {});

// Resolves a token's secret (as presented, without any scheme) to its
// principal: the one rule for unknown, revoked and expired tokens, shared by
// the Bearer header above and the Ironic-compatible API's X-Auth-Token and
// HTTP Basic (controller/ironic). Errors: kUnauthenticated (empty, unknown or
// expired), kInternal (store failure or a stored role Kiln does not know).
asio::awaitable<Result<Principal>> principal_for_secret(std::string_view secret, NodeStore& store,
                                                        BlockingPool& db, const Clock& clock,
                                                        TokenMemory memory = {});

// The secret shown to the caller once: "kiln_" + random_hex(24).
std::string new_token_secret();

}  // namespace kiln::api

namespace kiln {

// Creates an admin token named "bootstrap-admin" whose secret is `secret`, iff
// the store holds no admin token yet (so restarts are idempotent and a
// bootstrap secret cannot resurrect access once admins manage their own
// tokens). Blocking: call at start-up, not on I/O threads. Errors:
// kInvalidArgument (secret shorter than 16 characters), store errors.
Status bootstrap_admin_token(NodeStore& store, const std::string& secret, const Clock& clock);

}  // namespace kiln
