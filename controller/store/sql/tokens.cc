#include <utility>

#include "common/ids.h"
#include "controller/store/sql/sql_store.h"

namespace kiln {

// SqlStore: API tokens (AccessStore).

namespace {

constexpr const char kTokenSelect[] = "SELECT id, name, role, tenant, secret_hash, created_at, expires_at FROM tokens";
constexpr db::Constraint kTokenSecret{"tokens.secret_hash", "tokens_secret_hash_key"};
constexpr db::Constraint kTokenId{"tokens.id", "tokens_pkey"};

TokenRecord read_token(const db::Rows& r) {
  TokenRecord t;
  t.id = r.text(0);
  t.name = r.text(1);
  t.role = r.text(2);
  t.tenant = r.text(3);
  t.secret_hash = r.text(4);
  t.created_at = r.int64(5);
  t.expires_at = r.int64(6);
  return t;
}

}  // namespace

Result<TokenRecord> SqlStore::create_token(const TokenRecord& token) {
  TokenRecord t = token;
  if (t.id.empty()) t.id = new_uuid();
  if (t.created_at == 0) t.created_at = now_ms();
  Status s = autocommit([&](db::Conn& c) -> Status {
    Result<int64_t> n = c.exec(
        "INSERT INTO tokens (id, name, role, tenant, secret_hash, created_at, expires_at)"
        " VALUES ($1, $2, $3, $4, $5, $6, $7)",
        db::Binds().add(t.id).add(t.name).add(t.role).add(t.tenant).add(t.secret_hash).add(t.created_at).add(
            t.expires_at));
    if (n) return ok_status();
    Error e = n.take_error();
    if (c.dialect().violated(e, kTokenSecret)) return Error(Code::kConflict, "a token with this secret already exists");
    if (c.dialect().violated(e, kTokenId))
      return Error(Code::kConflict, "token " + t.id + " already exists", {FieldError{"/id", "already in use"}});
    return e;
  });
  if (!s) return s.take_error();
  return t;
}

Result<TokenRecord> SqlStore::find_token_by_hash(std::string_view secret_hash) {
  return read_value<TokenRecord>([&](db::Conn& c) {
    // kNotFound never echoes the hash.
    return db::query_one<TokenRecord>(c, std::string(kTokenSelect) + " WHERE secret_hash = $1",
                                      db::Binds().add(secret_hash), read_token, "token not found");
  });
}

Result<std::vector<TokenRecord>> SqlStore::list_tokens() {
  return read_value<std::vector<TokenRecord>>([&](db::Conn& c) -> Result<std::vector<TokenRecord>> {
    Result<db::Rows> r = c.query(std::string(kTokenSelect) + " ORDER BY created_at, id");
    if (!r) return r.take_error();
    return db::collect<TokenRecord>(*r, read_token);
  });
}

Status SqlStore::delete_token(std::string_view id) {
  return autocommit([&](db::Conn& c) -> Status {
    Result<int64_t> n = c.exec("DELETE FROM tokens WHERE id = $1", db::Binds().add(id));
    if (!n) return n.take_error();
    if (*n == 0) return Error(Code::kNotFound, "token " + std::string(id) + " not found");
    return ok_status();
  });
}

Result<bool> SqlStore::has_token_with_role(std::string_view role) {
  Result<int64_t> found = read_value<int64_t>([&](db::Conn& c) {
    return db::query_int(c, "SELECT count(*) FROM tokens WHERE role = $1 AND (expires_at = 0 OR expires_at > $2)",
                         db::Binds().add(role).add(now_ms()));
  });
  if (!found) return found.take_error();
  return *found > 0;
}

Result<std::string> SqlStore::key_check(const std::string& proposed) {
  return autocommit_value<std::string>([&](db::Conn& c) -> Result<std::string> {
    // The insert loses to a concurrent one without error; the select then
    // reads whichever value won (a committed row).
    Result<int64_t> ins = c.exec("INSERT INTO key_check (id, value) VALUES (1, $1) ON CONFLICT (id) DO NOTHING",
                                 db::Binds().add(proposed));
    if (!ins) return ins.take_error();
    Result<std::string> value = db::query_one<std::string>(c, "SELECT value FROM key_check WHERE id = 1", {},
                                                           [](const db::Rows& r) { return r.text(0); }, "");
    if (!value && value.error().code == Code::kNotFound)
      return Error(Code::kInternal, "key check value missing after insert");
    return value;
  });
}

}  // namespace kiln
