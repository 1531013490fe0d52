-- 018_ssh_host_keys: the booted OS's SSH host public keys, as cloud-init's
-- phone_home posted them to the deploy's one-time URL: a JSON array of
-- {type, key}, each checked by common/ssh_host_key.h before it is written and
-- again when read. Non-empty also marks the deploy's phone-home URL used (the
-- URL's token is derived from the deploy's os secret, which agent_os_secrets
-- already holds, so no new secret is stored). Emptied when a new boot attempt
-- starts, with addresses and ssh.

ALTER TABLE nodes ADD COLUMN ssh_host_keys TEXT NOT NULL DEFAULT '[]';
