-- Objects being written for a message that is not committed yet (schema version 5). A key is
-- listed here, and committed, before its object is put in the store; the write's transaction
-- deletes it when the message's row takes it, and a write that stored nothing moves it to
-- spill_garbage. A key still listed when the Durable Object starts belongs to a write that a
-- crash cut short: it becomes garbage, so no crash leaks an object.
CREATE TABLE spill_pending (key TEXT PRIMARY KEY);
