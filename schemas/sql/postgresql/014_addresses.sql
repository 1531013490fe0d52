-- 014_addresses (PostgreSQL): the same tables and columns as ../sqlite/014_addresses.sql
-- (read its comments), in PostgreSQL types (see 001_initial.sql).

ALTER TABLE nodes ADD COLUMN addresses TEXT NOT NULL DEFAULT '[]';
ALTER TABLE nodes ADD COLUMN ssh TEXT NOT NULL DEFAULT '';
ALTER TABLE images ADD COLUMN ssh_user TEXT NOT NULL DEFAULT 'root';
