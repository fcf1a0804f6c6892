-- 0015: memory spaces (crates/core/src/space/): memories and writable blocks shared by the
-- agents that serve one user. A space is a Durable Object of its own class (MemorySpace) over
-- this same schema: its memories are the memories tables; the tables below are new.

-- In an agent: the space an admin chose for it (PUT /agents/{agent}/space). space NULL: none,
-- whatever the rule says. No row: the rule of SESSION_CONFIG.memory.space decides.
CREATE TABLE space_choice (
  id     INTEGER PRIMARY KEY CHECK (id = 1),
  space  TEXT,
  set_at TEXT NOT NULL
);

-- In a space: its shared writable blocks. version counts the writes of a label (1 after the
-- first); a replace names the version it read and is refused when another write came first.
CREATE TABLE space_blocks (
  label      TEXT    PRIMARY KEY,
  content    TEXT    NOT NULL,
  version    INTEGER NOT NULL,
  updated_at TEXT    NOT NULL,
  updated_by TEXT
);

-- In an agent: the version of a shared block each session last read (its prompt, a read, its
-- own write); the model's replace carries it.
CREATE TABLE space_block_seen (
  session_id TEXT    NOT NULL,
  label      TEXT    NOT NULL,
  version    INTEGER NOT NULL,
  PRIMARY KEY (session_id, label)
);
