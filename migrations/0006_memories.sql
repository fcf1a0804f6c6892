-- 0006: long-term memory. Facts about the agent's user that persist independently of any
-- session: their text, category, tags, confidence, where they came from, when they expire and
-- how often they were recalled; every version of each; an FTS5 index over text and tags; and
-- their embedding vectors when semantic recall is configured.

-- seq orders memories (ties of created_at) and is the rowid of their FTS row.
CREATE TABLE memories (
  seq          INTEGER PRIMARY KEY,
  id           TEXT    NOT NULL UNIQUE,
  content      TEXT    NOT NULL,
  -- content trimmed, white space collapsed, lower case: duplicates are found by it.
  norm         TEXT    NOT NULL,
  category     TEXT    NOT NULL,
  -- JSON array of strings.
  tags         TEXT    NOT NULL DEFAULT '[]',
  score        REAL,
  session_id   TEXT,
  message_id   TEXT,
  created_at   TEXT    NOT NULL,
  updated_at   TEXT    NOT NULL,
  expires_at   TEXT,
  recalled_at  TEXT,
  recall_count INTEGER NOT NULL DEFAULT 0,
  -- 1 while the memory waits for its embedding (written when embeddings are configured).
  unembedded   INTEGER NOT NULL DEFAULT 0
);
CREATE UNIQUE INDEX memories_norm ON memories (category, norm);
CREATE INDEX memories_created ON memories (created_at, seq);
CREATE INDEX memories_session ON memories (session_id);
CREATE INDEX memories_expiry ON memories (expires_at) WHERE expires_at IS NOT NULL;
CREATE INDEX memories_unembedded ON memories (seq) WHERE unembedded = 1;

-- How many memories the agent holds (its cap is checked on every store), kept by triggers so
-- that no write counts the whole table. No row until the first memory (an agent that never
-- stored one has nothing stored).
CREATE TABLE memory_count (id INTEGER PRIMARY KEY CHECK (id = 1), n INTEGER NOT NULL);
CREATE TRIGGER memories_count_insert AFTER INSERT ON memories BEGIN
  INSERT INTO memory_count (id, n) VALUES (1, 1) ON CONFLICT (id) DO UPDATE SET n = n + 1;
END;
CREATE TRIGGER memories_count_delete AFTER DELETE ON memories BEGIN
  UPDATE memory_count SET n = n - 1 WHERE id = 1;
END;

-- rowid = memories.seq, rewritten with the memory.
CREATE VIRTUAL TABLE memories_fts USING fts5 (content, tags, tokenize = 'porter unicode61');

-- Every version of every memory, oldest first: the creation, then each change, and who made it
-- (api, tool or extract). A deleted memory's versions go with it.
CREATE TABLE memory_versions (
  seq       INTEGER PRIMARY KEY,
  memory_id TEXT NOT NULL,
  content   TEXT NOT NULL,
  tags      TEXT NOT NULL,
  score     REAL,
  category  TEXT NOT NULL,
  at        TEXT NOT NULL,
  by        TEXT NOT NULL
);
CREATE INDEX memory_versions_memory ON memory_versions (memory_id, seq);

-- The embedding of a memory (little-endian f32s) and the model that made it.
CREATE TABLE memory_vectors (
  memory_seq INTEGER PRIMARY KEY,
  model      TEXT NOT NULL,
  vector     BLOB NOT NULL
);
