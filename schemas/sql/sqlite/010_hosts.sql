-- 010_hosts: hypervisor hosts, the capacity booked on them, and the virtual
-- machines kilnd placed there (issue 7; controller/model/host.h).
--
-- A host's discovered capacity is one JSON document (`capacity`): nothing
-- queries inside it. What is booked is rows in host_reservations, one per
-- booked thing; the UNIQUE index makes it impossible to book one CPU or one
-- GPU twice, whatever the caller does (amount rows use the node id as item).
CREATE TABLE hosts (
  id              TEXT PRIMARY KEY NOT NULL,
  name            TEXT NOT NULL UNIQUE,
  uri             TEXT NOT NULL,
  username        TEXT NOT NULL DEFAULT '',
  password_sealed TEXT NOT NULL DEFAULT '',
  options         TEXT NOT NULL DEFAULT '{}',   -- JSON HostOptions
  status          TEXT NOT NULL DEFAULT 'connecting',
  status_reason   TEXT NOT NULL DEFAULT '',
  capacity        TEXT NOT NULL DEFAULT '{}',   -- JSON HostCapacity
  discovered_at   INTEGER NOT NULL DEFAULT 0,
  created_at      INTEGER NOT NULL,
  updated_at      INTEGER NOT NULL
);

-- One row per virtual node placed on a host, from placement until its
-- teardown has removed everything (so a half-done teardown is retried).
CREATE TABLE virtual_machines (
  node_id    TEXT PRIMARY KEY NOT NULL REFERENCES nodes (id) ON DELETE CASCADE,
  host_id    TEXT NOT NULL REFERENCES hosts (id),
  domain     TEXT NOT NULL DEFAULT '',
  mac        TEXT NOT NULL DEFAULT '',
  volume     TEXT NOT NULL DEFAULT '',
  nvram      TEXT NOT NULL DEFAULT '',
  state      TEXT NOT NULL DEFAULT 'placed',    -- placed | defined | removing
  placement  TEXT NOT NULL DEFAULT '{}',        -- JSON Placement
  created_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL
);
CREATE INDEX virtual_machines_host ON virtual_machines (host_id);

CREATE TABLE host_reservations (
  host_id    TEXT NOT NULL REFERENCES hosts (id),
  node_id    TEXT NOT NULL REFERENCES virtual_machines (node_id) ON DELETE CASCADE,
  kind       TEXT NOT NULL,     -- cpu | gpu | vcpus | memory | memory@N | hugepages | hugepages@N | disk
  item       TEXT NOT NULL,     -- CPU id, GPU PCI address, or the node id for amounts
  amount     INTEGER NOT NULL DEFAULT 1,
  created_at INTEGER NOT NULL
);
CREATE UNIQUE INDEX host_reservations_item ON host_reservations (host_id, kind, item);
CREATE INDEX host_reservations_node ON host_reservations (node_id);
