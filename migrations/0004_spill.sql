-- Oversize messages (schema version 4). A message whose JSON would pass the row limit keeps its
-- largest fields in the object store (R2); the row holds a short placeholder and this table says
-- where each original is. Reads put them back. Keys are never reused; a fork shares its source's.
CREATE TABLE spills (
  message_seq INTEGER NOT NULL,        -- messages.seq
  session_id  TEXT    NOT NULL,
  part        INTEGER NOT NULL,        -- index in `parts`, or -1 for a field of the message itself
  field       TEXT    NOT NULL,        -- the field's name in that object
  key         TEXT    NOT NULL,        -- object key in the bucket
  bytes       INTEGER NOT NULL,        -- UTF-8 bytes of the field's JSON
  PRIMARY KEY (message_seq, part, field)
);
CREATE INDEX spills_session ON spills (session_id);
CREATE INDEX spills_key     ON spills (key);

-- Objects that no row refers to any more; the next write request deletes them from the store
-- (and retries on a later one if the store fails).
CREATE TABLE spill_garbage (key TEXT PRIMARY KEY);

-- However a message goes (delete, clear, session delete), its spills go with it ...
CREATE TRIGGER spills_of_deleted_message AFTER DELETE ON messages
BEGIN
  DELETE FROM spills WHERE message_seq = old.seq;
END;

-- ... and an object is garbage once its last reference is gone.
CREATE TRIGGER spill_unreferenced AFTER DELETE ON spills
WHEN NOT EXISTS (SELECT 1 FROM spills WHERE key = old.key)
BEGIN
  INSERT OR IGNORE INTO spill_garbage (key) VALUES (old.key);
END;
