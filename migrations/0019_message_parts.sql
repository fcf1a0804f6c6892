-- 0019: a long message is embedded in parts (crates/core/src/vectors/embed.rs: at most 16 of
-- about 1,000 bytes): its first part is its vector as before (kind 2), each further one a vector
-- of kind 4 whose item is the message's seq × 16 + the part's number (1 to 15), with the
-- message's session as its scope. An edit or a delete of the message takes its parts along.
DROP TRIGGER vectors_message_update;
DROP TRIGGER vectors_message_delete;
CREATE TRIGGER vectors_message_update AFTER UPDATE OF content ON messages WHEN old.content IS NOT new.content BEGIN
  DELETE FROM vectors WHERE kind = 2 AND item = new.seq;
  DELETE FROM vectors WHERE kind = 4 AND item >= new.seq * 16 AND item < new.seq * 16 + 16;
  INSERT OR IGNORE INTO unembedded (kind, item) SELECT 2, new.seq WHERE EXISTS (SELECT 1 FROM embedding_model);
END;
CREATE TRIGGER vectors_message_delete AFTER DELETE ON messages BEGIN
  DELETE FROM vectors WHERE kind = 2 AND item = old.seq;
  DELETE FROM vectors WHERE kind = 4 AND item >= old.seq * 16 AND item < old.seq * 16 + 16;
  DELETE FROM unembedded WHERE kind = 2 AND item = old.seq;
END;
-- Messages embedded by their first 2,000 bytes before: those longer than one part are embedded
-- again, in parts (in the background, after the next write, as any waiting row).
INSERT OR IGNORE INTO unembedded (kind, item)
  SELECT 2, f.rowid FROM messages_fts f
   WHERE length(CAST(f.content AS BLOB)) > 1000 AND EXISTS (SELECT 1 FROM embedding_model);
