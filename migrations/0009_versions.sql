-- 0009: what a session's kept reads are checked against.
--
-- The agent keeps texts it read (whole histories, recent windows, search results) between
-- requests, stamped with the version of their session: the seq of its newest message and its
-- row here, the count of its other writes. A text is served again only while both are
-- unchanged, so a write to another session, a memory or a context block no longer throws it
-- away. An insert needs no count: it gives the session a newer seq. The triggers count every
-- other row written to messages (edits, parent links, deletes) and to compactions (overlays laid
-- over a path), whoever writes it: no write path has to remember it. No pair comes back: between
-- two deletes the newest seq only grows. Rows are deleted only by the erase of the agent.
-- (A trigger has one event: five triggers with one body.)
CREATE TABLE session_versions (
  session_id TEXT    PRIMARY KEY,
  n          INTEGER NOT NULL
) WITHOUT ROWID;

CREATE TRIGGER versions_message_update AFTER UPDATE ON messages
BEGIN
  INSERT INTO session_versions (session_id, n) VALUES (new.session_id, 1)
    ON CONFLICT (session_id) DO UPDATE SET n = n + 1;
END;
CREATE TRIGGER versions_message_delete AFTER DELETE ON messages
BEGIN
  INSERT INTO session_versions (session_id, n) VALUES (old.session_id, 1)
    ON CONFLICT (session_id) DO UPDATE SET n = n + 1;
END;
CREATE TRIGGER versions_compaction_insert AFTER INSERT ON compactions
BEGIN
  INSERT INTO session_versions (session_id, n) VALUES (new.session_id, 1)
    ON CONFLICT (session_id) DO UPDATE SET n = n + 1;
END;
CREATE TRIGGER versions_compaction_update AFTER UPDATE ON compactions
BEGIN
  INSERT INTO session_versions (session_id, n) VALUES (new.session_id, 1)
    ON CONFLICT (session_id) DO UPDATE SET n = n + 1;
END;
CREATE TRIGGER versions_compaction_delete AFTER DELETE ON compactions
BEGIN
  INSERT INTO session_versions (session_id, n) VALUES (old.session_id, 1)
    ON CONFLICT (session_id) DO UPDATE SET n = n + 1;
END;
