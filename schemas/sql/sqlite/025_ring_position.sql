-- 025_ring_position: each node's place on the conductor ring, so that an
-- instance reads only the nodes it owns (power sync, GET /v1/conductors)
-- instead of every node. ring_pos is ring_position(ownership key)
-- (controller/model/ring_position.h): the hash of the node's allocation id,
-- else of its own id, as a signed 64-bit integer in the hash's order. Every
-- node write sets it. SQL cannot compute that hash, so rows written before
-- this migration are NULL until the store, when it opens, places them
-- (SqlStore::place_nodes_on_ring); until then readers take a NULL row as
-- anyone's and decide its owner in C++.

ALTER TABLE nodes ADD COLUMN ring_pos INTEGER;
CREATE INDEX nodes_by_ring ON nodes (ring_pos, id);

-- A kilnd from before this migration, still running beside newer ones, writes
-- nodes without ring_pos: its inserts leave it NULL, and a change of a node's
-- allocation would leave it stale. Such a change makes the node unplaced
-- again (NULL: anyone's until the next store open places it), so a stale
-- position never hides a node from its owner. Newer kilnd write the new
-- position in the same UPDATE, which this leaves alone.
CREATE TRIGGER nodes_unplace_moved AFTER UPDATE OF allocation ON nodes
  WHEN NEW.allocation IS NOT OLD.allocation AND NEW.ring_pos IS OLD.ring_pos
BEGIN
  UPDATE nodes SET ring_pos = NULL WHERE id = NEW.id;
END;
