-- 026_history_lookups: indexes for the lookups that otherwise read rows in
-- proportion to what the deployment has done or holds, not to what they
-- answer. Allocations and validation reports are kept
-- after their use (released allocations and their names, every run's
-- report), so a lookup that scans them costs more with every deploy:
--   - a validation's `seq` is max(seq) + 1, taken at every insert
--     (sql/validations.cc): with only (node_id, seq) indexed, that max read
--     the whole index (0.56 ms at 8,000 reports, inside the one writer);
--   - an allocation by name, released ones included (get_allocation, the
--     reference a tenant or `kiln cluster` names it by): only live names were
--     indexed (allocations_live_name), so a name, and with it every
--     GET /v1/allocations/{id} whose query also asked for the name, scanned
--     every allocation ever made.
CREATE INDEX validations_by_seq ON validations (seq);
CREATE INDEX allocations_by_name ON allocations (name, tenant);

-- A claim takes the oldest claimable nodes of a profile and kind
-- (allocation_rows::claimable_nodes_sql). Through nodes_by_profile_created
-- it walked the profile's nodes oldest first and passed over every one in
-- use, and the pool drains oldest first: a claim read as many rows as the
-- fleet had nodes claimed, inside the one writer. The partial index holds
-- the claimable nodes only; its condition is store_rules::kClaimableNodeSql
-- word for word, which is what lets both engines match it to the query.
CREATE INDEX nodes_claimable ON nodes (profile, kind, created_at, id)
  WHERE provision_state = 'available' AND maintenance = FALSE AND fault = '' AND reservation = ''
    AND allocation = '' AND tenant = '';

-- The same claim counts the tenant's nodes of the profile and kind for its
-- quota. With only (profile, created_at, id) and (tenant, created_at, id) to
-- choose from, SQLite (no statistics) counted through the profile's: every
-- node of the profile, at every claim. An index on exactly what it tests.
CREATE INDEX nodes_by_tenant_profile ON nodes (tenant, profile, kind);
