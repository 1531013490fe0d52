-- 026_history_lookups (PostgreSQL): the same indexes as
-- ../sqlite/026_history_lookups.sql (read its comments).
CREATE INDEX validations_by_seq ON validations (seq);
CREATE INDEX allocations_by_name ON allocations (name, tenant);
CREATE INDEX nodes_claimable ON nodes (profile, kind, created_at, id)
  WHERE provision_state = 'available' AND maintenance = FALSE AND fault = '' AND reservation = ''
    AND allocation = '' AND tenant = '';
CREATE INDEX nodes_by_tenant_profile ON nodes (tenant, profile, kind);
