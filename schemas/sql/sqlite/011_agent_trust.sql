-- 011_agent_trust: what lets kilnd tell a node's own agent from another
-- machine on the provisioning network (docs/agent-protocol.md, "Trust").
--
-- agent_boot_tokens.token_sealed: the boot token sealed with kiln.key, so a
-- re-fetched boot script shows the same token for the same boot attempt
-- instead of minting a new one (which let anyone who fetched the script
-- replace the real node's token). Lookup still checks token_hash.
--
-- agent_os_secrets: the per-deploy secret the os-phase agent presents at
-- lookup. Minted when a deploy needs it, forgotten when the next boot attempt
-- starts; sealed so the NoCloud seed of a virtual node can be served more than
-- once, hashed for the comparison at lookup.

ALTER TABLE agent_boot_tokens ADD COLUMN token_sealed TEXT NOT NULL DEFAULT '';

CREATE TABLE agent_os_secrets (
  node_id       TEXT PRIMARY KEY NOT NULL REFERENCES nodes (id) ON DELETE CASCADE,
  secret_hash   TEXT NOT NULL,
  secret_sealed TEXT NOT NULL,
  created_at    INTEGER NOT NULL
);
