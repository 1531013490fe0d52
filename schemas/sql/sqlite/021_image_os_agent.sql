-- 021_image_os_agent: whether an os image's OS runs kiln-agent
-- (controller/model/image.h, Image::os_agent). An image without one (a distro
-- cloud image) is deployed by the flows that validate in the deploy ramdisk
-- before the write and wait for cloud-init's phone_home
-- (controller/model/steps.h). Images registered before this migration are the
-- raw formats Kiln's own builds make, or a qcow2 (019): the default rule
-- (default_os_agent) says 1 for the first, 0 for a qcow2.

ALTER TABLE images ADD COLUMN os_agent INTEGER NOT NULL DEFAULT 1;
UPDATE images SET os_agent = 0 WHERE format = 'qcow2';
