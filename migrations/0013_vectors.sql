-- 0013: meaning for every store. With embeddings configured, memories, messages and the entries
-- of search blocks each get one vector, made after the answer that wrote them; an index of their
-- sign codes is kept in the object's memory (crates/core/src/vectors/) and follows this table
-- through vector_log. (0011 and 0012 are other changes' numbers: the schema list applies every
-- version it lacks, in order.)

-- The embeddings model in use (no row: embeddings are off). Set when the object starts; while it
-- is set, the triggers below queue every new or changed text. A different model queues every
-- row again (re-embedded in the background).
CREATE TABLE embedding_model (
  id    INTEGER PRIMARY KEY CHECK (id = 1),
  model TEXT    NOT NULL
);

-- The vector of one row: kind 1 a memory, 2 a message, 3 a search entry; item its seq; scope
-- what a search keeps to (a message's session, an entry's label; NULL for a memory); hash the
-- FNV-1a of the text embedded (a text embedded once is not sent again); at when it was made;
-- code one sign bit per dimension (at most 512) as little-endian u64 words; vector the
-- little-endian f32s. Small columns first: the code index below holds them without the vectors.
CREATE TABLE vectors (
  kind   INTEGER NOT NULL,
  item   INTEGER NOT NULL,
  scope  TEXT,
  model  TEXT    NOT NULL,
  hash   INTEGER NOT NULL,
  at     TEXT    NOT NULL,
  code   BLOB,
  vector BLOB    NOT NULL,
  PRIMARY KEY (kind, item)
);
-- What an index kept in memory loads, read from this index alone (never the vectors' pages).
CREATE INDEX vectors_codes ON vectors (kind, model, item, scope, code);
-- A text embedded before (a fork's copies, an edit that kept the words) reuses its vector.
CREATE INDEX vectors_hash ON vectors (model, hash);
-- Vectors still without their code (those of 0006, moved below).
CREATE INDEX vectors_uncoded ON vectors (kind, item) WHERE code IS NULL;

-- Rows whose text waits for its vector (written, changed, imported, or embedded by another model).
CREATE TABLE unembedded (
  kind INTEGER NOT NULL,
  item INTEGER NOT NULL,
  PRIMARY KEY (kind, item)
) WITHOUT ROWID;

-- Every write of a vector row, in order: an index kept in memory reads what came after the last
-- row it applied. AUTOINCREMENT: a seq is never given twice, even after the log is trimmed or
-- erased. Trimmed to its newest rows by the embedding work; an index older than the oldest row
-- left loads again.
CREATE TABLE vector_log (
  seq  INTEGER PRIMARY KEY AUTOINCREMENT,
  kind INTEGER NOT NULL,
  item INTEGER NOT NULL
);
CREATE TRIGGER vector_log_insert AFTER INSERT ON vectors BEGIN
  INSERT INTO vector_log (kind, item) VALUES (new.kind, new.item);
END;
CREATE TRIGGER vector_log_update AFTER UPDATE ON vectors BEGIN
  INSERT INTO vector_log (kind, item) VALUES (new.kind, new.item);
END;
CREATE TRIGGER vector_log_delete AFTER DELETE ON vectors BEGIN
  INSERT INTO vector_log (kind, item) VALUES (old.kind, old.item);
END;

-- Whoever writes a row, its vector follows: a new row waits for one, a changed text loses its
-- vector and waits again, a deleted row takes its vector and its place in the queue along.
CREATE TRIGGER vectors_memory_insert AFTER INSERT ON memories WHEN EXISTS (SELECT 1 FROM embedding_model) BEGIN
  INSERT OR IGNORE INTO unembedded (kind, item) VALUES (1, new.seq);
END;
CREATE TRIGGER vectors_memory_update AFTER UPDATE OF content ON memories WHEN old.content IS NOT new.content BEGIN
  DELETE FROM vectors WHERE kind = 1 AND item = new.seq;
  INSERT OR IGNORE INTO unembedded (kind, item) SELECT 1, new.seq WHERE EXISTS (SELECT 1 FROM embedding_model);
END;
CREATE TRIGGER vectors_memory_delete AFTER DELETE ON memories BEGIN
  DELETE FROM vectors WHERE kind = 1 AND item = old.seq;
  DELETE FROM unembedded WHERE kind = 1 AND item = old.seq;
END;
CREATE TRIGGER vectors_message_insert AFTER INSERT ON messages WHEN EXISTS (SELECT 1 FROM embedding_model) BEGIN
  INSERT OR IGNORE INTO unembedded (kind, item) VALUES (2, new.seq);
END;
CREATE TRIGGER vectors_message_update AFTER UPDATE OF content ON messages WHEN old.content IS NOT new.content BEGIN
  DELETE FROM vectors WHERE kind = 2 AND item = new.seq;
  INSERT OR IGNORE INTO unembedded (kind, item) SELECT 2, new.seq WHERE EXISTS (SELECT 1 FROM embedding_model);
END;
CREATE TRIGGER vectors_message_delete AFTER DELETE ON messages BEGIN
  DELETE FROM vectors WHERE kind = 2 AND item = old.seq;
  DELETE FROM unembedded WHERE kind = 2 AND item = old.seq;
END;
CREATE TRIGGER vectors_entry_insert AFTER INSERT ON search_entries WHEN EXISTS (SELECT 1 FROM embedding_model) BEGIN
  INSERT OR IGNORE INTO unembedded (kind, item) VALUES (3, new.seq);
END;
CREATE TRIGGER vectors_entry_update AFTER UPDATE OF content ON search_entries WHEN old.content IS NOT new.content BEGIN
  DELETE FROM vectors WHERE kind = 3 AND item = new.seq;
  INSERT OR IGNORE INTO unembedded (kind, item) SELECT 3, new.seq WHERE EXISTS (SELECT 1 FROM embedding_model);
END;
CREATE TRIGGER vectors_entry_delete AFTER DELETE ON search_entries BEGIN
  DELETE FROM vectors WHERE kind = 3 AND item = old.seq;
  DELETE FROM unembedded WHERE kind = 3 AND item = old.seq;
END;

-- The memories' vectors of 0006 move here (their codes are computed when the object next starts
-- with embeddings on), and the memories that waited for one wait in the queue.
INSERT INTO vectors (kind, item, scope, model, hash, at, code, vector)
  SELECT 1, v.memory_seq, NULL, v.model, 0, m.updated_at, NULL, v.vector
    FROM memory_vectors v JOIN memories m ON m.seq = v.memory_seq;
INSERT INTO unembedded (kind, item) SELECT 1, seq FROM memories WHERE unembedded = 1;
DROP TABLE memory_vectors;
DROP INDEX memories_unembedded;
ALTER TABLE memories DROP COLUMN unembedded;
-- The moves above are not changes an index kept in memory must follow: none existed before.
DELETE FROM vector_log;
