-- 0014: schedules, agent turns that run on their own (crates/core/src/schedule/), and what the
-- one Durable Object alarm keeps of its maintenance.

-- One schedule: kind 'at' (spec an ISO time, one-shot), 'every' (spec seconds) or 'cron' (spec
-- five fields, UTC). next_run_at is NULL once a one-shot ran (it stays listed); the alarm runs
-- every unpaused schedule whose next_run_at has come, in next_run_at order.
CREATE TABLE schedules (
  seq         INTEGER PRIMARY KEY AUTOINCREMENT,
  id          TEXT    NOT NULL UNIQUE,
  name        TEXT    NOT NULL,
  prompt      TEXT    NOT NULL,
  kind        TEXT    NOT NULL CHECK (kind IN ('at', 'every', 'cron')),
  spec        TEXT    NOT NULL,
  session_id  TEXT,
  paused      INTEGER NOT NULL DEFAULT 0,
  next_run_at TEXT,
  last_run_at TEXT,
  created_at  TEXT    NOT NULL
);
CREATE INDEX schedules_due ON schedules (paused, next_run_at);

-- One run of a schedule, recorded as started (status NULL) before its model call: an alarm
-- delivered again finds it and marks it failed instead of running the tick twice. The newest
-- runs of each schedule are kept (SESSION_CONFIG.schedules.maxRuns).
CREATE TABLE schedule_runs (
  seq         INTEGER PRIMARY KEY AUTOINCREMENT,
  id          TEXT    NOT NULL UNIQUE,
  schedule_id TEXT    NOT NULL,
  started_at  TEXT    NOT NULL,
  ended_at    TEXT,
  status      TEXT    CHECK (status IN ('ok', 'error')),
  reply       TEXT,
  usage       TEXT,
  error       TEXT
);
CREATE INDEX schedule_runs_of ON schedule_runs (schedule_id, seq);

-- The alarm's maintenance: when each kind of work was last done (kind 'consolidate': the
-- sleep-time consolidation of memories, SESSION_CONFIG.memory.maintenance).
CREATE TABLE maintenance (
  kind    TEXT PRIMARY KEY,
  last_at TEXT NOT NULL
) WITHOUT ROWID;
