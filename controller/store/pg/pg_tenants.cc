#include <utility>

#include "controller/store/pg/pg_store.h"

namespace kiln {

// PgStore: tenants and their quotas (TenantStore), as sqlite_tenants.cc.
//
// Concurrency: replace_tenant is one conditional UPDATE on the version the
// caller read (If-Match), so two instances replacing the same tenant cannot
// both win. delete_tenant locks the tenant row (FOR UPDATE) before counting
// its nodes and allocations, so a writer that assigns nodes to the tenant
// under a share lock on the same row waits or sees it gone.

namespace {

constexpr const char kTenantSelect[] = "SELECT name, display_name, created_at, updated_at, version FROM tenants";

Tenant read_tenant(const pg::Rows& r, int row) {
  Tenant t;
  t.name = r.text(row, 0);
  t.display_name = r.text(row, 1);
  t.created_at = r.int64(row, 2);
  t.updated_at = r.int64(row, 3);
  t.version = r.int64(row, 4);
  return t;
}

Error tenant_not_found(std::string_view name) { return Error(Code::kNotFound, "no such tenant: " + std::string(name)); }

Status load_quotas(pg::Connection& c, Tenant& t) {
  // Byte order, as SQLite's, whatever the database's collation.
  Result<pg::Rows> r = c.exec(
      "SELECT profile, kind, max_nodes FROM tenant_quotas WHERE tenant = $1"
      " ORDER BY profile COLLATE \"C\", kind COLLATE \"C\"",
      pg::Params().add(t.name));
  if (!r) return r.take_error();
  t.quotas.clear();
  for (int i = 0; i < r->size(); ++i) t.quotas.push_back(TenantQuota{r->text(i, 0), r->text(i, 1), r->int64(i, 2)});
  return ok_status();
}

Result<Tenant> select_tenant(pg::Connection& c, std::string_view name) {
  Result<pg::Rows> r = c.exec(std::string(kTenantSelect) + " WHERE name = $1", pg::Params().add(name));
  if (!r) return r.take_error();
  if (r->empty()) return tenant_not_found(name);
  Tenant t = read_tenant(*r, 0);
  if (Status q = load_quotas(c, t); !q) return q.take_error();
  return t;
}

// Replaces the quota rows of `t.name` with `t.quotas`, inside the caller's
// transaction.
Status write_quotas(pg::Connection& c, const Tenant& t) {
  if (Result<pg::Rows> d = c.exec("DELETE FROM tenant_quotas WHERE tenant = $1", pg::Params().add(t.name)); !d)
    return d.take_error();
  for (std::size_t i = 0; i < t.quotas.size(); ++i) {
    const TenantQuota& q = t.quotas[i];
    Result<pg::Rows> ins =
        c.exec("INSERT INTO tenant_quotas (tenant, profile, kind, max_nodes) VALUES ($1, $2, $3, $4)",
               pg::Params().add(t.name).add(q.profile).add(q.kind).add(q.max_nodes));
    if (!ins) {
      Error e = ins.take_error();
      if (pg::is_unique_violation(e))
        return Error(Code::kConflict, "two quotas for " + q.profile + " " + q.kind,
                     {FieldError{"/quotas/" + std::to_string(i), "duplicate profile and kind"}});
      return e;
    }
  }
  return ok_status();
}

Result<int64_t> count_where(pg::Connection& c, const std::string& sql, std::string_view arg) {
  Result<pg::Rows> r = c.exec(sql, pg::Params().add(arg));
  if (!r) return r.take_error();
  return r->int64(0, 0);
}

}  // namespace

Result<Tenant> PgStore::create_tenant(const Tenant& tenant) {
  Tenant out = tenant;
  out.created_at = out.updated_at = now_ms();
  out.version = 1;
  Result<Lease> l = lease();
  if (!l) return l.take_error();
  pg::Connection& c = l->conn();
  Result<pg::Transaction> tx = pg::Transaction::begin(c);
  if (!tx) return tx.take_error();
  Result<pg::Rows> ins = c.exec(
      "INSERT INTO tenants (name, display_name, created_at, updated_at, version) VALUES ($1, $2, $3, $4, $5)",
      pg::Params().add(out.name).add(out.display_name).add(out.created_at).add(out.updated_at).add(out.version));
  if (!ins) {
    Error e = ins.take_error();
    if (pg::is_unique_violation(e))
      return Error(Code::kConflict, "tenant " + out.name + " already exists", {FieldError{"/name", "already in use"}});
    return e;
  }
  if (Status q = write_quotas(c, out); !q) return q.take_error();
  if (Status s = tx->commit(); !s) return s.take_error();
  return out;
}

Result<Tenant> PgStore::get_tenant(std::string_view name) {
  Result<Lease> l = lease();
  if (!l) return l.take_error();
  Result<pg::Transaction> tx = pg::Transaction::begin_read(l->conn());
  if (!tx) return tx.take_error();
  return select_tenant(l->conn(), name);
}

Result<std::vector<Tenant>> PgStore::list_tenants() {
  Result<Lease> l = lease();
  if (!l) return l.take_error();
  pg::Connection& c = l->conn();
  Result<pg::Transaction> tx = pg::Transaction::begin_read(c);
  if (!tx) return tx.take_error();
  Result<pg::Rows> r = c.exec(std::string(kTenantSelect) + " ORDER BY name");
  if (!r) return r.take_error();
  std::vector<Tenant> out;
  for (int i = 0; i < r->size(); ++i) {
    out.push_back(read_tenant(*r, i));
    if (Status q = load_quotas(c, out.back()); !q) return q.take_error();
  }
  return out;
}

Result<Tenant> PgStore::replace_tenant(const Tenant& tenant, int64_t expected_version) {
  Tenant out = tenant;
  out.updated_at = now_ms();
  out.version = expected_version + 1;
  Result<Lease> l = lease();
  if (!l) return l.take_error();
  pg::Connection& c = l->conn();
  Result<pg::Transaction> tx = pg::Transaction::begin(c);
  if (!tx) return tx.take_error();
  Result<pg::Rows> up = c.exec(
      "UPDATE tenants SET display_name = $2, updated_at = greatest(updated_at, $3), version = version + 1"
      " WHERE name = $1 AND version = $4 RETURNING created_at, updated_at",
      pg::Params().add(out.name).add(out.display_name).add(out.updated_at).add(expected_version));
  if (!up) return up.take_error();
  if (up->empty()) {
    // Which failure: no tenant, or another version (read after the fact; the
    // UPDATE above is what decided).
    Result<Tenant> cur = select_tenant(c, tenant.name);
    if (!cur) return cur.take_error();
    return Error(Code::kPreconditionFailed, "tenant " + tenant.name + " is at version " +
                                                std::to_string(cur->version) + ", not " +
                                                std::to_string(expected_version));
  }
  out.created_at = up->int64(0, 0);
  out.updated_at = up->int64(0, 1);
  if (Status q = write_quotas(c, out); !q) return q.take_error();
  if (Status s = tx->commit(); !s) return s.take_error();
  return out;
}

Status PgStore::delete_tenant(std::string_view name) {
  Result<Lease> l = lease();
  if (!l) return l.take_error();
  pg::Connection& c = l->conn();
  Result<pg::Transaction> tx = pg::Transaction::begin(c);
  if (!tx) return tx.take_error();
  // Lock the row when there is one; a missing tenant is reported after the
  // checks, as SQLite does (nodes may name a tenant that has no row).
  if (Result<pg::Rows> lock = c.exec("SELECT 1 FROM tenants WHERE name = $1 FOR UPDATE", pg::Params().add(name)); !lock)
    return lock.take_error();
  Result<int64_t> n = count_where(c, "SELECT count(*) FROM nodes WHERE tenant = $1", name);
  if (!n) return n.take_error();
  if (*n > 0)
    return Error(Code::kConflict, "tenant " + std::string(name) + " still holds " + std::to_string(*n) +
                                      (*n == 1 ? " node" : " nodes") + "; release them first");
  Result<int64_t> live = count_where(
      c, "SELECT count(*) FROM allocations WHERE tenant = $1 AND state NOT IN ('released', 'failed')", name);
  if (!live) return live.take_error();
  if (*live > 0)
    return Error(Code::kConflict, "tenant " + std::string(name) + " has " + std::to_string(*live) +
                                      (*live == 1 ? " live allocation" : " live allocations") +
                                      "; release them first");
  if (Result<pg::Rows> d = c.exec("DELETE FROM tokens WHERE role = 'tenant' AND tenant = $1", pg::Params().add(name)); !d)
    return d.take_error();
  Result<pg::Rows> d = c.exec("DELETE FROM tenants WHERE name = $1", pg::Params().add(name));
  if (!d) return d.take_error();
  if (d->affected() == 0) return tenant_not_found(name);
  return tx->commit();
}

Result<TenantUsage> PgStore::tenant_usage(std::string_view name) {
  Result<Lease> l = lease();
  if (!l) return l.take_error();
  Result<pg::Rows> r = l->conn().exec(
      "SELECT profile, kind, count(*) FROM nodes WHERE tenant = $1 GROUP BY profile, kind", pg::Params().add(name));
  if (!r) return r.take_error();
  TenantUsage out;
  for (int i = 0; i < r->size(); ++i) out[{r->text(i, 0), r->text(i, 1)}] = r->int64(i, 2);
  return out;
}

Result<std::map<std::string, TenantUsage>> PgStore::usage_by_tenant() {
  Result<Lease> l = lease();
  if (!l) return l.take_error();
  Result<pg::Rows> r = l->conn().exec(
      "SELECT tenant, profile, kind, count(*) FROM nodes WHERE tenant != '' GROUP BY tenant, profile, kind");
  if (!r) return r.take_error();
  std::map<std::string, TenantUsage> out;
  for (int i = 0; i < r->size(); ++i) out[r->text(i, 0)][{r->text(i, 1), r->text(i, 2)}] = r->int64(i, 3);
  return out;
}

}  // namespace kiln
