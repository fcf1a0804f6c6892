-- 0001: the sessions registry, the message tree, compaction overlays and the full-text index.
-- Small columns come first and large ones (content, summary) last, so tree walks that read only
-- ids, parents and sizes never touch the overflow pages of big messages.

CREATE TABLE sessions (
  seq               INTEGER PRIMARY KEY,          -- creation order
  id                TEXT    NOT NULL UNIQUE,
  name              TEXT    NOT NULL,
  parent_session_id TEXT,
  model             TEXT,
  source            TEXT,
  input_tokens      INTEGER NOT NULL DEFAULT 0,
  output_tokens     INTEGER NOT NULL DEFAULT 0,
  estimated_cost    REAL    NOT NULL DEFAULT 0,
  end_reason        TEXT,
  created_at        TEXT    NOT NULL,             -- ISO-8601 UTC with milliseconds
  updated_at        TEXT    NOT NULL,
  touch_seq         INTEGER NOT NULL              -- order of updates, breaks updated_at ties
);
CREATE INDEX sessions_recent ON sessions (updated_at DESC, touch_seq DESC);
CREATE INDEX sessions_touch  ON sessions (touch_seq);

-- Message ids are unique per session, not per Durable Object.
-- seq is the insertion order: a child always has a larger seq than its parent, so the newest
-- row of a session is always childless and is the session's latest leaf.
CREATE TABLE messages (
  seq        INTEGER PRIMARY KEY,
  session_id TEXT    NOT NULL,
  id         TEXT    NOT NULL,
  parent_id  TEXT,                                -- NULL for a root
  role       TEXT    NOT NULL,
  bytes      INTEGER NOT NULL,                    -- UTF-8 length of content
  created_at TEXT    NOT NULL,
  content    TEXT    NOT NULL,                    -- the message JSON, verbatim
  UNIQUE (session_id, id)
);
CREATE INDEX messages_children ON messages (session_id, parent_id);
CREATE INDEX messages_order    ON messages (session_id, seq);

CREATE TABLE compactions (
  seq             INTEGER PRIMARY KEY,            -- insertion order: the newest overlay wins
  id              TEXT    NOT NULL UNIQUE,
  session_id      TEXT    NOT NULL,
  from_message_id TEXT    NOT NULL,
  to_message_id   TEXT    NOT NULL,
  created_at      TEXT    NOT NULL,
  summary         TEXT    NOT NULL
);
CREATE INDEX compactions_session ON compactions (session_id, seq);

-- Full-text index of the text parts of messages; rowid = messages.seq.
CREATE VIRTUAL TABLE messages_fts USING fts5 (content, tokenize = 'porter unicode61');
