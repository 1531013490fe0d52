-- 019_image_conversion (PostgreSQL): the same change as
-- ../sqlite/019_image_conversion.sql (read its comments), in PostgreSQL types
-- (see 001_initial.sql).

ALTER TABLE images RENAME COLUMN status TO state;
UPDATE images SET state = 'failed' WHERE state = 'error';
ALTER TABLE images ADD COLUMN virtual_size BIGINT NOT NULL DEFAULT 0;
ALTER TABLE images ADD COLUMN served_sha256 TEXT NOT NULL DEFAULT '';
ALTER TABLE images ADD COLUMN served_size BIGINT NOT NULL DEFAULT 0;
ALTER TABLE images ADD COLUMN served_path TEXT NOT NULL DEFAULT '';
UPDATE images SET virtual_size = size WHERE format = 'raw';
