-- 016_conductors (PostgreSQL): the same table as ../sqlite/016_conductors.sql
-- (read its comments), in PostgreSQL types.

CREATE TABLE conductors (
  id                TEXT PRIMARY KEY,
  host              TEXT NOT NULL,
  api_url           TEXT NOT NULL,
  started_at        BIGINT NOT NULL,
  last_heartbeat_at BIGINT NOT NULL,
  stopped_at        BIGINT NOT NULL DEFAULT 0
);
CREATE INDEX conductors_host_url ON conductors (host, api_url);
