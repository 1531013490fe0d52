-- 027_publish_in_writer (PostgreSQL): a writing transaction may publish its
-- own events before its COMMIT, when no publisher is at work.
--
-- Since 024_event_queue a write is two commits, each waiting for its WAL
-- flush: the writing transaction (its change and its queued events), then
-- kiln_publish_events() (numbering them). kiln_publish_events_in_writer() is
-- called by the writing transaction as its last statement. If the publishing
-- lock is free it takes it, for the rest of the transaction, and publishes
-- right there: every event committed and still queued, and the transaction's
-- own, which become visible with its commit. One commit, one flush. If the
-- lock is held, it returns NULL at once, and the writer publishes after its
-- commit as before (waiting only for the publisher at work).
--
-- What readers are promised (024's comments) still holds: numbers are given
-- under the one lock, and they become visible at the holder's commit before
-- the lock is released, so the next holder numbers after them and no reader
-- sees a number before a lower one. Events queued by transactions still in
-- flight are invisible here and keep an xid above the floor this sets (the
-- floor is the oldest running transaction, this one included), so the next
-- publisher takes them. Writers do not wait for each other: the lock is only
-- tried, never waited for. A writer holding it delays publishers by its own
-- commit, which is what a publisher holding it costs too.
CREATE FUNCTION kiln_publish_events_in_writer() RETURNS BIGINT LANGUAGE plpgsql AS $$
BEGIN
  IF NOT pg_try_advisory_xact_lock(1801811572) THEN
    RETURN NULL;
  END IF;
  -- Takes the same lock again (held: it does not wait) and publishes.
  RETURN kiln_publish_events();
END
$$;
