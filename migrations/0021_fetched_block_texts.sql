-- 0021: the last text an http block's service gave (crates/core/src/context/http.rs), per
-- session and block label. A `get` that answers replaces it; a `get` that fails (the service
-- down, late, or answering something unusable) shows it instead, with a warning, so the prompt
-- keeps what it last knew and the turn goes on. Removing the block from the session, and
-- deleting the session, delete its rows. Not exported: the service is asked again elsewhere.
CREATE TABLE fetched_block_texts (
  session_id TEXT NOT NULL,
  label      TEXT NOT NULL,
  content    TEXT NOT NULL,
  PRIMARY KEY (session_id, label)
) WITHOUT ROWID;
