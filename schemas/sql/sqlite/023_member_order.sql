-- 023_member_order: the order an allocation's members joined in, as a column
-- both dialects read alike (controller/store/sql/allocations.cc). Members
-- that joined in one claim share joined_at; `ord` is each member's place in
-- its allocation (1, 2, ...), written by the claim in the order it took the
-- nodes (pooled nodes oldest first, then the guests it made, as made).
-- Before this, SQLite broke joined_at ties by rowid (the same order) and
-- PostgreSQL, which has no rowid, by the node's created_at and id, which put
-- guests made in one claim in id order instead. Existing rows are numbered in
-- the order this dialect read them back.

ALTER TABLE allocation_members ADD COLUMN ord INTEGER NOT NULL DEFAULT 0;
UPDATE allocation_members SET ord = numbered.ord
  FROM (SELECT rowid AS member,
               row_number() OVER (PARTITION BY allocation ORDER BY joined_at, rowid) AS ord
          FROM allocation_members) AS numbered
 WHERE allocation_members.rowid = numbered.member;
