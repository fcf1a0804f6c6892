-- 0016: the directory of agents and spaces (crates/core/src/directory/), and the usage ledger.
-- One schema for every Durable Object class: an agent leaves directory_entries empty, a
-- directory shard (AgentDirectory) leaves every other table empty.

-- A directory shard's rows: one per object (kind 'agent' or 'space', its name) that reported
-- holding data, with the figures of its last report. Listed in (name, kind) order.
CREATE TABLE directory_entries (
  kind           TEXT    NOT NULL CHECK (kind IN ('agent', 'space')),
  name           TEXT    NOT NULL,
  sessions       INTEGER NOT NULL,
  messages       INTEGER NOT NULL,
  memories       INTEGER NOT NULL,
  sqlite_bytes   INTEGER NOT NULL,
  r2_bytes       INTEGER NOT NULL,
  created_at     TEXT    NOT NULL,
  last_active_at TEXT    NOT NULL,
  reported_at    TEXT    NOT NULL,
  PRIMARY KEY (name, kind)
) WITHOUT ROWID;
CREATE INDEX directory_entries_active ON directory_entries (last_active_at);

-- An object's own report to its shard (one row): dirty_since (ms) is set by the first write
-- after a report and cleared by the report that follows; due_at (ms) is when the alarm sends
-- it (dirty_since + the report delay, or a retry's time); generation counts the writes, so a
-- report clears only what it saw. last_write is lastActiveAt, created_at the time the object
-- first reported holding data. name is the object's idFromName name, kept by the writes: an
-- object that the alarm wakes (after a restart) is not told its name.
CREATE TABLE directory_report (
  id          INTEGER PRIMARY KEY CHECK (id = 1),
  name        TEXT,
  dirty_since INTEGER,
  due_at      INTEGER,
  generation  INTEGER NOT NULL DEFAULT 0,
  last_write  TEXT,
  created_at  TEXT,
  reported_at TEXT
);

-- One row per turn that called the model (a stopped one and a scheduled run included), written
-- in the transaction that stores the turn: what GET /usage sums over a time range.
CREATE TABLE usage_ledger (
  seq           INTEGER PRIMARY KEY,
  at            TEXT    NOT NULL,
  session_id    TEXT    NOT NULL,
  model         TEXT    NOT NULL,
  input_tokens  INTEGER NOT NULL,
  output_tokens INTEGER NOT NULL,
  estimated     INTEGER NOT NULL
);
CREATE INDEX usage_ledger_at ON usage_ledger (at);
