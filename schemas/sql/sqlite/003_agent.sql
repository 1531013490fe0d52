-- 003_agent: kiln-agent's one-time boot tokens and sessions (controller/agent,
-- docs/agent-protocol.md). Both secrets are stored only as their SHA-256 (hex).
--
-- A node has at most one boot token (minted each time its iPXE script is
-- served; a new one replaces the old) and, in practice, one session (a lookup
-- replaces the node's earlier sessions). Sessions are rows, not memory, so an
-- agent keeps heartbeating across a kilnd restart.

CREATE TABLE agent_boot_tokens (
  node_id    TEXT PRIMARY KEY NOT NULL REFERENCES nodes (id) ON DELETE CASCADE,
  token_hash TEXT NOT NULL,
  created_at INTEGER NOT NULL
);

CREATE TABLE agent_sessions (
  token_hash   TEXT PRIMARY KEY NOT NULL,
  node_id      TEXT NOT NULL REFERENCES nodes (id) ON DELETE CASCADE,
  phase        TEXT NOT NULL,                    -- ramdisk | os
  issued_state TEXT NOT NULL,                    -- provision state at lookup
  created_at   INTEGER NOT NULL
);
CREATE INDEX agent_sessions_by_node ON agent_sessions (node_id);
