#include <algorithm>
#include <map>
#include <tuple>
#include <utility>

#include "controller/store/sql/node_rows.h"
#include "controller/store/sql/sql_store.h"
#include "controller/store/store_rules.h"

namespace kiln {

// SqlStore: tenants and their quotas (TenantStore).
//
// Concurrency: replace_tenant is one conditional UPDATE on the version the
// caller read (If-Match), so two writers replacing the same tenant (two
// instances on PostgreSQL) cannot both win. delete_tenant locks the tenant
// row (dialect().for_update) before counting its nodes and allocations, so a
// writer that assigns nodes to the tenant under a share lock on the same row
// waits or sees it gone.
//
// Order: tenants by name and each tenant's quotas by (profile, kind), in byte
// order on both engines: tenants.name is COLLATE "C" on PostgreSQL (as
// SQLite's BINARY), the quota columns are not, so quotas are sorted here
// rather than by the database's collation.

namespace {

constexpr const char kTenantSelect[] = "SELECT name, display_name, created_at, updated_at, version FROM tenants";
constexpr db::Constraint kTenantName{"tenants.name", "tenants_pkey"};
constexpr db::Constraint kQuotaKey{"tenant_quotas.profile", "tenant_quotas_pkey"};

Tenant read_tenant(const db::Rows& r) {
  Tenant t;
  t.name = r.text(0);
  t.display_name = r.text(1);
  t.created_at = r.int64(2);
  t.updated_at = r.int64(3);
  t.version = r.int64(4);
  return t;
}

Error tenant_not_found(std::string_view name) { return Error(Code::kNotFound, "no such tenant: " + std::string(name)); }

// The tenant named `name` (every tenant, by name, when nullopt), each with
// its quotas: two statements, so the caller runs them in one snapshot.
Result<std::vector<Tenant>> select_tenants(db::Conn& c, std::optional<std::string_view> name) {
  db::Binds b;
  if (name) b.add(*name);
  Result<db::Rows> r = c.query(std::string(kTenantSelect) + (name ? " WHERE name = $1" : " ORDER BY name"), b);
  if (!r) return r.take_error();
  Result<std::vector<Tenant>> tenants = db::collect<Tenant>(*r, read_tenant);
  if (!tenants || tenants->empty()) return tenants;
  std::map<std::string, Tenant*, std::less<>> by_name;
  for (Tenant& t : *tenants) by_name.emplace(t.name, &t);
  Result<db::Rows> q = c.query(
      std::string("SELECT tenant, profile, kind, max_nodes FROM tenant_quotas") + (name ? " WHERE tenant = $1" : ""), b);
  if (!q) return q.take_error();
  Status walked = db::each_row(*q, [&](const db::Rows& row) -> Status {
    auto it = by_name.find(row.text(0));
    if (it == by_name.end()) return ok_status();
    TenantQuota quota{row.text(1), NodeKind::kBaremetal, row.int64(3)};
    if (Status s = store_rules::read_stored_enum(row.text(2), parse_node_kind, "tenant", it->first, "quota kind",
                                                 quota.kind);
        !s)
      return s;
    it->second->quotas.push_back(std::move(quota));
    return ok_status();
  });
  if (!walked) return walked.take_error();
  for (Tenant& t : *tenants)
    std::sort(t.quotas.begin(), t.quotas.end(), [](const TenantQuota& a, const TenantQuota& b) {
      return std::tie(a.profile, a.kind) < std::tie(b.profile, b.kind);  // std::string compares bytes unsigned
    });
  return tenants;
}

// Replaces the quota rows of `t.name` with `t.quotas`, inside the caller's
// transaction.
Status write_quotas(db::Conn& c, const Tenant& t) {
  if (Result<int64_t> d = c.exec("DELETE FROM tenant_quotas WHERE tenant = $1", db::Binds().add(t.name)); !d)
    return d.take_error();
  for (std::size_t i = 0; i < t.quotas.size(); ++i) {
    const TenantQuota& q = t.quotas[i];
    Result<int64_t> ins = c.exec("INSERT INTO tenant_quotas (tenant, profile, kind, max_nodes) VALUES ($1, $2, $3, $4)",
                                 db::Binds().add(t.name).add(q.profile).add(to_string(q.kind)).add(q.max_nodes));
    if (ins) continue;
    Error e = ins.take_error();
    if (c.dialect().violated(e, kQuotaKey))
      return Error(Code::kConflict, "two quotas for " + q.profile + " " + std::string(to_string(q.kind)),
                   {FieldError{"/quotas/" + std::to_string(i), "duplicate profile and kind"}});
    return e;
  }
  return ok_status();
}

// "still holds 2 nodes" / "has 1 live allocation".
std::string counted(int64_t n, std::string_view one, std::string_view many) {
  return std::to_string(n) + " " + std::string(n == 1 ? one : many);
}

}  // namespace

Result<Tenant> SqlStore::create_tenant(const Tenant& tenant) {
  Tenant out = tenant;
  out.created_at = out.updated_at = now_ms();
  out.version = 1;
  Status s = write([&](Tx& tx) -> Status {
    Result<int64_t> ins = tx.conn.exec(
        "INSERT INTO tenants (name, display_name, created_at, updated_at, version) VALUES ($1, $2, $3, $4, $5)",
        db::Binds().add(out.name).add(out.display_name).add(out.created_at).add(out.updated_at).add(out.version));
    if (!ins) {
      Error e = ins.take_error();
      if (tx.conn.dialect().violated(e, kTenantName))
        return Error(Code::kConflict, "tenant " + out.name + " already exists", {FieldError{"/name", "already in use"}});
      return e;
    }
    return write_quotas(tx.conn, out);
  });
  if (!s) return s.take_error();
  return out;
}

Result<Tenant> SqlStore::get_tenant(std::string_view name) {
  return snapshot_value<Tenant>([&](db::Conn& c) -> Result<Tenant> {
    Result<std::vector<Tenant>> one = select_tenants(c, name);
    if (!one) return one.take_error();
    if (one->empty()) return tenant_not_found(name);
    return std::move(one->front());
  });
}

Result<std::vector<Tenant>> SqlStore::list_tenants() {
  return snapshot_value<std::vector<Tenant>>([&](db::Conn& c) { return select_tenants(c, std::nullopt); });
}

Result<Tenant> SqlStore::replace_tenant(const Tenant& tenant, int64_t expected_version) {
  Tenant out = tenant;
  out.version = expected_version + 1;
  const int64_t now = now_ms();
  Status s = write([&](Tx& tx) -> Status {
    bool replaced = false;
    {
      // updated_at never goes back, though this writer's clock may be behind
      // the last one's (another instance, or a clock stepped back).
      Result<db::Rows> up = tx.conn.query(
          "UPDATE tenants SET display_name = $2,"
          " updated_at = CASE WHEN updated_at > $3 THEN updated_at ELSE $3 END, version = version + 1"
          " WHERE name = $1 AND version = $4 RETURNING created_at, updated_at",
          db::Binds().add(out.name).add(out.display_name).add(now).add(expected_version));
      if (!up) return up.take_error();
      Result<bool> row = up->next();
      if (!row) return row.take_error();
      if (*row) {
        replaced = true;
        out.created_at = up->int64(0);
        out.updated_at = up->int64(1);
      }
    }
    if (!replaced) {
      // Which failure: no tenant, or another version (read after the fact;
      // the UPDATE above is what decided).
      Result<int64_t> version =
          db::query_one<int64_t>(tx.conn, "SELECT version FROM tenants WHERE name = $1", db::Binds().add(out.name),
                                 [](const db::Rows& r) { return r.int64(0); }, "no such tenant: " + out.name);
      if (!version) return version.take_error();
      return Error(Code::kPreconditionFailed, "tenant " + out.name + " is at version " + std::to_string(*version) +
                                                  ", not " + std::to_string(expected_version));
    }
    return write_quotas(tx.conn, out);
  });
  if (!s) return s.take_error();
  return out;
}

Status SqlStore::delete_tenant(std::string_view name) {
  return write([&](Tx& tx) -> Status {
    db::Conn& c = tx.conn;
    const db::Binds by_name = db::Binds().add(name);
    // Lock the row when there is one; a missing tenant is reported after the
    // checks (nodes may name a tenant that has no row).
    if (Result<db::Rows> lock =
            c.query("SELECT name FROM tenants WHERE name = $1" + std::string(c.dialect().for_update), by_name);
        !lock)
      return lock.take_error();
    Result<int64_t> held = db::query_int(c, "SELECT count(*) FROM nodes WHERE tenant = $1", by_name);
    if (!held) return held.take_error();
    if (*held > 0)
      return Error(Code::kConflict, "tenant " + std::string(name) + " still holds " + counted(*held, "node", "nodes") +
                                        "; release them first");
    Result<int64_t> live = db::query_int(
        c, "SELECT count(*) FROM allocations WHERE tenant = $1 AND state NOT IN ('released', 'failed')", by_name);
    if (!live) return live.take_error();
    if (*live > 0)
      return Error(Code::kConflict, "tenant " + std::string(name) + " has " +
                                        counted(*live, "live allocation", "live allocations") + "; release them first");
    if (Result<int64_t> d = c.exec("DELETE FROM tokens WHERE role = 'tenant' AND tenant = $1", by_name); !d)
      return d.take_error();
    Result<int64_t> gone = c.exec("DELETE FROM tenants WHERE name = $1", by_name);
    if (!gone) return gone.take_error();
    if (*gone == 0) return tenant_not_found(name);
    return ok_status();
  });
}

// Usage is read from the nodes themselves (their tenant, profile and kind),
// not from the usage rows that bill allocations.
Result<TenantUsage> SqlStore::tenant_usage(std::string_view name) {
  return read_value<TenantUsage>([&](db::Conn& c) -> Result<TenantUsage> {
    Result<db::Rows> r = c.query("SELECT profile, kind, count(*) FROM nodes WHERE tenant = $1 GROUP BY profile, kind",
                                 db::Binds().add(name));
    if (!r) return r.take_error();
    TenantUsage out;
    Status walked = db::each_row(*r, [&](const db::Rows& row) { return node_rows::add_profile_kind_count(row, 0, out); });
    if (!walked) return walked.take_error();
    return out;
  });
}

Result<std::map<std::string, TenantUsage>> SqlStore::usage_by_tenant() {
  using ByTenant = std::map<std::string, TenantUsage>;
  return read_value<ByTenant>([&](db::Conn& c) -> Result<ByTenant> {
    Result<db::Rows> r =
        c.query("SELECT tenant, profile, kind, count(*) FROM nodes WHERE tenant != '' GROUP BY tenant, profile, kind");
    if (!r) return r.take_error();
    ByTenant out;
    Status walked = db::each_row(*r, [&](const db::Rows& row) { return node_rows::add_profile_kind_count(row, 1, out[row.text(0)]); });
    if (!walked) return walked.take_error();
    return out;
  });
}

}  // namespace kiln
