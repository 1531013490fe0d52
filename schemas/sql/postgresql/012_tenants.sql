-- 012_tenants (PostgreSQL): the same tables and columns as ../sqlite/012_tenants.sql
-- (read its comments), in PostgreSQL types (see 001_initial.sql).

CREATE TABLE tenants (
  name         TEXT COLLATE "C" PRIMARY KEY NOT NULL,
  display_name TEXT NOT NULL DEFAULT '',
  created_at   BIGINT NOT NULL,
  updated_at   BIGINT NOT NULL,
  version      BIGINT NOT NULL
);

CREATE TABLE tenant_quotas (
  tenant    TEXT NOT NULL REFERENCES tenants (name) ON DELETE CASCADE,
  profile   TEXT NOT NULL,
  kind      TEXT NOT NULL,                 -- baremetal | virtual
  max_nodes BIGINT NOT NULL,
  PRIMARY KEY (tenant, profile, kind)
);

-- Tenant names already in use (tokens issued and nodes assigned before
-- tenants were a resource) become tenants without quotas, so an upgraded
-- database keeps every token working and every node owned.
INSERT INTO tenants (name, display_name, created_at, updated_at, version)
  SELECT DISTINCT tenant, '', (extract(epoch FROM now()) * 1000)::BIGINT,
         (extract(epoch FROM now()) * 1000)::BIGINT, 1
  FROM (SELECT tenant FROM tokens UNION SELECT tenant FROM nodes) AS used WHERE tenant != ''
  ON CONFLICT (name) DO NOTHING;

-- Public images are listed to tenants and may be named in an allocation;
-- private ones (the default, and every image registered before) are staff's.
ALTER TABLE images ADD COLUMN public BOOLEAN NOT NULL DEFAULT FALSE;
