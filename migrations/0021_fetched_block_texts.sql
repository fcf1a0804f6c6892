-- 0021: the last text a block that reads from outside was given (crates/core/src/context/
-- fetched.rs): an http block's service (http.rs), a d1 block's query (d1.rs), per session and
-- block label. A read that answers replaces it; a read that fails (the service or database
-- down, late, or answering something unusable) shows it instead, with a warning, so the prompt
-- keeps what it last knew and the turn goes on. Removing the block from the session, and
-- deleting the session, delete its rows. Not exported: the outside is asked again elsewhere.
CREATE TABLE fetched_block_texts (
  session_id TEXT NOT NULL,
  label      TEXT NOT NULL,
  content    TEXT NOT NULL,
  PRIMARY KEY (session_id, label)
) WITHOUT ROWID;
