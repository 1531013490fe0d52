-- 015_key_check: the sealing key's check value (scale-out issue).
--
-- Secrets in this database (BMC and host passwords) are sealed with the key
-- in kilnd's --key-file. Instances that share a database must share that key;
-- one started with another key would write secrets the others cannot open.
-- The first kilnd to start on the database seals a known text with its key
-- and stores it here; every kilnd after it must open that value with its own
-- key, or refuses to start (controller/main.cc). One row at most.
CREATE TABLE key_check (
  id    INTEGER PRIMARY KEY CHECK (id = 1),
  value TEXT NOT NULL
);
