-- 022_ironic_fields: what a node enrolled or patched through the
-- Ironic-compatible API holds that Kiln has no column for
-- (controller/model/node.h, Node::ironic; docs/ironic-api.md): a JSON object
-- with Ironic's `driver` name, the non-secret `driver_info` keys exactly as
-- written, `properties`, `extra`, `instance_info`, `instance_uuid`,
-- `resource_class`, `description`, the interface names and the like. Ironic's
-- clients re-read these and re-patch any difference, so they are kept as
-- written. Never a password: BMC passwords stay sealed in
-- bmc_password_sealed, and the API refuses other secret-named keys. '{}' for
-- nodes enrolled through /v1 (or before this migration): their Ironic view is
-- derived from Kiln's columns.

ALTER TABLE nodes ADD COLUMN ironic TEXT NOT NULL DEFAULT '{}';
