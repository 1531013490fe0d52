-- 026_history_lookups: indexes for the lookups that otherwise read every row
-- of a table that only grows. Allocations and validation reports are kept
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
