"""Schemathesis hooks for tests/e2e/fuzz.test.mjs: the checks "a rejected request changes nothing",
"an error names no storage" and (with SA_FUZZ_SECRETS) "nothing of another session is answered".

Before every call the stored state of the running Worker is fingerprinted: every SQLite database of
the Durable Objects (one per agent) and of local R2, table by table, read from the persist
directory that Miniflare writes (SA_FUZZ_STATE_DIR). After a call answered 4xx, the fingerprints
must be the same: no row of any table appeared, changed or went away, and no R2 object. A database
that did not exist before (the first request to a new agent creates it and applies the schema) may
only hold its schema version rows.

Only files whose size or modification time changed are read again, so a call costs a few `stat`s
plus a read of the database it touched.

Background work writes too, whatever request is being checked: the alarm (a due schedule's run,
the memory consolidation, the directory report), the work after an earlier answer (the spill
sweep, a turn's compaction and memory extraction, the embeddings) and workerd itself (the alarm's
time). Two rules keep it out of the comparison, and nothing else is left out:
  - BACKGROUND lists, in one place, the tables (and columns) that only background work writes,
    each with the work that writes it; they are not compared. Every name must be a table (or
    column) the run has seen: the run fails on a name that is not (`unseen` in the tally).
  - Background work that writes what a request writes (a scheduled run's turn and usage row, a
    compaction, an extraction, a consolidation, an embedding) calls the model first, and its
    writes follow the model's answer within milliseconds; a refused request never calls it.
    So a refused call that changed something while the model was called, or had been called
    less than MODEL_QUIET_MS before it, is sent again (the same bytes: a refused request is
    refused again) once the model has been quiet that long, and judged by that second call;
    a change seen then while the model was called anyway (a schedule fell due) is let go.
    Waiting before every call instead cost the admin run ~85 s of 200 (each turn started by
    an accepted /v1 or /chat call makes the next call wait); the second call judges the same
    request as strictly. The tally counts the refused calls judged, the calls sent again, the
    changes let go (with their tables); tests/e2e/fuzz-rig.mjs prints it and fails a run that
    judged none.
A refused request that leaks a write is caught unless the model happened to be called during that
very call: the tally shows how often that was.

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

import atexit
import glob
import hashlib
import json
import os
import re
import sqlite3
import time

import requests
import schemathesis

STATE_DIR = os.environ.get("SA_FUZZ_STATE_DIR", "")
# Where the scripted model (tests/e2e/llm-server.mjs) keeps `{inFlight, lastMs}`: whether the
# Worker is calling it, and when it last did.
MODEL_ACTIVITY = os.environ.get("SA_FUZZ_MODEL_ACTIVITY", "")
# What background work writes that no request writes in its own transaction: table (or
# "table.column") -> the work that writes it. Left out of the comparison.
BACKGROUND = {
    "_cf_METADATA": "workerd's record of the object's alarm time: set again after an answer"
    " (Agent::arm, in the background) and when the alarm has run",
    "directory_report": "the agent's mark for its directory report, written by the work after an"
    " earlier answer when it ends and by the alarm that reports (a refused request leaves no"
    " mark: tests/e2e/directory.test.mjs)",
    "directory_entries": "the directory's shard, written by the reports the objects' alarms send",
    "spill_garbage": "the R2 objects waiting for deletion, which the sweep after any write works"
    " off, whatever request is being answered",
    "maintenance": "when the alarm's memory consolidation last ran",
    "schedule_runs": "a due schedule's run, claimed by the alarm (a refused run by hand:"
    " tests/e2e/schedules.test.mjs)",
    "schedules.next_run_at": "moved by the alarm when it claims a due schedule's run",
    "schedules.last_run_at": "set by the alarm when it claims a due schedule's run",
    "vectors": "the embeddings, made after the answer that wrote their rows",
    "vector_log": "every write of `vectors` (a trigger)",
    "unembedded": "the rows waiting for their vector: filled by triggers from the rows compared"
    " here, emptied by the embedding work",
    "embedding_model": "the embeddings model in use, set when the object starts",
}
BACKGROUND_TABLES = {k for k in BACKGROUND if "." not in k}
BACKGROUND_COLUMNS = {}
for _k in BACKGROUND:
    if "." in _k:
        _t, _c = _k.split(".", 1)
        BACKGROUND_COLUMNS.setdefault(_t, set()).add(_c)
# The writes of background work land within milliseconds of its model's answer (half a second
# covers a loaded machine): a refused call that changed something this soon after a model call is
# sent again once the model has been quiet this long.
MODEL_QUIET_MS = 500
# Tables that hold rows in a freshly migrated, empty agent database: the schema versions, and
# the structure records FTS5 writes when an index is created.
SCHEMA_TABLES = ("schema_version", "_fts_data", "_fts_config")

# What the check did, written to SA_FUZZ_STATE_DIR/state-check.json at exit for fuzz-rig.mjs:
# refused calls judged, changes let go (the model was called meanwhile) and their tables, and the
# names of BACKGROUND no database of the run had (a name that is not a table or column: a mistake).
_tally = {"judged": 0, "sent_again": 0, "model_busy": 0, "model_busy_tables": [], "waited_ms": 0}
_seen = set()


def _write_tally():
    if STATE_DIR:
        unseen = sorted(set(BACKGROUND) - _seen)
        with open(os.path.join(STATE_DIR, "state-check.json"), "w", encoding="utf-8") as f:
            json.dump({**_tally, "unseen": unseen}, f)


atexit.register(_write_tally)

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
            if name in BACKGROUND_TABLES:
                _seen.add(name)
                continue
            if (sql or "").upper().startswith("CREATE VIRTUAL"):
                continue
            columns = [c[1] for c in con.execute(f'PRAGMA table_info("{name}")')]
            left_out = BACKGROUND_COLUMNS.get(name, set())
            _seen.update(f"{name}.{c}" for c in left_out.intersection(columns))
            listed = ", ".join(f'"{c}"' for c in columns if c not in left_out)
            h = hashlib.sha256()
            for row in sorted(repr(r) for r in con.execute(f'SELECT {listed} FROM "{name}"')):
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


def _model_activity():
    """The scripted model's `{inFlight, lastMs}` (none yet: quiet since ever)."""
    try:
        with open(MODEL_ACTIVITY, encoding="utf-8") as f:
            return json.load(f)
    except FileNotFoundError:
        return {"inFlight": 0, "lastMs": 0}


def _wait_for_quiet_model():
    """Waits (at most 30 s) until no model call is going and the last ended MODEL_QUIET_MS ago."""
    start = time.time()
    while time.time() < start + 30:
        model = _model_activity()
        quiet_for = time.time() * 1000 - model["lastMs"]
        if model["inFlight"] == 0 and quiet_for >= MODEL_QUIET_MS:
            break
        time.sleep(max(0.01, (MODEL_QUIET_MS - quiet_for) / 1000) if model["inFlight"] == 0 else 0.02)
    _tally["waited_ms"] += round((time.time() - start) * 1000)


@schemathesis.hook
def before_call(context, case, kwargs):
    if STATE_DIR:
        _before[id(case)] = (time.time() * 1000, _fingerprints())


def _changes(before, after):
    """What differs between two fingerprints: `file:table` names."""
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
    return changed


def _model_called_since(ms):
    model = _model_activity()
    return model["inFlight"] > 0 or model["lastMs"] >= ms


def _let_go(changed):
    _tally["model_busy"] += 1
    _tally["model_busy_tables"] = sorted(set(_tally["model_busy_tables"]) | {c.split(":")[-1] for c in changed})


@schemathesis.check
def rejected_request_changes_nothing(ctx, response, case):
    began, before = _before.pop(id(case), (None, None))
    if before is None or not 400 <= response.status_code < 500:
        return None
    changed = _changes(before, _fingerprints())
    if changed and MODEL_ACTIVITY and _model_called_since(began - MODEL_QUIET_MS):
        # Background work that follows a model call may have written meanwhile: the same request
        # again, once the model is quiet, judged alone.
        _tally["sent_again"] += 1
        _wait_for_quiet_model()
        began, before = time.time() * 1000, _fingerprints()
        with requests.Session() as http:
            again = http.send(response.request.copy(), timeout=60)
        if not 400 <= again.status_code < 500:
            # Refused once, not the second time (what it needed came meanwhile): not judged.
            _let_go(changed)
            return None
        changed = _changes(before, _fingerprints())
        # Asked after the reading: a model call that began before it is seen.
        if changed and _model_called_since(began):
            _let_go(changed)
            return None
    _tally["judged"] += 1
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
