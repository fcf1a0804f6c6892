-- 0018: what a scheduled run reads across sessions (crates/core/src/schedule/). A run in a
-- session stores its turn there, which that session's tokens read: reading every session, its
-- model could copy what was said in another session into this one (and this session's own
-- messages, in the run's context, could ask it to). So:
--   'session': the run reaches the sessions of the schedule only, as a token limited to them
--              would: its own session, or none for a run without one;
--   'agent':   every session of the agent, as the schedule says explicitly.
-- The default is 'session' for a schedule with a session (every such schedule takes it here:
-- it was 'agent' by accident) and 'agent' for one without (a fresh run stores nothing in a
-- session, and its reply is read by agent-wide tokens only, as it always did).
ALTER TABLE schedules ADD COLUMN reach TEXT NOT NULL DEFAULT 'session' CHECK (reach IN ('session', 'agent'));
UPDATE schedules SET reach = 'agent' WHERE session_id IS NULL;
