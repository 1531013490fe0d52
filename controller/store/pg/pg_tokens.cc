#include "common/ids.h"
#include "controller/store/pg/pg_store.h"

namespace kiln {

// PgStore: API tokens (AccessStore), as sqlite_tokens.cc.

namespace {

constexpr const char kTokenSelect[] = "SELECT id, name, role, tenant, secret_hash, created_at, expires_at FROM tokens";

std::vector<TokenRecord> read_tokens(const pg::Rows& r) {
  std::vector<TokenRecord> out;
  for (int i = 0; i < r.size(); ++i) {
    TokenRecord t;
    t.id = r.text(i, 0);
    t.name = r.text(i, 1);
    t.role = r.text(i, 2);
    t.tenant = r.text(i, 3);
    t.secret_hash = r.text(i, 4);
    t.created_at = r.int64(i, 5);
    t.expires_at = r.int64(i, 6);
    out.push_back(std::move(t));
  }
  return out;
}

}  // namespace

Result<TokenRecord> PgStore::create_token(const TokenRecord& token) {
  TokenRecord t = token;
  if (t.id.empty()) t.id = new_uuid();
  if (t.created_at == 0) t.created_at = now_ms();
  Result<Lease> l = lease();
  if (!l) return l.take_error();
  Result<pg::Rows> r = l->conn().exec(
      "INSERT INTO tokens (id, name, role, tenant, secret_hash, created_at, expires_at)"
      " VALUES ($1, $2, $3, $4, $5, $6, $7)",
      pg::Params().add(t.id).add(t.name).add(t.role).add(t.tenant).add(t.secret_hash).add(t.created_at).add(
          t.expires_at));
  if (!r) {
    Error e = r.take_error();
    if (pg::is_unique_violation(e) && e.message.find("\"tokens_secret_hash_key\"") != std::string::npos)
      return Error(Code::kConflict, "a token with this secret already exists");
    if (pg::is_unique_violation(e) && e.message.find("\"tokens_pkey\"") != std::string::npos)
      return Error(Code::kConflict, "token " + t.id + " already exists", {FieldError{"/id", "already in use"}});
    return e;
  }
  return t;
}

Result<TokenRecord> PgStore::find_token_by_hash(std::string_view secret_hash) {
  Result<Lease> l = lease();
  if (!l) return l.take_error();
  Result<pg::Rows> r = l->conn().exec(std::string(kTokenSelect) + " WHERE secret_hash = $1",
                                      pg::Params().add(secret_hash));
  if (!r) return r.take_error();
  if (r->empty()) return Error(Code::kNotFound, "token not found");  // never echo the hash
  return read_tokens(*r).front();
}

Result<std::vector<TokenRecord>> PgStore::list_tokens() {
  Result<Lease> l = lease();
  if (!l) return l.take_error();
  Result<pg::Rows> r = l->conn().exec(std::string(kTokenSelect) + " ORDER BY created_at, id");
  if (!r) return r.take_error();
  return read_tokens(*r);
}

Status PgStore::delete_token(std::string_view id) {
  Result<Lease> l = lease();
  if (!l) return l.take_error();
  Result<pg::Rows> r = l->conn().exec("DELETE FROM tokens WHERE id = $1", pg::Params().add(id));
  if (!r) return r.take_error();
  if (r->affected() == 0) return Error(Code::kNotFound, "token " + std::string(id) + " not found");
  return ok_status();
}

Result<bool> PgStore::has_token_with_role(std::string_view role) {
  Result<Lease> l = lease();
  if (!l) return l.take_error();
  Result<pg::Rows> r = l->conn().exec(
      "SELECT EXISTS (SELECT 1 FROM tokens WHERE role = $1 AND (expires_at = 0 OR expires_at > $2))",
      pg::Params().add(role).add(now_ms()));
  if (!r) return r.take_error();
  return r->boolean(0, 0);
}

Result<std::string> PgStore::key_check(const std::string& proposed) {
  Result<Lease> l = lease();
  if (!l) return l.take_error();
  // The insert loses to a concurrent one without error; the select then reads
  // whichever value won (READ COMMITTED sees the committed row).
  Result<pg::Rows> ins = l->conn().exec("INSERT INTO key_check (id, value) VALUES (1, $1) ON CONFLICT (id) DO NOTHING",
                                        pg::Params().add(proposed));
  if (!ins) return ins.take_error();
  Result<pg::Rows> r = l->conn().exec("SELECT value FROM key_check WHERE id = 1", pg::Params());
  if (!r) return r.take_error();
  if (r->size() != 1) return Error(Code::kInternal, "key check value missing after insert");
  return r->text(0, 0);
}

}  // namespace kiln
