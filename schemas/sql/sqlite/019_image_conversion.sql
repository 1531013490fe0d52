-- 019_image_conversion: qcow2 images, converted by kilnd to the raw+zstd file
-- the agent is served (controller/boot/image_converter.h).
--
-- `status` becomes `state`, the lifecycle's canonical name (awaiting_upload,
-- downloading, converting, ready, failed); the old "error" reads "failed"
-- (the API still shows the old `status`, derived from it: model/image.h).
-- virtual_size: bytes of the disk the image describes, 0 when unknown; a raw
-- image's is its size. served_*: the converted raw+zstd file of a qcow2 image
-- (several images with the same source sha256 share one), empty otherwise.

ALTER TABLE images RENAME COLUMN status TO state;
UPDATE images SET state = 'failed' WHERE state = 'error';
ALTER TABLE images ADD COLUMN virtual_size INTEGER NOT NULL DEFAULT 0;
ALTER TABLE images ADD COLUMN served_sha256 TEXT NOT NULL DEFAULT '';
ALTER TABLE images ADD COLUMN served_size INTEGER NOT NULL DEFAULT 0;
ALTER TABLE images ADD COLUMN served_path TEXT NOT NULL DEFAULT '';
UPDATE images SET virtual_size = size WHERE format = 'raw';
