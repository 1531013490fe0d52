-- 011_agent_trust (PostgreSQL): the same tables and columns as ../sqlite/011_agent_trust.sql
-- (read its comments), in PostgreSQL types (see 001_initial.sql).

ALTER TABLE agent_boot_tokens ADD COLUMN token_sealed TEXT NOT NULL DEFAULT '';

CREATE TABLE agent_os_secrets (
  node_id       TEXT COLLATE "C" PRIMARY KEY NOT NULL REFERENCES nodes (id) ON DELETE CASCADE,
  secret_hash   TEXT NOT NULL,
  secret_sealed TEXT NOT NULL,
  created_at    BIGINT NOT NULL
);
