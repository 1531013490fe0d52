-- 021_image_os_agent (PostgreSQL): the same change as
-- ../sqlite/021_image_os_agent.sql (read its comments), in PostgreSQL types
-- (see 001_initial.sql).

ALTER TABLE images ADD COLUMN os_agent BOOLEAN NOT NULL DEFAULT TRUE;
UPDATE images SET os_agent = FALSE WHERE format = 'qcow2';
