-- 0010: references that always point somewhere, and conversation memories kept per session.
--
-- A message's parent_id names a message of its own session or nothing: deleting a message has
-- cleared its children's parent_id since 0008, but children orphaned before that still name the
-- deleted id (with parent_seq NULL). Such a name is a trap: a later message appended under the
-- same id would seem to be their parent in a list of children. They are roots; say so.
UPDATE messages SET parent_id = NULL WHERE parent_id IS NOT NULL AND parent_seq IS NULL;

-- Duplicates of a conversation memory are looked for in its own session only: the same words in
-- two conversations are two memories, each going with its session. Other categories stay one
-- memory per normalized text. The new key is looser than the old one, so every stored row fits.
DROP INDEX memories_norm;
CREATE UNIQUE INDEX memories_norm ON memories (
  category, norm, (CASE WHEN category = 'conversation' THEN session_id ELSE '' END)
);
