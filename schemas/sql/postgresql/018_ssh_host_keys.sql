-- 018_ssh_host_keys (PostgreSQL): the same column as ../sqlite/018_ssh_host_keys.sql
-- (read its comments), in PostgreSQL types (see 001_initial.sql).

ALTER TABLE nodes ADD COLUMN ssh_host_keys TEXT NOT NULL DEFAULT '[]';
