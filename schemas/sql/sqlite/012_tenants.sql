-- 012_tenants: tenants and their quotas (controller/model/tenant.h), and
-- images tenants may deploy (images.public).
--
-- A tenant is named by its key; nodes, tokens and events refer to it by that
-- name (their `tenant` columns predate this table, so there is no foreign
-- key from them). A quota row caps how many nodes of one profile and kind the
-- tenant may hold; no row means zero.

CREATE TABLE tenants (
  name         TEXT PRIMARY KEY NOT NULL,
  display_name TEXT NOT NULL DEFAULT '',
  created_at   INTEGER NOT NULL,
  updated_at   INTEGER NOT NULL,
  version      INTEGER NOT NULL
);

CREATE TABLE tenant_quotas (
  tenant    TEXT NOT NULL REFERENCES tenants (name) ON DELETE CASCADE,
  profile   TEXT NOT NULL,
  kind      TEXT NOT NULL,                 -- baremetal | virtual
  max_nodes INTEGER NOT NULL,
  PRIMARY KEY (tenant, profile, kind)
);

-- Tenant names already in use (tokens issued and nodes assigned before
-- tenants were a resource) become tenants without quotas, so an upgraded
-- database keeps every token working and every node owned.
INSERT OR IGNORE INTO tenants (name, display_name, created_at, updated_at, version)
  SELECT DISTINCT tenant, '', CAST(strftime('%s', 'now') AS INTEGER) * 1000,
         CAST(strftime('%s', 'now') AS INTEGER) * 1000, 1
  FROM (SELECT tenant FROM tokens UNION SELECT tenant FROM nodes) WHERE tenant != '';

-- Public images are listed to tenants and may be named in an allocation;
-- private ones (the default, and every image registered before) are staff's.
ALTER TABLE images ADD COLUMN public INTEGER NOT NULL DEFAULT 0;
