-- 0008: path walks by primary key, and in-session search that ranks only the session's matches.
--
-- messages gains parent_seq, the seq of the parent (NULL for a root, and for a parent that is not
-- in the session: children of a deleted message are roots). A walk up a path follows it by
-- primary key instead of looking each parent up by (session_id, id) in the text index: half the
-- time of a walk. It sits before the large columns (see 0001), so a walk never reads the overflow
-- pages of a big message: the table is rebuilt rather than altered.
ALTER TABLE messages RENAME TO messages_0007;
CREATE TABLE messages (
  seq        INTEGER PRIMARY KEY,
  session_id TEXT    NOT NULL,
  id         TEXT    NOT NULL,
  parent_id  TEXT,                                -- NULL for a root
  parent_seq INTEGER,                             -- the parent's seq, NULL when it is not in the session
  role       TEXT    NOT NULL,
  bytes      INTEGER NOT NULL,
  created_at TEXT    NOT NULL,
  content    TEXT    NOT NULL,
  UNIQUE (session_id, id)
);
INSERT INTO messages (seq, session_id, id, parent_id, parent_seq, role, bytes, created_at, content)
  SELECT m.seq, m.session_id, m.id, m.parent_id, p.seq, m.role, m.bytes, m.created_at, m.content
    FROM messages_0007 m
    LEFT JOIN messages_0007 p ON p.session_id = m.session_id AND p.id = m.parent_id AND p.seq < m.seq
   ORDER BY m.seq;
-- Dropping the old table drops its indexes and its trigger (no trigger fires).
DROP TABLE messages_0007;
CREATE INDEX messages_children ON messages (session_id, parent_id);
CREATE INDEX messages_order    ON messages (session_id, seq);
CREATE TRIGGER spills_of_deleted_message AFTER DELETE ON messages
BEGIN
  DELETE FROM spills WHERE message_seq = old.seq;
END;

-- The full-text index gains a column holding one token for the message's session:
-- 'x' || hex(session_id). An in-session search asks for it beside the words, so FTS5 ranks only
-- the session's matches instead of every match in the agent. Ranking weighs the content column
-- alone (bm25(messages_fts, 1.0, 0.0)).
CREATE TABLE messages_fts_0007 (seq INTEGER PRIMARY KEY, content TEXT NOT NULL);
INSERT INTO messages_fts_0007 (seq, content) SELECT rowid, content FROM messages_fts;
DROP TABLE messages_fts;
CREATE VIRTUAL TABLE messages_fts USING fts5 (content, session, tokenize = 'porter unicode61');
INSERT INTO messages_fts (rowid, content, session)
  SELECT f.seq, f.content, 'x' || hex(m.session_id)
    FROM messages_fts_0007 f JOIN messages m ON m.seq = f.seq
   ORDER BY f.seq;
DROP TABLE messages_fts_0007;
