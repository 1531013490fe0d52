-- 010_hosts (PostgreSQL): the same tables and columns as ../sqlite/010_hosts.sql
-- (read its comments), in PostgreSQL types (see 001_initial.sql).
CREATE TABLE hosts (
  id              TEXT COLLATE "C" PRIMARY KEY NOT NULL,
  name            TEXT NOT NULL UNIQUE,
  uri             TEXT NOT NULL,
  username        TEXT NOT NULL DEFAULT '',
  password_sealed TEXT NOT NULL DEFAULT '',
  options         TEXT NOT NULL DEFAULT '{}',   -- JSON HostOptions
  status          TEXT NOT NULL DEFAULT 'connecting',
  status_reason   TEXT NOT NULL DEFAULT '',
  capacity        TEXT NOT NULL DEFAULT '{}',   -- JSON HostCapacity
  discovered_at   BIGINT NOT NULL DEFAULT 0,
  created_at      BIGINT NOT NULL,
  updated_at      BIGINT NOT NULL
);

-- One row per virtual node placed on a host, from placement until its
-- teardown has removed everything (so a half-done teardown is retried).
CREATE TABLE virtual_machines (
  node_id    TEXT COLLATE "C" PRIMARY KEY NOT NULL REFERENCES nodes (id) ON DELETE CASCADE,
  host_id    TEXT NOT NULL REFERENCES hosts (id),
  domain     TEXT NOT NULL DEFAULT '',
  mac        TEXT NOT NULL DEFAULT '',
  volume     TEXT NOT NULL DEFAULT '',
  nvram      TEXT NOT NULL DEFAULT '',
  state      TEXT NOT NULL DEFAULT 'placed',    -- placed | defined | removing
  placement  TEXT NOT NULL DEFAULT '{}',        -- JSON Placement
  created_at BIGINT NOT NULL,
  updated_at BIGINT NOT NULL
);
CREATE INDEX virtual_machines_host ON virtual_machines (host_id);

CREATE TABLE host_reservations (
  host_id    TEXT NOT NULL REFERENCES hosts (id),
  node_id    TEXT NOT NULL REFERENCES virtual_machines (node_id) ON DELETE CASCADE,
  kind       TEXT NOT NULL,     -- cpu | gpu | vcpus | memory | memory@N | hugepages | hugepages@N | disk
  item       TEXT NOT NULL,     -- CPU id, GPU PCI address, or the node id for amounts
  amount     BIGINT NOT NULL DEFAULT 1,
  created_at BIGINT NOT NULL
);
CREATE UNIQUE INDEX host_reservations_item ON host_reservations (host_id, kind, item);
CREATE INDEX host_reservations_node ON host_reservations (node_id);
