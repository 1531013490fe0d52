#include "controller/api/auth.h"

#include <cctype>

#include "common/crypto.h"
#include "common/ids.h"

namespace kiln::api {

std::string new_token_secret() { return "kiln_" + random_hex(24); }

std::optional<TokenRecord> TokenCache::find(const std::string& hash, const WriteGeneration& generation) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = tokens_.find(hash);
  if (it == tokens_.end() || it->second.first != generation) return std::nullopt;
  return it->second.second;
}

void TokenCache::put(const std::string& hash, const WriteGeneration& generation, const TokenRecord& token) {
  std::lock_guard<std::mutex> lock(mu_);
  if (tokens_.size() >= kMaxEntries && !tokens_.contains(hash)) tokens_.clear();
  tokens_[hash] = {generation, token};
}

asio::awaitable<Result<Principal>> authenticate(const http::Request& req, NodeStore& store,
                                                BlockingPool& db, const Clock& clock, TokenMemory memory) {
  auto it = req.find(bhttp::field::authorization);
  if (it == req.end()) co_return Error(Code::kUnauthenticated, "missing bearer token");
  std::string_view value = it->value();
  constexpr std::string_view kScheme = "bearer ";
  bool scheme_ok = value.size() > kScheme.size();
  for (std::size_t i = 0; scheme_ok && i < kScheme.size(); ++i)
    scheme_ok = std::tolower(static_cast<unsigned char>(value[i])) == kScheme[i];
  if (!scheme_ok) co_return Error(Code::kUnauthenticated, "Authorization must be 'Bearer <token>'");
  std::string_view secret = value.substr(kScheme.size());
  while (!secret.empty() && secret.front() == ' ') secret.remove_prefix(1);
  while (!secret.empty() && secret.back() == ' ') secret.remove_suffix(1);
  if (secret.empty()) co_return Error(Code::kUnauthenticated, "missing bearer token");
  co_return co_await principal_for_secret(secret, store, db, clock, memory);
}

asio::awaitable<Result<Principal>> principal_for_secret(std::string_view secret, NodeStore& store,
                                                        BlockingPool& db, const Clock& clock, TokenMemory memory) {
  if (secret.empty()) co_return Error(Code::kUnauthenticated, "missing token");
  std::string hash = sha256_hex(secret);
  // The generation was read before the store is (by the caller, before
  // anything of the request read it), so a token kept is never older than
  // the last write whose call has returned (read_cache.h).
  TokenCache* const cache = memory.generation != nullptr ? memory.cache : nullptr;
  std::optional<TokenRecord> held = cache != nullptr ? cache->find(hash, *memory.generation) : std::nullopt;
  Result<TokenRecord> token = Error(Code::kInternal, "token not read");
  if (held) token = std::move(*held);
  else token = co_await db.run([&] { return store.find_token_by_hash(hash); });
  if (!token) {
    if (token.error().code == Code::kNotFound)
      co_return Error(Code::kUnauthenticated, "unknown or revoked token");
    co_return token.error();
  }
  if (cache != nullptr && !held) cache->put(hash, *memory.generation, *token);
  if (token->expires_at != 0 && token->expires_at <= clock.now_ms())
    co_return Error(Code::kUnauthenticated, "token expired");
  std::optional<Role> role = parse_role(token->role);
  if (!role) co_return Error(Code::kInternal, "token has an unknown role");
  co_return Principal{token->id, token->name, *role, token->tenant};
}

}  // namespace kiln::api

namespace kiln {

Status bootstrap_admin_token(NodeStore& store, const std::string& secret, const Clock& clock) {
  if (secret.size() < 16)
    return Error(Code::kInvalidArgument, "bootstrap admin token must be at least 16 characters");
  Result<bool> has = store.has_token_with_role("admin");
  if (!has) return has.error();
  if (*has) return ok_status();
  TokenRecord t;
  t.id = new_uuid();
  t.name = "bootstrap-admin";
  t.role = "admin";
  t.secret_hash = sha256_hex(secret);
  t.created_at = clock.now_ms();
  Result<TokenRecord> created = store.create_token(t);
  if (!created) return created.error();
  return ok_status();
}

}  // namespace kiln
