-- 015_key_check (PostgreSQL): the same table as ../sqlite/015_key_check.sql
-- (read its comments), in PostgreSQL types.

CREATE TABLE key_check (
  id    INTEGER PRIMARY KEY CHECK (id = 1),
  value TEXT NOT NULL
);
