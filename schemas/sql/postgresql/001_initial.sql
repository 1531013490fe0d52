-- 001_initial (PostgreSQL): nodes and their ports, the event log, the audit
-- log, API tokens. The same tables, columns and meanings as
-- ../sqlite/001_initial.sql (read its comments); only the types differ:
-- times and counts are BIGINT milliseconds, flags are BOOLEAN, JSON stays TEXT
-- (the store parses it; nothing queries inside it).
--
-- Text that pages are sorted or keyed by uses COLLATE "C": byte order, as
-- SQLite's BINARY collation, whatever locale the database was created with,
-- so both stores page in the same order.
--
-- Event sequence numbers are not an identity column: a sequence hands out
-- numbers that commit out of order (and leaves gaps on rollback), so a reader
-- paging by `seq > since` could skip an event committed late. The store takes
-- the next numbers from event_counter's one row inside the writing
-- transaction instead: the row lock orders the writers, numbers are gap-free
-- and become visible in order.

CREATE TABLE nodes (
  id                     TEXT COLLATE "C" PRIMARY KEY NOT NULL,
  name                   TEXT COLLATE "C" UNIQUE,      -- NULL when the node has no name
  kind                   TEXT NOT NULL,
  bmc_driver             TEXT NOT NULL DEFAULT '',
  bmc_address            TEXT NOT NULL DEFAULT '',
  bmc_username           TEXT NOT NULL DEFAULT '',
  bmc_password_sealed    TEXT NOT NULL DEFAULT '',
  bmc_system_id          TEXT NOT NULL DEFAULT '',
  bmc_domain             TEXT NOT NULL DEFAULT '',
  bmc_verify_tls         BOOLEAN NOT NULL DEFAULT TRUE,
  bmc_options            TEXT NOT NULL DEFAULT '{}',
  boot_mode              TEXT NOT NULL DEFAULT 'uefi',
  profile                TEXT COLLATE "C" NOT NULL DEFAULT '',
  traits                 TEXT NOT NULL DEFAULT '[]',
  provision_state        TEXT COLLATE "C" NOT NULL,
  target_provision_state TEXT,
  provision_step         TEXT NOT NULL DEFAULT '',
  deadline_at            BIGINT NOT NULL DEFAULT 0,
  power_state            TEXT NOT NULL,
  target_power_state     TEXT,
  maintenance            BOOLEAN NOT NULL DEFAULT FALSE,
  maintenance_reason     TEXT NOT NULL DEFAULT '',
  fault                  TEXT NOT NULL DEFAULT '',
  last_error             TEXT NOT NULL DEFAULT '',
  tenant                 TEXT COLLATE "C" NOT NULL DEFAULT '',
  allocation             TEXT COLLATE "C" NOT NULL DEFAULT '',
  host                   TEXT NOT NULL DEFAULT '',
  inventory              TEXT,
  last_validation        TEXT NOT NULL DEFAULT '',
  image                  TEXT NOT NULL DEFAULT '',
  reservation            TEXT COLLATE "C" NOT NULL DEFAULT '',
  created_at             BIGINT NOT NULL,
  updated_at             BIGINT NOT NULL,
  version                BIGINT NOT NULL
);

CREATE INDEX nodes_by_created ON nodes (created_at, id);
CREATE INDEX nodes_by_updated ON nodes (updated_at, id);
CREATE INDEX nodes_by_name ON nodes ((coalesce(name, '')), id);
CREATE INDEX nodes_by_state ON nodes (provision_state, id);
CREATE INDEX nodes_by_state_created ON nodes (provision_state, created_at, id);
CREATE INDEX nodes_by_tenant_created ON nodes (tenant, created_at, id);
CREATE INDEX nodes_by_profile_created ON nodes (profile, created_at, id);
CREATE INDEX nodes_in_maintenance ON nodes (created_at, id) WHERE maintenance;
CREATE INDEX nodes_deadline ON nodes (deadline_at, id) WHERE deadline_at > 0;
CREATE INDEX nodes_reserved ON nodes (reservation) WHERE reservation > '';

CREATE TABLE ports (
  id         TEXT COLLATE "C" PRIMARY KEY NOT NULL,
  node_id    TEXT COLLATE "C" NOT NULL REFERENCES nodes (id) ON DELETE CASCADE,
  address    TEXT NOT NULL,
  pxe        BOOLEAN NOT NULL DEFAULT TRUE,
  created_at BIGINT NOT NULL,
  -- Insertion order (SQLite's rowid): a node's ports read back in the order
  -- they were created when their created_at ties.
  ord        BIGINT GENERATED ALWAYS AS IDENTITY
);
CREATE UNIQUE INDEX ports_by_address ON ports (address);
CREATE INDEX ports_by_node ON ports (node_id, created_at);

CREATE TABLE events (
  seq        BIGINT PRIMARY KEY,                       -- from event_counter, never reused
  ts         BIGINT NOT NULL,
  type       TEXT NOT NULL,
  node_id    TEXT NOT NULL DEFAULT '',
  from_state TEXT NOT NULL DEFAULT '',
  to_state   TEXT NOT NULL DEFAULT '',
  request_id TEXT NOT NULL DEFAULT '',
  tenant     TEXT NOT NULL DEFAULT '',
  detail     TEXT NOT NULL DEFAULT '{}'
);
CREATE INDEX events_by_node ON events (node_id, seq);
CREATE INDEX events_by_tenant ON events (tenant, seq);

-- One row: the last event seq handed out.
CREATE TABLE event_counter (
  one      BOOLEAN PRIMARY KEY DEFAULT TRUE CHECK (one),
  last_seq BIGINT NOT NULL
);
INSERT INTO event_counter (one, last_seq) VALUES (TRUE, 0);

CREATE TABLE audit (
  id         BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  ts         BIGINT NOT NULL,
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
  id          TEXT COLLATE "C" PRIMARY KEY NOT NULL,
  name        TEXT NOT NULL,
  role        TEXT NOT NULL,
  tenant      TEXT NOT NULL DEFAULT '',
  secret_hash TEXT NOT NULL UNIQUE,
  created_at  BIGINT NOT NULL,
  expires_at  BIGINT NOT NULL DEFAULT 0
);
CREATE INDEX tokens_by_role ON tokens (role);
