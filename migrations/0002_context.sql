-- 0002: context blocks, the frozen system prompt, searchable context entries and skill load state.

-- The content of writable blocks, one row per (session, label). Readonly, search and skills
-- blocks have no row here: their content comes from the config, R2 or search_entries.
CREATE TABLE context_blocks (
  session_id TEXT NOT NULL,
  label      TEXT NOT NULL,
  updated_at TEXT NOT NULL,
  content    TEXT NOT NULL,
  PRIMARY KEY (session_id, label)
);

-- Blocks added to a session at run time (def = the block's config as JSON), and configured
-- blocks removed from it (removed = 1, def NULL). seq orders the added blocks.
CREATE TABLE context_defs (
  seq        INTEGER PRIMARY KEY,
  session_id TEXT    NOT NULL,
  label      TEXT    NOT NULL,
  removed    INTEGER NOT NULL DEFAULT 0,
  def        TEXT,
  UNIQUE (session_id, label)
);

-- The frozen system prompt of each session: rendered once, then served from here.
CREATE TABLE prompts (
  session_id TEXT PRIMARY KEY,
  created_at TEXT NOT NULL,
  prompt     TEXT NOT NULL
);

-- Entries of searchable blocks, shared by the agent's sessions; keyed by (label, key).
CREATE TABLE search_entries (
  seq        INTEGER PRIMARY KEY,
  label      TEXT NOT NULL,
  key        TEXT NOT NULL,
  created_at TEXT NOT NULL,
  updated_at TEXT NOT NULL,
  content    TEXT NOT NULL,
  UNIQUE (label, key)
);
-- rowid = search_entries.seq, rewritten with the entry.
CREATE VIRTUAL TABLE search_entries_fts USING fts5 (content, tokenize = 'porter unicode61');

-- Skills a session has loaded (load_context) and not unloaded; seq is the load order.
CREATE TABLE loaded_skills (
  seq        INTEGER PRIMARY KEY,
  session_id TEXT NOT NULL,
  label      TEXT NOT NULL,
  key        TEXT NOT NULL,
  UNIQUE (session_id, label, key)
);
