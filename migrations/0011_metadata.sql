-- 0011: metadata on sessions and memories.
--
-- A caller's own facts about a session or a memory (a user id, a channel, a priority): a flat
-- JSON object of at most 16 keys with string, number or boolean values, checked on every write
-- (core::metadata) and stored as its JSON text. Filters read it with SQLite's JSON functions.
-- Rows stored before have none: '{}'. A memory's versions keep the metadata it had, as they keep
-- its text and tags. The columns come last in their rows, after the ones path walks and lists
-- read.
ALTER TABLE sessions ADD COLUMN metadata TEXT NOT NULL DEFAULT '{}';
ALTER TABLE memories ADD COLUMN metadata TEXT NOT NULL DEFAULT '{}';
ALTER TABLE memory_versions ADD COLUMN metadata TEXT NOT NULL DEFAULT '{}';
