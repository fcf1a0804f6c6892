-- 0012: what is true now. A memory holds from `valid_from` (the time it became true: given on
-- POST, else when it was stored) until `invalid_at` (NULL while it holds); `superseded_by` names
-- the memory that replaced it, if one did. A superseded memory is kept, with its versions: lists,
-- searches, recall, injection and deduplication see it only when asked about the past (`asOf`)
-- or for everything (`includeSuperseded`).
ALTER TABLE memories ADD COLUMN valid_from TEXT;
ALTER TABLE memories ADD COLUMN invalid_at TEXT;
ALTER TABLE memories ADD COLUMN superseded_by TEXT;
UPDATE memories SET valid_from = created_at;

-- Duplicates are looked for among the memories that hold now: a fact that stopped being true
-- and then became true again is a new memory beside the old one.
DROP INDEX memories_norm;
CREATE UNIQUE INDEX memories_norm ON memories (
  category, norm, (CASE WHEN category = 'conversation' THEN session_id ELSE '' END)
) WHERE invalid_at IS NULL;
CREATE INDEX memories_invalid ON memories (invalid_at) WHERE invalid_at IS NOT NULL;
