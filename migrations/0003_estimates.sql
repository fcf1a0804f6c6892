-- 0003: the running token estimate of each session's active branch (overlays applied, system
-- prompt excluded), so an append updates it in O(1) instead of re-reading the whole path.
-- A row is valid for exactly one leaf; any change that could alter it deletes the row, and the
-- next read recomputes it from the path once.
CREATE TABLE token_estimates (
  session_id TEXT PRIMARY KEY,
  leaf_id    TEXT    NOT NULL,
  tokens     INTEGER NOT NULL
);
