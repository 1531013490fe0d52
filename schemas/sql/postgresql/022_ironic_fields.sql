-- 022_ironic_fields (PostgreSQL): the same column as
-- ../sqlite/022_ironic_fields.sql (read its comments), in PostgreSQL types
-- (see 001_initial.sql).

ALTER TABLE nodes ADD COLUMN ironic TEXT NOT NULL DEFAULT '{}';
