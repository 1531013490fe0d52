-- 002_images: the image catalogue (docs/agent-protocol.md, controller/model/image.h).
-- `os` images are written to disks by the agent; `ramdisk` images are the
-- deploy ramdisk iPXE boots (initramfs in `path`, kernel in `kernel`).
-- `path` is the local file kilnd serves: the registered `source` when it is a
-- path, or DATA_DIR/images/<id> once an http(s) source has been downloaded.

CREATE TABLE images (
  id          TEXT PRIMARY KEY NOT NULL,
  name        TEXT NOT NULL UNIQUE,
  kind        TEXT NOT NULL,                  -- os | ramdisk
  format      TEXT NOT NULL,                  -- raw | raw+gzip | raw+zstd
  sha256      TEXT NOT NULL,                  -- of the file as served, lowercase hex
  size        INTEGER NOT NULL,               -- bytes of the file as served
  source      TEXT NOT NULL,                  -- a path or an http(s) URL, as registered
  path        TEXT NOT NULL DEFAULT '',       -- the file served; '' until downloaded
  kernel      TEXT NOT NULL DEFAULT '',       -- ramdisk: kernel path
  kernel_args TEXT NOT NULL DEFAULT '',       -- ramdisk: extra kernel arguments
  status      TEXT NOT NULL,                  -- ready | downloading | error
  last_error  TEXT NOT NULL DEFAULT '',
  created_at  INTEGER NOT NULL,
  updated_at  INTEGER NOT NULL
);
CREATE INDEX images_by_created ON images (created_at, id);
