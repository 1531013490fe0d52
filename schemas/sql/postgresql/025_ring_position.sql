-- 025_ring_position (PostgreSQL): the same column and index as
-- ../sqlite/025_ring_position.sql (read its comments), in PostgreSQL types.

ALTER TABLE nodes ADD COLUMN ring_pos BIGINT;
CREATE INDEX nodes_by_ring ON nodes (ring_pos, id);

-- The trigger ../sqlite/025_ring_position.sql explains: a node whose
-- allocation changed without a new ring_pos (a writer from before this
-- migration) becomes unplaced, never stale.
CREATE FUNCTION kiln_unplace_moved_node() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NEW.allocation IS DISTINCT FROM OLD.allocation AND NEW.ring_pos IS NOT DISTINCT FROM OLD.ring_pos THEN
    NEW.ring_pos := NULL;
  END IF;
  RETURN NEW;
END
$$;
CREATE TRIGGER nodes_unplace_moved BEFORE UPDATE OF allocation ON nodes
  FOR EACH ROW EXECUTE FUNCTION kiln_unplace_moved_node();
