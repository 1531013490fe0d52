-- 016_conductors: the kilnd processes sharing this database
-- (controller/store/conductor_store.h).
--
-- Each kilnd registers a row with a fresh id when it starts and heartbeats
-- it every few seconds; stopped_at is set on a clean shutdown (0 while
-- running). Liveness is judged by readers from stopped_at and
-- last_heartbeat_at, so nothing here expires rows on its own.
CREATE TABLE conductors (
  id                TEXT PRIMARY KEY,
  host              TEXT NOT NULL,
  api_url           TEXT NOT NULL,
  started_at        INTEGER NOT NULL,
  last_heartbeat_at INTEGER NOT NULL,
  stopped_at        INTEGER NOT NULL DEFAULT 0
);
-- A restarted process finds its previous incarnation by (host, api_url).
CREATE INDEX conductors_host_url ON conductors (host, api_url);
