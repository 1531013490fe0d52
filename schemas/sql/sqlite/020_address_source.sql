-- 020_address_source: where nodes.addresses came from: 'agent' (the OS-phase
-- kiln-agent reported them), 'dhcp' (the DHCP leases of the node's ports on
-- kilnd's dnsmasq, for an OS that runs no agent), '' when there are none.
-- An agent's report replaces DHCP's; DHCP never replaces an agent's. Emptied
-- with addresses and ssh when a new boot attempt starts. Rows from before
-- this migration hold only agent reports.

ALTER TABLE nodes ADD COLUMN address_source TEXT NOT NULL DEFAULT '';
UPDATE nodes SET address_source = 'agent' WHERE addresses <> '[]';
