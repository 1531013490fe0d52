#pragma once
// AccessStore: API tokens. Only the SHA-256 of a secret is stored.
//
// Threading and errors as NodeStore (controller/store/store.h): every method
// is safe from any thread and blocks on disk I/O.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"

namespace kiln {

struct TokenRecord {
  std::string id;          // UUID; the public handle
  std::string name;
  std::string role;        // admin | operator | tenant
  std::string tenant;      // for role tenant
  std::string secret_hash; // sha256 hex of the secret; the secret is never stored
  int64_t created_at = 0;
  int64_t expires_at = 0;  // 0 = never
};

class AccessStore {
 public:
  virtual ~AccessStore() = default;

  virtual Result<TokenRecord> create_token(const TokenRecord& token) = 0;
  virtual Result<TokenRecord> find_token_by_hash(std::string_view secret_hash) = 0;
  virtual Result<std::vector<TokenRecord>> list_tokens() = 0;
  virtual Status delete_token(std::string_view id) = 0;
  virtual Result<bool> has_token_with_role(std::string_view role) = 0;

  // The sealing key's check value (schemas/sql/sqlite/015_key_check.sql):
  // the stored one, or `proposed` stored and returned when none is stored yet
  // (one statement: two instances starting together agree on one value).
  virtual Result<std::string> key_check(const std::string& proposed) = 0;
};

}  // namespace kiln
