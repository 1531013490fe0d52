-- 003_agent (PostgreSQL): the same tables and columns as ../sqlite/003_agent.sql
-- (read its comments), in PostgreSQL types (see 001_initial.sql).

CREATE TABLE agent_boot_tokens (
  node_id    TEXT COLLATE "C" PRIMARY KEY NOT NULL REFERENCES nodes (id) ON DELETE CASCADE,
  token_hash TEXT NOT NULL,
  created_at BIGINT NOT NULL
);

CREATE TABLE agent_sessions (
  token_hash   TEXT COLLATE "C" PRIMARY KEY NOT NULL,
  node_id      TEXT NOT NULL REFERENCES nodes (id) ON DELETE CASCADE,
  phase        TEXT NOT NULL,                    -- ramdisk | os
  issued_state TEXT NOT NULL,                    -- provision state at lookup
  created_at   BIGINT NOT NULL
);
CREATE INDEX agent_sessions_by_node ON agent_sessions (node_id);
