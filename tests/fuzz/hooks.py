"""Schemathesis hooks for tests/e2e/fuzz.test.mjs: the checks "a rejected request changes nothing",
"an error names no storage" and (with SA_FUZZ_SECRETS) "nothing of another session is answered".

Before every call the stored state of the running Worker is fingerprinted: every SQLite database of
the Durable Objects (one per agent) and of local R2, table by table, read from the persist
directory that Miniflare writes (SA_FUZZ_STATE_DIR). After a call answered 4xx, the fingerprints
must be the same: no row of any table appeared, changed or went away, and no R2 object. A database
that did not exist before (the first request to a new agent creates it and applies the schema) may
only hold its schema version rows.

Only files whose size or modification time changed are read again, so a call costs a few `stat`s
plus a read of the database it touched. Left out, with reason: `spill_garbage`, the list of R2
objects waiting for deletion, which the sweep after any non-GET request works off whatever that
request's outcome (housekeeping, not the request's effect); and `directory_report`, the agent's
mark for its directory report, which the work after an earlier answer (a turn's compaction or
extraction) writes when it ends, possibly while a later request is answered (bookkeeping of the
earlier request; a refused request itself leaves no mark: tests/e2e/directory.test.mjs).

An error's message never names the storage: no SQL, no table, column, index or trigger name (every
name with an underscore in the statements of migrations/*.sql, and SQLite's own phrases), the same
rule as the native and end-to-end suites.

With SA_FUZZ_SECRETS (texts separated by `|`), set when the fuzzer's token is limited to some
sessions: no answer of any status may contain one of them. They are stored in a session that
token does not open, as a message and as a conversation memory, so a search, a tool, a turn or an
export that reached past the token's sessions would show one (tests/e2e/fuzz-rig.mjs points the
generator at the token's session, the tools that search and words the secrets hold).

Loaded with SCHEMATHESIS_HOOKS=hooks and this directory on PYTHONPATH; run with one worker.
"""

import glob
import hashlib
import os
import re
import sqlite3

import schemathesis

STATE_DIR = os.environ.get("SA_FUZZ_STATE_DIR", "")
IGNORED_TABLES = {"spill_garbage", "directory_report"}
# What the object's alarm writes on its own, whatever request is being checked: a schedule an
# earlier request created (due a few seconds later) runs, records its run and moves its times.
# Its other columns still count (a refused PATCH changes none of them); a refused run by hand is
# checked by tests/e2e/schedules.test.mjs.
# The runtime's own record of when the alarm is set (`_cf_METADATA`) is re-set by every wake-up,
# and a fresh run records its model usage in the ledger under the session id `#schedule`.
ALARM_TABLES = {"schedule_runs", "maintenance", "_cf_METADATA"}
ALARM_COLUMNS = {"schedules": "id, name, prompt, kind, spec, session_id, reach, paused, created_at"}
ALARM_ROWS = {"usage_ledger": "session_id <> '#schedule'"}
# Tables that hold rows in a freshly migrated, empty agent database: the schema versions, and
# the structure records FTS5 writes when an index is created.
SCHEMA_TABLES = ("schema_version", "_fts_data", "_fts_config")

SECRETS = [t for t in os.environ.get("SA_FUZZ_SECRETS", "").split("|") if t]


def _storage_words():
    words = {"sqlite", "sql:", "constraint failed", "no such table", "no such column", "syntax error", "fts5", "rowid"}
    here = os.path.dirname(os.path.abspath(__file__))
    for path in glob.glob(os.path.join(here, "..", "..", "migrations", "*.sql")):
        with open(path, encoding="utf-8") as f:
            code = "\n".join(line.split("--")[0] for line in f.read().split("\n"))
        for w in re.split(r"[^A-Za-z0-9_]+", code):
            if "_" in w and w[:1].isalpha():
                words.add(w.lower())
    return sorted(words)


STORAGE_WORDS = _storage_words()

# path -> (stat signature, {table: digest})
_known = {}
# id(case) -> the fingerprints taken before its call (a Case takes no new attributes)
_before = {}


def _databases():
    for root in ("do", "r2"):
        base = os.path.join(STATE_DIR, root)
        for dirpath, _, files in os.walk(base):
            for name in files:
                if name.endswith(".sqlite") and name != "metadata.sqlite":
                    yield os.path.join(dirpath, name)


def _signature(path):
    parts = []
    for suffix in ("", "-wal"):
        try:
            st = os.stat(path + suffix)
            parts.append((st.st_size, st.st_mtime_ns))
        except FileNotFoundError:
            parts.append(None)
    return tuple(parts)


def _tables(path):
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=10)
    try:
        out = {}
        rows = con.execute("SELECT name, sql FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'")
        for name, sql in rows.fetchall():
            if name in IGNORED_TABLES or name in ALARM_TABLES or (sql or "").upper().startswith("CREATE VIRTUAL"):
                continue
            h = hashlib.sha256()
            columns = ALARM_COLUMNS.get(name, "*")
            rows = ALARM_ROWS.get(name)
            where = f" WHERE {rows}" if rows else ""
            for row in sorted(repr(r) for r in con.execute(f'SELECT {columns} FROM "{name}"{where}')):
                h.update(row.encode())
            out[name] = h.hexdigest()
        return out
    finally:
        con.close()


def _fingerprints():
    """Every database with its tables' digests, read again only where the files changed."""
    seen = {}
    for path in _databases():
        sig = _signature(path)
        known = _known.get(path)
        if known is None or known[0] != sig:
            try:
                known = (sig, _tables(path))
            except sqlite3.Error:
                continue  # being created right now: read at the next call
            _known[path] = known
        seen[path] = known[1]
    return seen


def _row_count(path, table):
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=10)
    try:
        return con.execute(f'SELECT count(*) FROM "{table}"').fetchone()[0]
    finally:
        con.close()


@schemathesis.hook
def before_call(context, case, kwargs):
    if STATE_DIR:
        _before[id(case)] = _fingerprints()


@schemathesis.check
def rejected_request_changes_nothing(ctx, response, case):
    before = _before.get(id(case))
    if before is None or not 400 <= response.status_code < 500:
        return None
    after = _fingerprints()
    changed = []
    for path, tables in after.items():
        old = before.get(path)
        # A database read while its object was still migrating (one transaction per version)
        # shows fewer tables than it has: it is judged as a new one, by its rows.
        if old is not None and set(old) < set(tables):
            old = None
        if old is None:
            changed += [f"{os.path.basename(path)}:{t}" for t in tables if not t.endswith(SCHEMA_TABLES) and _row_count(path, t)]
            continue
        changed += [f"{os.path.basename(path)}:{t}" for t in set(tables) | set(old) if tables.get(t) != old.get(t)]
    changed += [f"{os.path.basename(p)} (deleted)" for p in before if p not in after]
    if changed:
        raise AssertionError(
            f"a request answered {response.status_code} changed stored state: {', '.join(sorted(changed)[:8])}"
        )
    return None


@schemathesis.check
def errors_name_no_storage(ctx, response, case):
    if response.status_code < 400:
        return None
    text = response.text.lower()
    names = set(re.split(r"[^a-z0-9_]+", text))
    for w in STORAGE_WORDS:
        if (w in names) if "_" in w else (w in text):
            raise AssertionError(f"an error answer names the storage ({w!r}): {response.text[:300]}")
    return None


@schemathesis.check
def nothing_of_another_session(ctx, response, case):
    for secret in SECRETS:
        if secret in response.text:
            raise AssertionError(f"the answer holds {secret!r}, stored in a session the token does not open")
    return None
