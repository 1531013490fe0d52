-- 013_allocations (PostgreSQL): the same tables and columns as ../sqlite/013_allocations.sql
-- (read its comments), in PostgreSQL types (see 001_initial.sql).

CREATE TABLE allocations (
  id            TEXT COLLATE "C" PRIMARY KEY NOT NULL,
  name          TEXT NOT NULL,
  tenant        TEXT NOT NULL,
  profile       TEXT NOT NULL,
  kind          TEXT NOT NULL,
  count         BIGINT NOT NULL,
  image         TEXT NOT NULL,
  ssh_keys      TEXT NOT NULL,             -- JSON array of OpenSSH public keys
  user_data     TEXT NOT NULL DEFAULT '',
  traits        TEXT NOT NULL,             -- JSON array
  state         TEXT NOT NULL,
  last_error    TEXT NOT NULL DEFAULT '',
  lease_seconds BIGINT NOT NULL DEFAULT 0,
  expires_at    BIGINT NOT NULL DEFAULT 0, -- ms epoch; 0 = no lease
  replacements  BIGINT NOT NULL DEFAULT 0,
  ready_at      BIGINT NOT NULL DEFAULT 0,
  history       TEXT NOT NULL,             -- JSON array of {at, from, to, reason}
  created_at    BIGINT NOT NULL,
  updated_at    BIGINT NOT NULL,
  version       BIGINT NOT NULL
);
-- A name is the tenant's handle on a live allocation (`kiln cluster up` finds
-- its groups by name); once released the name may be used again.
CREATE UNIQUE INDEX allocations_live_name ON allocations (tenant, name) WHERE state != 'released';
CREATE INDEX allocations_state ON allocations (state);
CREATE INDEX allocations_expiry ON allocations (expires_at) WHERE expires_at > 0;

CREATE TABLE allocation_members (
  allocation TEXT NOT NULL REFERENCES allocations (id) ON DELETE CASCADE,
  node_id    TEXT NOT NULL,
  status     TEXT NOT NULL,                 -- member | leaving | left
  reason     TEXT NOT NULL DEFAULT '',
  joined_at  BIGINT NOT NULL,
  left_at    BIGINT NOT NULL DEFAULT 0,
  PRIMARY KEY (allocation, node_id)
);
CREATE INDEX allocation_members_node ON allocation_members (node_id);

-- Append-only: a row is inserted when a member is handed over; only
-- ended_at is written later, once.
CREATE TABLE usage_records (
  id                      BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  allocation              TEXT NOT NULL,
  node_id                 TEXT NOT NULL,
  tenant                  TEXT NOT NULL,
  profile                 TEXT NOT NULL,
  kind                    TEXT NOT NULL,
  started_at              BIGINT NOT NULL,
  ended_at                BIGINT,
  price_micros_per_second BIGINT NOT NULL
);
CREATE INDEX usage_tenant ON usage_records (tenant, started_at);
CREATE INDEX usage_allocation ON usage_records (allocation);
CREATE UNIQUE INDEX usage_open ON usage_records (allocation, node_id) WHERE ended_at IS NULL;

-- The claim predicate reads these.
CREATE INDEX IF NOT EXISTS nodes_allocation ON nodes (allocation);
