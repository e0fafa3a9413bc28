"""The audit store in a PostgreSQL database (`--db postgresql://...`, psycopg 3): a back-end of
the store's contract (audit/store.py: the tables, rows, row chain and methods; open_store() opens
this one for a URL), reached over libpq (audit/store_pg_connection.py).

What differs, and why:
- Many writers at once (one `sabot serve` per pit, each with its shoes), one validator per shoe:
  each Validator claims its shoe with a session-level advisory lock, held for as long as its
  writer's connection lives (a crashed writer's claims go with its connection). The row chain is
  one sequence for the whole database: a batch's commit takes a transaction-level advisory lock,
  reads the chain's head and the tables' newest ids inside it, and only then numbers, hashes and
  inserts its rows, so concurrent commits are put in one order and every row follows the one
  before it, whoever wrote that one. The lock is held for one batch's inserts (a millisecond or
  two), never across a read from a shoe.
- Append-only by a trigger function that refuses UPDATE, DELETE and TRUNCATE on every table,
  enabled ALWAYS: it fires on a streaming or logical replica's replayed rows too
  (session_replication_role = replica does not switch it off). `audit verify` checks every
  trigger's definition, its enabled state and the function's body, so a trigger dropped,
  disabled or emptied is found.
- A batch is one transaction committed with synchronous_commit as the server has it (on by
  default: the commit is on disk, and on a synchronous standby when one is configured, before
  the validator acknowledges anything).
- Integers are BIGINT (a shoe id is 32 bits unsigned), blobs BYTEA, times DOUBLE PRECISION:
  read back they are the same Python values, so every row hash is computed alike on both.
- Losing the server is waited out (streaming replication's failover, docs/FLOOR.md): libpq tries
  every host of a multi-host URL (`target_session_attrs=read-write` finds the one that is now
  the primary); the connection's session state (its settings, the shoes it claimed) is made
  again on the new one. A read is tried again there; a batch whose COMMIT got no answer is in
  doubt until the new primary says whether its last row is there: found, it was committed (a
  synchronous standby had it); not found, it is numbered again after the chain's head as it now
  stands and written. Either way it is stored once, and acknowledged only after.
The password of a URL is never printed: errors name the URL without it."""

from __future__ import annotations

import contextlib
import hashlib
import re
import threading
import time
from collections.abc import Sequence
from typing import Any

import psycopg
import psycopg.sql

from sabot.audit import store_pg_health
from sabot.audit.store import (
    COLUMNS,
    GENESIS,
    INDEXES,
    SCHEMA_VERSION,
    AuditStore,
    not_this_schema,
    row_hash,
    table_sql,
)
from sabot.audit.store_pg_connection import Connection, shown_url
from sabot.audit.store_pg_health import shoe_key, short_reason
from sabot.errors import SabotError

FUNCTION = "sabot_append_only"
# advisory lock keys (a name's hash, not a magic number): the chain's, held for each commit, and
# one per shoe, held by the writer validating it
LOCK_KEY = int.from_bytes(hashlib.sha256(b"sabot audit chain").digest()[:8], "big", signed=True)
CLAIM_GRACE = 2.0  # seconds a shoe's claim is asked for again while another connection holds it


_PG_TYPES = {"REAL": "DOUBLE PRECISION", "BLOB": "BYTEA", "INTEGER": "BIGINT", "TEXT": "TEXT"}


def _pg_type(sqlite_type: str) -> str:
    first, _, rest = sqlite_type.partition(" ")
    return f"{_PG_TYPES[first]} {rest}".strip()


def pg_table_sql(name: str) -> str:
    return table_sql(name, _pg_type)


FUNCTION_SQL = (f"CREATE OR REPLACE FUNCTION {FUNCTION}() RETURNS trigger LANGUAGE plpgsql AS "
                "$body$ BEGIN RAISE EXCEPTION 'the audit log is append-only'; END $body$")
# name -> (table, when): one trigger per table and operation
TRIGGER_ON = {f"{t}_append_only_{op}": (t, op) for t in COLUMNS for op in ("u", "d", "t")}
_WHEN = {"u": "BEFORE UPDATE ON {t} FOR EACH ROW", "d": "BEFORE DELETE ON {t} FOR EACH ROW",
         "t": "BEFORE TRUNCATE ON {t} FOR EACH STATEMENT"}


# Row security per pit, on every table: a role named in pit_shoes (sabot pit-role) inserts rows
# of its own shoes only (and rows naming no shoe: a frame too damaged to name one), and no row of
# a table whose rows name none (meta: a second schema row would fail every pit's audit verify);
# a role named there for no shoe, IT's and the owner's are not held to it. Every role reads every
# row: each writer numbers its rows after the whole chain's head.
PIT_SHOES = "pit_shoes"
PIT_SHOES_SQL = f"CREATE TABLE {PIT_SHOES} (shoe_id BIGINT PRIMARY KEY, role TEXT NOT NULL)"
SHOE_TABLES = tuple(t for t, cols in COLUMNS.items() if "shoe_id" in cols)
_NO_PIT = f"NOT EXISTS (SELECT 1 FROM {PIT_SHOES} p WHERE p.role = CURRENT_USER::text)"


def _insert_check(table: str) -> str:
    if table not in SHOE_TABLES:
        return _NO_PIT
    return (f"shoe_id IS NULL OR {_NO_PIT} OR EXISTS (SELECT 1 FROM {PIT_SHOES} p WHERE "
            f"p.role = CURRENT_USER::text AND p.shoe_id = {table}.shoe_id)")


def policy_sql(table: str) -> list[str]:
    return [f"CREATE POLICY {table}_read ON {table} FOR SELECT USING (true)",
            f"CREATE POLICY {table}_pit ON {table} FOR INSERT WITH CHECK "
            f"({_insert_check(table)})",
            f"ALTER TABLE {table} ENABLE ROW LEVEL SECURITY"]


def _policy_text(command: str, using: str | None, check: str | None) -> str:
    """A policy as the catalog gives it back, its expressions' parentheses, spaces and case
    left out (the server's deparser adds its own)."""
    def bare(expr: str | None) -> str:
        return "" if expr is None else re.sub(r"[\s()]", "", expr).lower()
    return f"for {command} using {bare(using)} check {bare(check)}"


def _table_kind(kind: str, rules: int, children: int, secured: bool) -> str:
    return (f"pg_class.relkind {kind}, {rules} rules, {children} tables inheriting from it, "
            f"row security {'on' if secured else 'off'}")


def trigger_sql(name: str) -> str:
    table, op = TRIGGER_ON[name]
    return (f"CREATE TRIGGER {name} {_WHEN[op].format(t=table)} EXECUTE FUNCTION "
            f"{FUNCTION}()")



class PgAuditStore(AuditStore):
    """The store in a server's database: many writers, one per shoe (module docstring)."""

    db: Connection
    ERRORS = (psycopg.Error,)
    # a constraint, the pits' row security, a trigger's exception, a value the server takes
    # for no text: that row, not the server
    ROW_ERRORS = (psycopg.errors.IntegrityError, psycopg.errors.InsufficientPrivilege,
                  psycopg.errors.RaiseException, psycopg.errors.DataError)
    # the advisory lock makes this the database's one writer; READ COMMITTED whatever the
    # database's default, so the head read after the lock sees the batch committed before it
    # (under REPEATABLE READ the snapshot predates the lock: two writers number the same rows)
    BEGIN_WRITE = "BEGIN ISOLATION LEVEL READ COMMITTED"
    BEGIN_SNAPSHOT = "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"

    def __init__(self, path: str, durable: bool = True, writer: bool = True,
                 name: str = "sabot") -> None:
        super().__init__(shown_url(str(path)), writer)  # path: what lines print
        self.url = str(path)
        self._attempt: tuple[str, int, bytes] | None = None  # the batch being written: last row
        try:
            self.db = Connection(self.url, self.path, name)
            self.schema = self.db.schema  # the store's, its catalog queries' (not search_path's)
        except psycopg.Error as e:
            raise SabotError(f"audit database {self.path}: cannot connect "
                             f"({self._reason(e)})") from None
        try:
            # what the floor shows as this writer's (validators()): pg_stat_activity's column
            self.db.keep("SELECT set_config('application_name', ?, false)", (name[:63],))
            if writer:
                if not durable:
                    self.db.keep("SET synchronous_commit = off")
                elif self.db.execute("SHOW synchronous_commit").fetchone()[0] in ("off",
                                                                                  "local"):
                    # a database's setting an insider lowered: an acknowledged frame is on
                    # disk, and on the synchronous standby where there is one, whatever it says
                    self.db.keep("SET synchronous_commit = on")
                self._create()
            else:
                # a reader (the pages) does not wait for a lost server: it says so at once and
                # tries again at its next read; the writers say what happens
                self.db.say, self.db.patience = None, 0.0
                self.db.keep("SET default_transaction_read_only = on")
                self._check_schema(must_exist=True)
            self.head_no, self.head_hash = self._chain_head()
        except psycopg.Error as e:
            self.close()
            raise SabotError(f"audit database {self.path}: {self._reason(e)}") from None
        except SabotError:
            self.close()
            raise

    def _reason(self, e: BaseException) -> str:
        return short_reason(e)

    def _check_schema(self, must_exist: bool = False) -> set[str]:
        have = self.tables()
        if not have and must_exist:
            raise SabotError(f"no audit database at {self.path} (no sabot tables)")
        if have and "meta" not in have:
            raise SabotError(f"{self.path} is not a sabot audit database (its tables are another "
                             "program's): a validator writes only its own store")
        if have:
            row = self.db.execute("SELECT value FROM meta WHERE name='schema'").fetchone()
            if not row or row[0] != SCHEMA_VERSION:
                raise SabotError(not_this_schema(self.path, row and row[0]))
        return have

    def claim(self, shoe_id: int) -> None:
        """One validator per shoe in the whole database: a second writer validating the same
        shoe would acknowledge its frames twice over. A validator that has just stopped may hold
        its claim a moment longer (its server ends the session after the client has hung up, as
        soon as it gets to it): asked again for CLAIM_GRACE seconds before it is refused."""
        if not self.writer:
            return
        end = time.monotonic() + CLAIM_GRACE
        claim = ("SELECT pg_try_advisory_lock(?)", (shoe_key(shoe_id),))
        while True:
            try:
                got = self.db.execute(*claim).fetchone()[0]
            except psycopg.Error as e:
                raise SabotError(f"audit database {self.path}: {self._reason(e)}") from None
            if got:  # this writer's: claimed again on every new connection
                self.db.setup.append((*claim, True))
                return
            if time.monotonic() >= end:
                raise SabotError(f"shoe {shoe_id:#010x} is being validated into {self.path} by "
                                 f"{self._holder(shoe_id)}: one validator per shoe (stop that "
                                 "one first)")
            time.sleep(0.05)

    def _holder(self, shoe_id: int) -> str:
        return store_pg_health.holder(self, shoe_id)

    def stall_cause(self, wait: float = 2.0) -> str:
        return store_pg_health.stall_cause(self, wait)

    def stalled_writers(self, bound: float) -> dict[str, tuple[float, str]]:
        return store_pg_health.stalled_writers(self, bound)

    def validators(self, shoe_ids: Sequence[int]) -> dict[int, str] | None:
        """The shoes claimed now (claim(): an advisory lock held by a live connection), each
        with the name its writer's connection gives (its application_name)."""
        with self._reading():
            held = self.db.execute(
                "SELECT l.classid, l.objid, a.application_name FROM pg_locks l"
                " JOIN pg_stat_activity a ON a.pid = l.pid"
                " WHERE l.locktype = 'advisory' AND l.objsubid = 1 AND l.granted"
                " AND l.database = (SELECT oid FROM pg_database"
                " WHERE datname = current_database())", ()).fetchall()
        by_key = {(int(c) << 32) | int(o): name for c, o, name in held}
        out = {}
        for sid in shoe_ids:
            key = shoe_key(sid) & 0xFFFF_FFFF_FFFF_FFFF  # as the lock's two unsigned halves
            if key in by_key:
                out[sid] = by_key[key]
        return out

    def wait_only_until(self, stopping: threading.Event) -> None:
        self.db.stopping = stopping

    def assign_pit(self, role: str, shoe_ids: Sequence[int]) -> None:
        """Row security per pit: the database role `role` may insert rows of these shoes only
        (each shoe moved from any pit it was with) and read every row; its grants: SELECT on
        the store's tables, INSERT on those whose rows name a shoe (never on meta or pit_shoes;
        never UPDATE, DELETE or TRUNCATE). A role named in pit_shoes for no shoe is held to
        none (the policy's words for IT's), so a pit is never left so: one given no shoe is
        refused, and one whose last shoe moves to another pit loses its INSERT. A table of a
        store made before it had row security is given its policies here."""
        if not shoe_ids:
            raise SabotError(f"no shoe named for role {role!r}: a role with no shoe in "
                             f"{PIT_SHOES} could insert every shoe's rows")
        try:
            if not self.db.execute("SELECT 1 FROM pg_roles WHERE rolname = ?", (role,)
                                   ).fetchone():
                raise SabotError(f"no database role {role!r} on {self.path}: make it first "
                                 f"(CREATE ROLE {role} LOGIN PASSWORD '...')")
            ident = psycopg.sql.Identifier(role).as_string(self.db.con)
            self.db.execute(self.BEGIN_WRITE)
            self.db.execute(f"GRANT SELECT ON {', '.join((*COLUMNS, PIT_SHOES))} TO {ident}")
            self.db.execute(f"GRANT INSERT ON {', '.join(SHOE_TABLES)} TO {ident}")
            shoeless = [t for t in COLUMNS if t not in SHOE_TABLES]
            self.db.execute(f"REVOKE INSERT ON {', '.join(shoeless)} FROM {ident}")
            secured = {t for (t,) in self.db.execute(
                "SELECT c.relname FROM pg_policy p JOIN pg_class c ON c.oid = p.polrelid"
                " JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = ?"
                " AND p.polname = c.relname || '_pit'", (self.schema,)).fetchall()}
            for table in COLUMNS:
                if table not in secured:
                    for sql in policy_sql(table):
                        self.db.execute(sql)
            moved_from = {r for (r,) in self.db.execute(
                f"SELECT DISTINCT role FROM {PIT_SHOES} WHERE shoe_id = ANY(?) AND role <> ?",
                (list(shoe_ids), role)).fetchall()}
            for sid in shoe_ids:
                self.db.execute(f"INSERT INTO {PIT_SHOES} (shoe_id, role) VALUES (?, ?)"
                                " ON CONFLICT (shoe_id) DO UPDATE SET role = EXCLUDED.role",
                                (sid, role))
            for pit in sorted(moved_from):
                if self.db.execute(f"SELECT 1 FROM {PIT_SHOES} WHERE role = ?", (pit,)
                                   ).fetchone() or not self.db.execute(
                        "SELECT 1 FROM pg_roles WHERE rolname = ?", (pit,)).fetchone():
                    continue
                left = psycopg.sql.Identifier(pit).as_string(self.db.con)
                self.db.execute(f"REVOKE INSERT ON {', '.join(COLUMNS)} FROM {left}")
            self.db.execute("COMMIT")
        except psycopg.Error as e:
            with contextlib.suppress(psycopg.Error):
                self.db.execute("ROLLBACK")
            raise SabotError(f"audit database {self.path}: {self._reason(e)}") from None

    def pits(self) -> dict[int, str]:
        """shoe id -> the role that alone inserts its rows (assign_pit)."""
        with self._reading():
            return {int(sid): role for sid, role in self.db.execute(
                f"SELECT shoe_id, role FROM {PIT_SHOES}", ()).fetchall()}

    def _create(self) -> None:
        if self._check_schema():
            return
        self.db.execute(self.BEGIN_WRITE)
        self.db.execute("SELECT pg_advisory_xact_lock(?)", (LOCK_KEY,))  # one writer makes them
        if self.tables():  # another writer made them first
            self.db.execute("COMMIT")
            self._check_schema()
            return
        self.created = True
        for t in COLUMNS:
            self.db.execute(pg_table_sql(t))
        for sql in INDEXES:
            self.db.execute(sql)
        self.db.execute(FUNCTION_SQL)
        for name, (table, _) in TRIGGER_ON.items():
            self.db.execute(trigger_sql(name))
            # ALWAYS: it fires on replicated rows too (session_replication_role = replica)
            self.db.execute(f"ALTER TABLE {table} ENABLE ALWAYS TRIGGER {name}")
        self.db.execute(PIT_SHOES_SQL)
        for table in COLUMNS:
            for sql in policy_sql(table):
                self.db.execute(sql)
        # the schema row in the same transaction: no other writer ever sees the tables without it
        schema = ("schema", SCHEMA_VERSION)
        head = row_hash(GENESIS, "meta", 1, 1, schema)
        self.db.execute("INSERT INTO meta (id, chain_no, name, value, row_hash)"
                        " VALUES (1, 1, ?, ?, ?)", (*schema, head))
        self.db.execute("COMMIT")
        self.head_no, self.head_hash = 1, head

    # ---- what the database says of itself ------------------------------------------------
    def tables(self) -> set[str]:
        with self._reading():
            return {r[0] for r in self.db.execute(
                "SELECT table_name FROM information_schema.tables"
                " WHERE table_schema = ?", (self.schema,))}

    def triggers(self) -> dict[str, str]:
        """name -> each trigger's definition and whether it fires always (A), on the primary
        only (O), on replicas only (R) or never (D); and the function's own body."""
        with self._reading():
            rows = self.db.execute(
                "SELECT t.tgname, pg_get_triggerdef(t.oid), t.tgenabled FROM pg_trigger t"
                " JOIN pg_class c ON c.oid = t.tgrelid JOIN pg_namespace n"
                " ON n.oid = c.relnamespace WHERE NOT t.tgisinternal"
                " AND n.nspname = ?", (self.schema,)).fetchall()
            body = self.db.execute(
                "SELECT p.prosrc FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace"
                " WHERE p.proname = ? AND p.pronargs = 0 AND n.nspname = ?",
                (FUNCTION, self.schema)).fetchall()
            # each table an ordinary table, nothing between it and its rows: a view, a foreign
            # or partitioned table, a table inheriting rows or a rule could answer audit verify's
            # reads otherwise than every other reader's
            tables = self.db.execute(
                "SELECT c.relname, c.relkind, c.relrowsecurity,"
                " (SELECT COUNT(*) FROM pg_inherits i WHERE i.inhparent = c.oid),"
                " (SELECT COUNT(*) FROM pg_rewrite r WHERE r.ev_class = c.oid)"
                " FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
                " WHERE n.nspname = ? AND c.relname = ANY(?)",
                (self.schema, list(COLUMNS))).fetchall()
            policies = self.db.execute(
                "SELECT c.relname, p.polname, p.polcmd, p.polpermissive, p.polroles = '{0}',"
                " pg_get_expr(p.polqual, p.polrelid), pg_get_expr(p.polwithcheck, p.polrelid)"
                " FROM pg_policy p JOIN pg_class c ON c.oid = p.polrelid JOIN pg_namespace n"
                " ON n.oid = c.relnamespace WHERE n.nspname = ?", (self.schema,)).fetchall()
        out = {name: f"{definition} [{enabled}]" for name, definition, enabled in rows}
        commands = {"r": "select", "a": "insert", "w": "update", "d": "delete", "*": "all"}
        for table, name, cmd, permissive, public, using, check in policies:
            out[f"policy {name} on {table}"] = (
                _policy_text(commands.get(cmd, cmd), using, check)
                + ("" if permissive and public else " (restrictive or for some roles)"))
        for name, kind, secured, children, rules in tables:
            out[f"table {name}"] = _table_kind(kind, rules, children, secured)
        for (src,) in body:
            out[f"function {FUNCTION}"] = src
        return out

    def expected_triggers(self) -> dict[str, str]:
        schema = self.schema
        out = {}
        for name, (table, op) in TRIGGER_ON.items():
            out[name] = (f"CREATE TRIGGER {name} {_WHEN[op].format(t=f'{schema}.{table}')} "
                         f"EXECUTE FUNCTION {FUNCTION}() [A]")
        out[f"function {FUNCTION}"] = " BEGIN RAISE EXCEPTION 'the audit log is append-only'; END "
        for table in COLUMNS:
            out[f"table {table}"] = _table_kind("r", 0, 0, True)
            out[f"policy {table}_read on {table}"] = _policy_text("select", "true", None)
            out[f"policy {table}_pit on {table}"] = _policy_text("insert", None,
                                                                 _insert_check(table))
        return out

    # ---- writing: the chain's head read under its lock, at each commit ---------------------
    def begin(self) -> None:
        try:
            super().begin()
        except psycopg.Error as e:  # the server away for longer than RECONNECT_S
            raise self._refused(e) from None

    def commit(self) -> None:
        """AuditStore.commit, and a server lost under it waited out (see the module's words):
        the batch is stored once whichever server answers next, or refused in one line when
        none does in time (RECONNECT_S, and for a batch in doubt, for as long as it takes: what
        it was must be known before anything more is written)."""
        in_doubt = False
        while True:
            self._attempt = None
            try:
                no, prev, next_id = self._write()
                break
            except psycopg.Error as e:
                if not self.db.lost():
                    raise self._refused(e) from None
                error = e
            # the server went away: this batch's COMMIT may have reached it
            in_doubt = in_doubt or self._attempt is not None
            try:
                self.db.reconnect(None if not in_doubt else float("inf"))
            except psycopg.Error:
                if not in_doubt:  # nothing of it reached the server
                    raise self._refused(error) from None
                self.rollback()  # stopped first: the next writer to open the store knows
                raise SabotError(f"audit database {self.path}: lost as a read was committed, "
                                 "and stopped before it came back; nothing of the read was "
                                 "acknowledged, and the store says at its next opening whether "
                                 "it holds it") from None
            except SabotError:
                self.rollback()
                raise
            if self._attempt is not None and self._landed(*self._attempt):
                no, prev = self._attempt[1:]
                next_id = {}
                break
            # not there: numbered again after the head as the new server has it
        self._written(no, prev, next_id)

    def _landed(self, table: str, no: int, row_hash: bytes) -> bool:
        """Whether the batch whose last row is `table`'s row `no` with this hash is stored."""
        row = self.db.execute(f"SELECT row_hash FROM {table} WHERE chain_no = ?",
                              (no,)).fetchone()
        return row is not None and bytes(row[0]) == row_hash

    def _numbered(self) -> tuple[int, bytes, dict[str, list[tuple[Any, ...]]], dict[str, int]]:
        """The batch's rows numbered after the chain's head as it stands now, under the chain's
        lock (another writer's rows may have come since this writer's last batch): frames keep
        the order the validator gave them, their ids (and the frame ids this batch's records and
        alarms name) moved up past the newest frame stored."""
        self.db.execute("SELECT pg_advisory_xact_lock(?)", (LOCK_KEY,))
        no, prev = self._chain_head()
        ids = {t: self._max_id(t) for t in {t for t, _ in self._pending}}
        fids = [v[-1] for t, v in self._pending if t == "frames"]
        first = min(fids) if fids else 0
        shift = ids["frames"] + 1 - first if fids else 0
        rows: dict[str, list[tuple[Any, ...]]] = {}
        for table, values in self._pending:
            no += 1
            cols = COLUMNS[table]
            vals = list(values[: len(cols)])
            if table == "frames":
                rid = values[-1] + shift
            else:
                ids[table] += 1
                rid = ids[table]
                if table in ("records", "alarms") and vals[0] is not None and fids \
                        and vals[0] >= first:
                    vals[0] += shift  # the frame of this batch it names, where it went
            prev = row_hash(prev, table, no, rid, vals)
            rows.setdefault(table, []).append((rid, no, *vals, prev))
        self._next_frame_id = None  # asked again at the next batch: other writers store frames
        self._attempt = (self._pending[-1][0], no, prev) if self._pending else None
        return no, prev, rows, {}

    def discard_if_unused(self) -> None:
        """Close; the tables this run created go again when nobody stored anything in them (its
        schema row aside), checked under the chain's lock."""
        if self.created and not self._pending:
            with contextlib.suppress(psycopg.Error):
                self.db.execute("BEGIN")
                self.db.execute("SELECT pg_advisory_xact_lock(?)", (LOCK_KEY,))
                rows = sum(self.db.execute(f"SELECT COUNT(*) FROM {t}", ()).fetchone()[0]
                           for t in COLUMNS)
                if rows <= 1:
                    self.db.execute("DROP TABLE " + ", ".join((*COLUMNS, PIT_SHOES))
                                    + f"; DROP FUNCTION {FUNCTION}()")
                self.db.execute("COMMIT")
        self.close()

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.db.close()


def refuse_unwritable_url(url: str) -> None:
    """refuse_unwritable for a server's database: it answers, it is empty or a sabot store of
    this schema (other writers may write it: each claims its own shoes); nothing created or
    changed."""
    shown = shown_url(url)
    try:
        con = Connection(url)
    except psycopg.Error as e:
        raise SabotError(f"audit database {shown}: cannot connect ({short_reason(e)})") from None
    try:
        have = {r[0] for r in con.execute(
            "SELECT table_name FROM information_schema.tables"
            " WHERE table_schema = ?", (con.schema,))}
        if have and "meta" not in have:
            raise SabotError(f"{shown} is not a sabot audit database (its tables are another "
                             "program's): a validator writes only its own store")
        if have:
            row = con.execute("SELECT value FROM meta WHERE name='schema'", ()).fetchone()
            if not row or row[0] != SCHEMA_VERSION:
                raise SabotError(not_this_schema(shown, row and row[0]))
    except psycopg.Error as e:
        raise SabotError(f"audit database {shown}: {short_reason(e)}") from None
    finally:
        con.close()  # and with it the lock taken here
