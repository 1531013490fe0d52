-- 004_profiles_validations: hardware profiles and stored validation reports
-- (issue 6; schemas/profile.schema.json, schemas/validation-report.schema.json).
--
-- A profile is one JSON document (`doc`, the API's shape without the server
-- fields): the agent reads its gpu/nvlink/pcie/rdma/nvme/jitter/thresholds
-- sections (agent/validate/checks/profile.h), the gate reads `plans`,
-- availability reads `price`. Only the name is a column: nothing queries
-- inside a profile.
CREATE TABLE profiles (
  name       TEXT PRIMARY KEY NOT NULL,
  doc        TEXT NOT NULL,                   -- JSON object
  created_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL,
  version    INTEGER NOT NULL
);

-- Shipped default profiles already created once (schemas/profiles/*.json):
-- a default is created when missing and never again after an operator
-- deleted it; an operator's edits are never overwritten.
CREATE TABLE profile_defaults_seeded (
  name      TEXT PRIMARY KEY NOT NULL,
  seeded_at INTEGER NOT NULL
);

-- Validation reports outlive nothing: they go with their node. `profile` and
-- `node_kind` are the node's at the time of the run, so availability's
-- medians do not change when a node is re-profiled later.
CREATE TABLE validations (
  id          TEXT PRIMARY KEY NOT NULL,
  node_id     TEXT NOT NULL REFERENCES nodes (id) ON DELETE CASCADE,
  profile     TEXT NOT NULL DEFAULT '',
  node_kind   TEXT NOT NULL,                  -- baremetal | virtual
  plan        TEXT NOT NULL,                  -- quick | full
  phase       TEXT NOT NULL,                  -- burn_in | pre_handoff | on_demand
  result      TEXT NOT NULL,                  -- pass | fail | error
  attempt     INTEGER NOT NULL DEFAULT 1,
  started_at  INTEGER NOT NULL,
  finished_at INTEGER NOT NULL,
  report      TEXT NOT NULL,                  -- JSON object
  seq         INTEGER NOT NULL                -- insertion order: "newest first" without clock ties
);
CREATE INDEX validations_by_node ON validations (node_id, seq);
CREATE INDEX validations_by_profile ON validations (profile, node_kind, result, seq);
