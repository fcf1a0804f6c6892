-- 0017: a shared block's versions never repeat (crates/core/src/space/blocks.rs). Before, a
-- delete removed the label's row, so its next write was version 1 again and a replace naming
-- the version 1 read before the delete overwrote the new text (a lost update).

-- A delete keeps the label's row as a tombstone: deleted_at set, content empty, and the delete
-- counted as a version of its own; the next write goes on from there. The list of blocks and
-- the limit of 100 skip tombstones; a space keeps at most 1,000 of them (the oldest go).
ALTER TABLE space_blocks ADD COLUMN deleted_at TEXT;

-- The version a label without a row reads as (0 until raised): the highest version of the
-- tombstones dropped past the bound, and of the blocks a space erase removed. It survives the
-- erase, so no version is given twice.
CREATE TABLE space_block_floor (
  id      INTEGER PRIMARY KEY CHECK (id = 1),
  version INTEGER NOT NULL
);
