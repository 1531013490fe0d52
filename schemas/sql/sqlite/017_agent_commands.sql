-- 017_agent_commands: each node's one outstanding agent command and its
-- result (docs/agent-protocol.md, "Commands"), in the database rather than in
-- one kilnd's memory, so that several kilnd sharing a database can each serve
-- the agent: the instance whose workflow sends the command writes the row and
-- polls it for the result; whichever instance the agent heartbeats to hands it
-- out (delivered_at marks the first delivery, which alone records
-- agent.command_sent); whichever the agent posts the result to fills status,
-- result and error, but only while command_id is still the one the agent names
-- (a stale id is refused). A new command replaces the row; forgetting the
-- node's agent (a new boot attempt) deletes it.

CREATE TABLE agent_commands (
  node_id      TEXT PRIMARY KEY NOT NULL REFERENCES nodes (id) ON DELETE CASCADE,
  command_id   TEXT NOT NULL,
  name         TEXT NOT NULL,
  args         TEXT NOT NULL DEFAULT '{}',   -- JSON object
  created_at   INTEGER NOT NULL,
  delivered_at INTEGER NOT NULL DEFAULT 0,   -- first heartbeat that handed it out; 0 = not yet
  status       TEXT NOT NULL DEFAULT '',     -- '' until the result; ok | error
  result       TEXT NOT NULL DEFAULT '{}',   -- JSON object
  error        TEXT NOT NULL DEFAULT '',
  finished_at  INTEGER NOT NULL DEFAULT 0
);
