-- 0007: access. Scoped tokens are verified by their signature, never looked up; the one stored
-- value is the agent's revocation time: every token issued before it is refused. The row is
-- written by the first revocation (or an erase), so an agent that never revoked stores nothing.
CREATE TABLE revocation (
  id        INTEGER PRIMARY KEY CHECK (id = 1),
  -- milliseconds since the Unix epoch: a token whose `iat` is earlier is revoked
  before_ms INTEGER NOT NULL
);
