-- 024_event_queue (PostgreSQL): events are numbered when they are published,
-- after their transaction committed, instead of inside it.
--
-- Until now a writing transaction took its numbers from event_counter's row
-- (001_initial.sql) and held that row locked until its COMMIT had waited for
-- the WAL flush: every writer of every kilnd sharing the database committed
-- one at a time. Now a writing transaction appends its events to
-- event_queue, unnumbered, in the same transaction as the change they
-- describe, and after its COMMIT calls kiln_publish_events(), which moves
-- every committed queued event into `events` with the next numbers. Only
-- that short step is serialized (by an advisory lock), and one call
-- publishes every event committed so far, so writers that finish together
-- share one publishing commit. Numbers stay gap-free and a reader paging
-- `events` by `seq > since` still never misses one: a number is given only
-- to an event already committed, by one publisher at a time, and each
-- publisher commits before the next takes the lock (advisory locks are
-- released after the commit is visible), so the rows of `events` become
-- visible in seq order. What readers and event_counter mean is unchanged;
-- controller/store/pg/pg_events.cc says the rest.

-- Committed (or still in-flight) events not yet numbered. `id` keeps the
-- order they were appended in: an event appended after reading another
-- transaction's committed change has a higher id than that transaction's
-- events, so causally later events get later numbers. `xid` is the writing
-- transaction's id, so that a publisher finds what is left by an index range
-- (below) instead of reading every page the deleted rows left behind.
CREATE TABLE event_queue (
  id         BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  xid        XID8 NOT NULL DEFAULT pg_current_xact_id(),
  ts         BIGINT NOT NULL,
  type       TEXT NOT NULL,
  node_id    TEXT NOT NULL DEFAULT '',
  from_state TEXT NOT NULL DEFAULT '',
  to_state   TEXT NOT NULL DEFAULT '',
  request_id TEXT NOT NULL DEFAULT '',
  tenant     TEXT NOT NULL DEFAULT '',
  detail     TEXT NOT NULL DEFAULT '{}'
);
CREATE INDEX event_queue_by_xid ON event_queue (xid);

-- Every queued event of a transaction whose xid is below queue_floor has been
-- published: each publisher sets it to the oldest transaction still running
-- when it looked (pg_snapshot_xmin), since every transaction older than that
-- had ended and its events were there to be moved. The queue is read from
-- the floor up only.
ALTER TABLE event_counter ADD COLUMN queue_floor XID8 NOT NULL DEFAULT '0';

-- Publishes what is queued; returns the highest seq published so far (at
-- least that of every event committed before the call). Called after each
-- commit that queued events, and by each instance's listening thread every
-- few seconds (events of a writer that died between its commit and this
-- call). The lock key is "kevt" in ASCII (the migration lock is "kiln").
CREATE FUNCTION kiln_publish_events() RETURNS BIGINT LANGUAGE plpgsql AS $$
DECLARE
  floor_xid XID8;
  next_floor XID8;
  last BIGINT;
  moved BIGINT;
BEGIN
  -- Each statement must see what committed before it (the lock's waiters
  -- above all): READ COMMITTED, which kilnd's connections use.
  IF current_setting('transaction_isolation') <> 'read committed' THEN
    RAISE EXCEPTION 'kiln_publish_events needs READ COMMITTED, not %', current_setting('transaction_isolation');
  END IF;
  -- Nothing queued at or above the floor: every event committed before this
  -- statement has been published (a publisher that moved it has committed).
  SELECT queue_floor INTO floor_xid FROM event_counter;
  IF NOT EXISTS (SELECT 1 FROM event_queue WHERE xid >= floor_xid) THEN
    RETURN (SELECT last_seq FROM event_counter);
  END IF;
  PERFORM pg_advisory_xact_lock(1801811572);
  -- Each statement below sees what the previous holder of the lock committed.
  SELECT last_seq, queue_floor, pg_snapshot_xmin(pg_current_snapshot())
    INTO last, floor_xid, next_floor FROM event_counter;
  WITH taken AS (DELETE FROM event_queue WHERE xid >= floor_xid RETURNING *)
  INSERT INTO events (seq, ts, type, node_id, from_state, to_state, request_id, tenant, detail)
  SELECT last + row_number() OVER (ORDER BY id), ts, type, node_id, from_state, to_state, request_id, tenant,
         detail
    FROM taken;
  GET DIAGNOSTICS moved = ROW_COUNT;
  IF moved > 0 THEN
    UPDATE event_counter SET last_seq = last + moved, queue_floor = next_floor;
    -- For other instances' listeners, delivered at this commit.
    PERFORM pg_notify('kiln_events', (last + moved)::TEXT);
  END IF;
  RETURN last + moved;
END
$$;
