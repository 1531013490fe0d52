-- 014_addresses: what a tenant needs to log in to a deployed node.
--
-- nodes.addresses: the booted OS's IP addresses as its OS-phase agent last
-- reported them (JSON array of strings), and nodes.ssh the login made of them
-- (`<image ssh_user>@<first address>`); both emptied when a new boot attempt
-- starts. images.ssh_user: the account the image's cloud-init installs the
-- allocation's keys for (NoCloud's default user: `ubuntu` on Ubuntu cloud
-- images, `root` on the demo OS); fixed at registration, like the image.

ALTER TABLE nodes ADD COLUMN addresses TEXT NOT NULL DEFAULT '[]';
ALTER TABLE nodes ADD COLUMN ssh TEXT NOT NULL DEFAULT '';
ALTER TABLE images ADD COLUMN ssh_user TEXT NOT NULL DEFAULT 'root';
