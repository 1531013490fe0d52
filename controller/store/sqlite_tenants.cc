#include "controller/store/sqlite_store.h"

#include <utility>

#include "controller/store/sqlite_locks.h"
#include "controller/store/sqlite_rows.h"

namespace kiln {

using namespace store_rows;

// SqliteStore: tenants and their quotas (TenantStore).

namespace {

constexpr const char kTenantColumns[] = "name, display_name, created_at, updated_at, version";

Tenant read_tenant(const sql::Statement& s) {
  Tenant t;
  t.name = s.column_text(0);
  t.display_name = s.column_text(1);
  t.created_at = s.column_int64(2);
  t.updated_at = s.column_int64(3);
  t.version = s.column_int64(4);
  return t;
}

Error tenant_not_found(std::string_view name) {
  return Error(Code::kNotFound, "no such tenant: " + std::string(name));
}

Status load_quotas(sql::Database& db, Tenant& t) {
  Result<sql::StatementRef> st = db.prepare(
      "SELECT profile, kind, max_nodes FROM tenant_quotas WHERE tenant = ?1 ORDER BY profile, kind");
  if (!st) return st.take_error();
  (*st)->bind(1, t.name);
  Result<std::vector<TenantQuota>> q = collect<TenantQuota>(**st, [](const sql::Statement& s) {
    return TenantQuota{s.column_text(0), s.column_text(1), s.column_int64(2)};
  });
  if (!q) return q.take_error();
  t.quotas = std::move(*q);
  return ok_status();
}

Result<Tenant> select_tenant(sql::Database& db, std::string_view name) {
  Result<sql::StatementRef> st =
      db.prepare(std::string("SELECT ") + kTenantColumns + " FROM tenants WHERE name = ?1");
  if (!st) return st.take_error();
  (*st)->bind(1, name);
  Result<bool> row = (*st)->step();
  if (!row) return row.take_error();
  if (!*row) return tenant_not_found(name);
  Tenant t = read_tenant(**st);
  (*st)->reset();
  if (Status q = load_quotas(db, t); !q) return q.take_error();
  return t;
}

// Replaces the quota rows of `t.name` with `t.quotas`. Inside the caller's
// transaction.
Status write_quotas(sql::Database& db, const Tenant& t) {
  if (Status s = run_with(db, "DELETE FROM tenant_quotas WHERE tenant = ?1", t.name); !s) return s;
  for (std::size_t i = 0; i < t.quotas.size(); ++i) {
    const TenantQuota& q = t.quotas[i];
    Result<sql::StatementRef> ins =
        db.prepare("INSERT INTO tenant_quotas (tenant, profile, kind, max_nodes) VALUES (?1, ?2, ?3, ?4)");
    if (!ins) return ins.take_error();
    (*ins)->bind(1, t.name).bind(2, q.profile).bind(3, q.kind).bind(4, q.max_nodes);
    if (Status s = (*ins)->run(); !s) {
      Error e = s.take_error();
      if (e.code == Code::kConflict)
        return Error(Code::kConflict, "two quotas for " + q.profile + " " + q.kind,
                     {FieldError{"/quotas/" + std::to_string(i), "duplicate profile and kind"}});
      return e;
    }
  }
  return ok_status();
}

}  // namespace

Result<Tenant> SqliteStore::create_tenant(const Tenant& tenant) {
  Tenant out = tenant;
  out.created_at = out.updated_at = now_ms();
  out.version = 1;
  Status s = on_writer([&](sql::Database& db) -> Status {
    Result<sql::Transaction> tx = sql::Transaction::begin_immediate(db);
    if (!tx) return tx.take_error();
    Result<sql::StatementRef> st = db.prepare(std::string("INSERT INTO tenants (") + kTenantColumns +
                                              ") VALUES (?1, ?2, ?3, ?4, ?5)");
    if (!st) return st.take_error();
    (*st)->bind(1, out.name).bind(2, out.display_name).bind(3, out.created_at).bind(4, out.updated_at)
        .bind(5, out.version);
    if (Status run = (*st)->run(); !run) {
      Error e = run.take_error();
      if (e.code == Code::kConflict && mentions(e, "tenants.name"))
        return Error(Code::kConflict, "tenant " + out.name + " already exists", {FieldError{"/name", "already in use"}});
      return e;
    }
    if (Status q = write_quotas(db, out); !q) return q;
    return tx->commit();
  });
  if (!s) return s.take_error();
  return out;
}

Result<Tenant> SqliteStore::get_tenant(std::string_view name) {
  Result<Tenant> out = Error(Code::kInternal, "unreachable");
  Status s = on_reader([&](sql::Database& db) -> Status {
    out = select_tenant(db, name);
    return ok_status();
  });
  if (!s) return s.take_error();
  return out;
}

Result<std::vector<Tenant>> SqliteStore::list_tenants() {
  std::vector<Tenant> out;
  Status s = on_reader([&](sql::Database& db) -> Status {
    Result<sql::StatementRef> st = db.prepare(std::string("SELECT ") + kTenantColumns + " FROM tenants ORDER BY name");
    if (!st) return st.take_error();
    Result<std::vector<Tenant>> all = collect<Tenant>(**st, read_tenant);
    if (!all) return all.take_error();
    for (Tenant& t : *all)
      if (Status q = load_quotas(db, t); !q) return q;
    out = std::move(*all);
    return ok_status();
  });
  if (!s) return s.take_error();
  return out;
}

Result<Tenant> SqliteStore::replace_tenant(const Tenant& tenant, int64_t expected_version) {
  Tenant out;
  Status s = on_writer([&](sql::Database& db) -> Status {
    Result<sql::Transaction> tx = sql::Transaction::begin_immediate(db);
    if (!tx) return tx.take_error();
    Result<Tenant> cur = select_tenant(db, tenant.name);
    if (!cur) return cur.take_error();
    if (cur->version != expected_version)
      return Error(Code::kPreconditionFailed, "tenant " + tenant.name + " is at version " +
                                                  std::to_string(cur->version) + ", not " +
                                                  std::to_string(expected_version));
    out = tenant;
    out.created_at = cur->created_at;
    out.updated_at = now_ms();
    out.version = cur->version + 1;
    Result<sql::StatementRef> st =
        db.prepare("UPDATE tenants SET display_name = ?2, updated_at = ?3, version = ?4 WHERE name = ?1");
    if (!st) return st.take_error();
    (*st)->bind(1, out.name).bind(2, out.display_name).bind(3, out.updated_at).bind(4, out.version);
    if (Status run = (*st)->run(); !run) return run;
    if (Status q = write_quotas(db, out); !q) return q;
    return tx->commit();
  });
  if (!s) return s.take_error();
  return out;
}

Status SqliteStore::delete_tenant(std::string_view name) {
  return on_writer([&](sql::Database& db) -> Status {
    Result<sql::Transaction> tx = sql::Transaction::begin_immediate(db);
    if (!tx) return tx.take_error();
    Result<int64_t> n = query_int(db, "SELECT count(*) FROM nodes WHERE tenant = ?1", name);
    if (!n) return n.take_error();
    if (*n > 0)
      return Error(Code::kConflict, "tenant " + std::string(name) + " still holds " + std::to_string(*n) +
                                        (*n == 1 ? " node" : " nodes") + "; release them first");
    Result<int64_t> live = query_int(
        db, "SELECT count(*) FROM allocations WHERE tenant = ?1 AND state NOT IN ('released', 'failed')", name);
    if (!live) return live.take_error();
    if (*live > 0)
      return Error(Code::kConflict, "tenant " + std::string(name) + " has " + std::to_string(*live) +
                                        (*live == 1 ? " live allocation" : " live allocations") +
                                        "; release them first");
    if (Status s = run_with(db, "DELETE FROM tokens WHERE role = 'tenant' AND tenant = ?1", name); !s) return s;
    if (Status s = run_with(db, "DELETE FROM tenants WHERE name = ?1", name); !s) return s;
    if (db.changes() == 0) return tenant_not_found(name);
    return tx->commit();
  });
}

Result<TenantUsage> SqliteStore::tenant_usage(std::string_view name) {
  TenantUsage out;
  Status s = on_reader([&](sql::Database& db) -> Status {
    Result<sql::StatementRef> st =
        db.prepare("SELECT profile, kind, count(*) FROM nodes WHERE tenant = ?1 GROUP BY profile, kind");
    if (!st) return st.take_error();
    (*st)->bind(1, name);
    for (;;) {
      Result<bool> row = (*st)->step();
      if (!row) return row.take_error();
      if (!*row) return ok_status();
      out[{(*st)->column_text(0), (*st)->column_text(1)}] = (*st)->column_int64(2);
    }
  });
  if (!s) return s.take_error();
  return out;
}

Result<std::map<std::string, TenantUsage>> SqliteStore::usage_by_tenant() {
  std::map<std::string, TenantUsage> out;
  Status s = on_reader([&](sql::Database& db) -> Status {
    Result<sql::StatementRef> st = db.prepare(
        "SELECT tenant, profile, kind, count(*) FROM nodes WHERE tenant != '' GROUP BY tenant, profile, kind");
    if (!st) return st.take_error();
    for (;;) {
      Result<bool> row = (*st)->step();
      if (!row) return row.take_error();
      if (!*row) return ok_status();
      out[(*st)->column_text(0)][{(*st)->column_text(1), (*st)->column_text(2)}] = (*st)->column_int64(3);
    }
  });
  if (!s) return s.take_error();
  return out;
}

}  // namespace kiln
