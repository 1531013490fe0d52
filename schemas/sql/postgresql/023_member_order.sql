-- 023_member_order (PostgreSQL): the same column as
-- ../sqlite/023_member_order.sql (read its comments), in PostgreSQL types
-- (see 001_initial.sql). Existing rows are numbered in the order this dialect
-- read them back: joined_at, then the node's created_at and id.

ALTER TABLE allocation_members ADD COLUMN ord BIGINT NOT NULL DEFAULT 0;
UPDATE allocation_members SET ord = numbered.ord
  FROM (SELECT m.allocation, m.node_id,
               row_number() OVER (PARTITION BY m.allocation
                                  ORDER BY m.joined_at, n.created_at, m.node_id COLLATE "C") AS ord
          FROM allocation_members m LEFT JOIN nodes n ON n.id = m.node_id) AS numbered
 WHERE allocation_members.allocation = numbered.allocation AND allocation_members.node_id = numbered.node_id;
