-- 002_images (PostgreSQL): the same tables and columns as ../sqlite/002_images.sql
-- (read its comments), in PostgreSQL types (see 001_initial.sql).

CREATE TABLE images (
  id          TEXT COLLATE "C" PRIMARY KEY NOT NULL,
  name        TEXT NOT NULL UNIQUE,
  kind        TEXT NOT NULL,                  -- os | ramdisk
  format      TEXT NOT NULL,                  -- raw | raw+gzip | raw+zstd
  sha256      TEXT NOT NULL,                  -- of the file as served, lowercase hex
  size        BIGINT NOT NULL,               -- bytes of the file as served
  source      TEXT NOT NULL,                  -- a path or an http(s) URL, as registered
  path        TEXT NOT NULL DEFAULT '',       -- the file served; '' until downloaded
  kernel      TEXT NOT NULL DEFAULT '',       -- ramdisk: kernel path
  kernel_args TEXT NOT NULL DEFAULT '',       -- ramdisk: extra kernel arguments
  status      TEXT NOT NULL,                  -- ready | downloading | error
  last_error  TEXT NOT NULL DEFAULT '',
  created_at  BIGINT NOT NULL,
  updated_at  BIGINT NOT NULL
);
CREATE INDEX images_by_created ON images (created_at, id);
