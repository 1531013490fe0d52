-- 020_address_source (PostgreSQL): the same column as ../sqlite/020_address_source.sql
-- (read its comments), in PostgreSQL types (see 001_initial.sql).

ALTER TABLE nodes ADD COLUMN address_source TEXT NOT NULL DEFAULT '';
UPDATE nodes SET address_source = 'agent' WHERE addresses <> '[]';
