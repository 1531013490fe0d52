-- 001_initial: nodes and their ports, the event log, the audit log, API tokens.
--
-- Conventions: times are INTEGER milliseconds since the Unix epoch; JSON values
-- are TEXT; strings that may be "unset" are '' (NOT NULL DEFAULT '') except
-- where NULL carries meaning (nodes.name: unique only when set; the target
-- states: no target; inventory: not inspected yet).

CREATE TABLE nodes (
  id                     TEXT PRIMARY KEY NOT NULL,
  name                   TEXT UNIQUE,                  -- NULL when the node has no name
  kind                   TEXT NOT NULL,
  bmc_driver             TEXT NOT NULL DEFAULT '',
  bmc_address            TEXT NOT NULL DEFAULT '',
  bmc_username           TEXT NOT NULL DEFAULT '',
  bmc_password_sealed    TEXT NOT NULL DEFAULT '',
  bmc_system_id          TEXT NOT NULL DEFAULT '',
  bmc_domain             TEXT NOT NULL DEFAULT '',
  bmc_verify_tls         INTEGER NOT NULL DEFAULT 1,
  bmc_options            TEXT NOT NULL DEFAULT '{}',   -- JSON object
  boot_mode              TEXT NOT NULL DEFAULT 'uefi',
  profile                TEXT NOT NULL DEFAULT '',
  traits                 TEXT NOT NULL DEFAULT '[]',   -- JSON array of strings
  provision_state        TEXT NOT NULL,
  target_provision_state TEXT,
  provision_step         TEXT NOT NULL DEFAULT '',
  deadline_at            INTEGER NOT NULL DEFAULT 0,   -- 0 = no deadline
  power_state            TEXT NOT NULL,
  target_power_state     TEXT,
  maintenance            INTEGER NOT NULL DEFAULT 0,
  maintenance_reason     TEXT NOT NULL DEFAULT '',
  fault                  TEXT NOT NULL DEFAULT '',
  last_error             TEXT NOT NULL DEFAULT '',
  tenant                 TEXT NOT NULL DEFAULT '',
  allocation             TEXT NOT NULL DEFAULT '',
  host                   TEXT NOT NULL DEFAULT '',
  inventory              TEXT,                         -- JSON; NULL until inspected
  last_validation        TEXT NOT NULL DEFAULT '',
  image                  TEXT NOT NULL DEFAULT '',     -- image being (or last) deployed
  reservation            TEXT NOT NULL DEFAULT '',     -- the per-node lock; '' = free
  created_at             INTEGER NOT NULL,
  updated_at             INTEGER NOT NULL,
  version                INTEGER NOT NULL
);

-- List sort keys: keyset pagination walks (sort_key, id) in index order.
CREATE INDEX nodes_by_created ON nodes (created_at, id);
CREATE INDEX nodes_by_updated ON nodes (updated_at, id);
CREATE INDEX nodes_by_name ON nodes (ifnull(name, ''), id);
CREATE INDEX nodes_by_state ON nodes (provision_state, id);
-- List filters, each with the default sort behind it (a filter combined with
-- another sort key filters while walking that key's index instead).
CREATE INDEX nodes_by_state_created ON nodes (provision_state, created_at, id);
CREATE INDEX nodes_by_tenant_created ON nodes (tenant, created_at, id);
CREATE INDEX nodes_by_profile_created ON nodes (profile, created_at, id);
-- Few nodes are in maintenance: a partial index finds them without a scan (the
-- store writes the filter as the literal "maintenance = 1" so it applies).
CREATE INDEX nodes_in_maintenance ON nodes (created_at, id) WHERE maintenance = 1;
-- Timeouts and start-up recovery touch only the few nodes these cover.
-- ("reservation > ''" rather than "!= ''": a range, so the OR in the
-- in-flight query can use this index.)
CREATE INDEX nodes_deadline ON nodes (deadline_at, id) WHERE deadline_at > 0;
CREATE INDEX nodes_reserved ON nodes (reservation) WHERE reservation > '';

CREATE TABLE ports (
  id         TEXT PRIMARY KEY NOT NULL,
  node_id    TEXT NOT NULL REFERENCES nodes (id) ON DELETE CASCADE,
  address    TEXT NOT NULL,                            -- MAC, stored as given
  pxe        INTEGER NOT NULL DEFAULT 1,
  created_at INTEGER NOT NULL
);
CREATE UNIQUE INDEX ports_by_address ON ports (address);
CREATE INDEX ports_by_node ON ports (node_id, created_at);

-- Events outlive their node (no foreign key): the log is history.
CREATE TABLE events (
  seq        INTEGER PRIMARY KEY AUTOINCREMENT,        -- never reused
  ts         INTEGER NOT NULL,
  type       TEXT NOT NULL,
  node_id    TEXT NOT NULL DEFAULT '',
  from_state TEXT NOT NULL DEFAULT '',
  to_state   TEXT NOT NULL DEFAULT '',
  request_id TEXT NOT NULL DEFAULT '',
  tenant     TEXT NOT NULL DEFAULT '',
  detail     TEXT NOT NULL DEFAULT '{}'                -- JSON object
);
CREATE INDEX events_by_node ON events (node_id, seq);
CREATE INDEX events_by_tenant ON events (tenant, seq);

CREATE TABLE audit (
  id         INTEGER PRIMARY KEY AUTOINCREMENT,
  ts         INTEGER NOT NULL,
  actor      TEXT NOT NULL DEFAULT '',
  actor_name TEXT NOT NULL DEFAULT '',
  role       TEXT NOT NULL DEFAULT '',
  method     TEXT NOT NULL DEFAULT '',
  path       TEXT NOT NULL DEFAULT '',
  request_id TEXT NOT NULL DEFAULT '',
  node_id    TEXT NOT NULL DEFAULT '',
  status     INTEGER NOT NULL DEFAULT 0
);

CREATE TABLE tokens (
  id          TEXT PRIMARY KEY NOT NULL,
  name        TEXT NOT NULL,
  role        TEXT NOT NULL,
  tenant      TEXT NOT NULL DEFAULT '',
  secret_hash TEXT NOT NULL UNIQUE,                    -- sha256 hex; the secret is never stored
  created_at  INTEGER NOT NULL,
  expires_at  INTEGER NOT NULL DEFAULT 0               -- 0 = never
);
CREATE INDEX tokens_by_role ON tokens (role);
