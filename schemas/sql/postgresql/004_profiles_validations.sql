-- 004_profiles_validations (PostgreSQL): the same tables and columns as ../sqlite/004_profiles_validations.sql
-- (read its comments), in PostgreSQL types (see 001_initial.sql).
CREATE TABLE profiles (
  name       TEXT COLLATE "C" PRIMARY KEY NOT NULL,
  doc        TEXT NOT NULL,                   -- JSON object
  created_at BIGINT NOT NULL,
  updated_at BIGINT NOT NULL,
  version    BIGINT NOT NULL
);

-- Shipped default profiles already created once (schemas/profiles/*.json):
-- a default is created when missing and never again after an operator
-- deleted it; an operator's edits are never overwritten.
CREATE TABLE profile_defaults_seeded (
  name      TEXT COLLATE "C" PRIMARY KEY NOT NULL,
  seeded_at BIGINT NOT NULL
);

-- Validation reports outlive nothing: they go with their node. `profile` and
-- `node_kind` are the node's at the time of the run, so availability's
-- medians do not change when a node is re-profiled later.
CREATE TABLE validations (
  id          TEXT COLLATE "C" PRIMARY KEY NOT NULL,
  node_id     TEXT NOT NULL REFERENCES nodes (id) ON DELETE CASCADE,
  profile     TEXT NOT NULL DEFAULT '',
  node_kind   TEXT NOT NULL,                  -- baremetal | virtual
  plan        TEXT NOT NULL,                  -- quick | full
  phase       TEXT NOT NULL,                  -- burn_in | pre_handoff | on_demand
  result      TEXT NOT NULL,                  -- pass | fail | error
  attempt     BIGINT NOT NULL DEFAULT 1,
  started_at  BIGINT NOT NULL,
  finished_at BIGINT NOT NULL,
  report      TEXT NOT NULL,                  -- JSON object
  seq         BIGINT NOT NULL                -- insertion order: "newest first" without clock ties
);
CREATE INDEX validations_by_node ON validations (node_id, seq);
CREATE INDEX validations_by_profile ON validations (profile, node_kind, result, seq);
