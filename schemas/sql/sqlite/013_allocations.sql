-- 013_allocations: allocations (a tenant's request for N proven nodes), their
-- members, and the usage ledger (controller/model/allocation.h,
-- controller/store/allocation_store.h).
--
-- A node belongs to an allocation through its own `allocation` and `tenant`
-- columns (the claim, written in the allocation's transaction);
-- allocation_members keeps who served the allocation and why they left.

CREATE TABLE allocations (
  id            TEXT PRIMARY KEY NOT NULL,
  name          TEXT NOT NULL,
  tenant        TEXT NOT NULL,
  profile       TEXT NOT NULL,
  kind          TEXT NOT NULL,
  count         INTEGER NOT NULL,
  image         TEXT NOT NULL,
  ssh_keys      TEXT NOT NULL,             -- JSON array of OpenSSH public keys
  user_data     TEXT NOT NULL DEFAULT '',
  traits        TEXT NOT NULL,             -- JSON array
  state         TEXT NOT NULL,
  last_error    TEXT NOT NULL DEFAULT '',
  lease_seconds INTEGER NOT NULL DEFAULT 0,
  expires_at    INTEGER NOT NULL DEFAULT 0, -- ms epoch; 0 = no lease
  replacements  INTEGER NOT NULL DEFAULT 0,
  ready_at      INTEGER NOT NULL DEFAULT 0,
  history       TEXT NOT NULL,             -- JSON array of {at, from, to, reason}
  created_at    INTEGER NOT NULL,
  updated_at    INTEGER NOT NULL,
  version       INTEGER NOT NULL
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
  joined_at  INTEGER NOT NULL,
  left_at    INTEGER NOT NULL DEFAULT 0,
  PRIMARY KEY (allocation, node_id)
);
CREATE INDEX allocation_members_node ON allocation_members (node_id);

-- Append-only: a row is inserted when a member is handed over; only
-- ended_at is written later, once.
CREATE TABLE usage_records (
  id                      INTEGER PRIMARY KEY AUTOINCREMENT,
  allocation              TEXT NOT NULL,
  node_id                 TEXT NOT NULL,
  tenant                  TEXT NOT NULL,
  profile                 TEXT NOT NULL,
  kind                    TEXT NOT NULL,
  started_at              INTEGER NOT NULL,
  ended_at                INTEGER,
  price_micros_per_second INTEGER NOT NULL
);
CREATE INDEX usage_tenant ON usage_records (tenant, started_at);
CREATE INDEX usage_allocation ON usage_records (allocation);
CREATE UNIQUE INDEX usage_open ON usage_records (allocation, node_id) WHERE ended_at IS NULL;

-- The claim predicate reads these.
CREATE INDEX IF NOT EXISTS nodes_allocation ON nodes (allocation);
