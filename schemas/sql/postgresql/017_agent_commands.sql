-- 017_agent_commands (PostgreSQL): the same table as ../sqlite/017_agent_commands.sql
-- (read its comments), in PostgreSQL types (see 001_initial.sql).

CREATE TABLE agent_commands (
  node_id      TEXT COLLATE "C" PRIMARY KEY NOT NULL REFERENCES nodes (id) ON DELETE CASCADE,
  command_id   TEXT NOT NULL,
  name         TEXT NOT NULL,
  args         TEXT NOT NULL DEFAULT '{}',
  created_at   BIGINT NOT NULL,
  delivered_at BIGINT NOT NULL DEFAULT 0,
  status       TEXT NOT NULL DEFAULT '',
  result       TEXT NOT NULL DEFAULT '{}',
  error        TEXT NOT NULL DEFAULT '',
  finished_at  BIGINT NOT NULL DEFAULT 0
);
