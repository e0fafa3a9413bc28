"""Who may operate the pit from `sabot serve`: operator accounts, their sessions and the limit on
login attempts.

An accounts file (`--accounts FILE`, JSON, mode 0600, written by `sabot accounts add`) holds each
operator's name, role and password hash (argon2id, argon2-cffi's defaults: RFC 9106's second
recommended profile); never a password. Roles: a `dealer` sees the pit (logging in changes
nothing); a `supervisor` also resolves a held table's irregularity and starts its next shoe; `it`
sees the operator log, and operates no table. A session is a random token in an HttpOnly,
SameSite=Strict cookie, held in serve's memory only (a restart logs everyone out), with its own
CSRF token that every form and API call must carry. serve reads the file again whenever it has
changed (one stat at each login and each request of a session): an account added, changed (its
role or password) or removed takes effect at once, and a session of an account changed or removed
since its login ends at its next request. Failed logins are limited per account name
and per client address (counted when a check begins: a burst sent at once gets no more tries), so
guessing a password takes years, not minutes; a burst of logins takes at most HASHING checks at a
time, beside the tables' operations, which have their own thread."""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import threading
import time
from dataclasses import dataclass
from typing import Any

from sabot.errors import SabotError, parse_json
from sabot.protocol import BY_LEN

ROLES = ("dealer", "supervisor", "it")
OPERATE = frozenset({"supervisor"})  # the roles that resolve and start shoes
SEE_LOG = frozenset({"supervisor", "it"})  # the roles that read the operator log
NAME_MAX = BY_LEN  # as a signed maintenance command's `by`: one name everywhere
SESSION_S = 8 * 3600  # a session lasts one shift at most
IDLE_S = 30 * 60  # and ends after half an hour without a request
FAILURES = 5  # failed logins allowed per window, per account name and per client address
HASHING = 2  # password checks at once (each argon2id check is 64 MiB and a core for ~0.1 s)
WINDOW_S = 15 * 60


def name_problem(name: object) -> str | None:
    if (not isinstance(name, str) or not 1 <= len(name) <= NAME_MAX or not name.isascii()
            or not name.isprintable() or name != name.strip()):
        return (f"an account name is 1 to {NAME_MAX} printable ASCII characters, no space at "
                "either end (the operator log names it with each command it gives)")
    return None


def _hasher() -> Any:
    from argon2 import PasswordHasher

    return PasswordHasher()


class Accounts:
    """The accounts file: {"accounts": [{"name", "role", "hash"}]}."""

    def __init__(self, path: str, users: dict[str, dict[str, str]],
                 seen: tuple[int, ...] | None = None) -> None:
        self.path = path
        self.users = users
        self._seen = seen  # the file's stat when `users` was read (fresh() reads it again)
        self._lock = threading.Lock()
        self._dummy = ""  # a hash to verify against for an unknown name (the same time taken)

    @classmethod
    def load(cls, path: str, must_exist: bool = True) -> Accounts:
        seen = _stat(path)
        if seen is None:
            if must_exist:
                raise SabotError(f"no accounts file {path} (sabot accounts add --accounts "
                                 f"{path} --name NAME --role supervisor creates it)")
            return cls(path, {})
        return cls(path, _read(path), seen)

    def fresh(self) -> dict[str, dict[str, str]]:
        """The accounts as the file has them now: read again when its stat differs from the
        last read's. A file gone or no longer valid is no account at all (nobody logs in until
        it is mended: said on standard error once)."""
        seen = _stat(self.path)
        with self._lock:
            if seen != self._seen:
                self._seen = seen
                try:
                    if seen is None:
                        raise SabotError(f"accounts file {self.path} is gone")
                    self.users = _read(self.path)
                except SabotError as e:
                    from sabot.service import log

                    self.users = {}
                    log(f"{e}: nobody may log in until it is mended", "error", "serve")
            return self.users

    def holds(self, name: str, role: str, hash_: str) -> bool:
        """Whether the account is still `name` with this role and password hash."""
        user = self.fresh().get(name)
        return user is not None and user["role"] == role and user["hash"] == hash_

    def save(self) -> None:
        """Written whole, then renamed over the old file (never half a file), mode 0600."""
        doc = {"accounts": [{"name": n, **u} for n, u in sorted(self.users.items())]}
        tmp = f"{self.path}.tmp{os.getpid()}"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(doc, f, indent=1)
            f.write("\n")
        os.replace(tmp, self.path)

    def add(self, name: str, role: str, password: str) -> bool:
        """Add the account, or replace its role and password; whether it was new."""
        problem = name_problem(name)
        if problem:
            raise SabotError(problem)
        if role not in ROLES:
            raise SabotError(f"role must be one of {', '.join(ROLES)}")
        if len(password) < 12:
            raise SabotError("a password is at least 12 characters")
        new = name not in self.users
        self.users[name] = {"role": role, "hash": _hasher().hash(password)}
        return new

    def remove(self, name: str) -> None:
        if self.users.pop(name, None) is None:
            raise SabotError(f"no account {name} in {self.path}")

    def check(self, name: str, password: str) -> dict[str, str] | None:
        """The account ({"role", "hash"}) as the file has it now when the password is its, else
        None (an unknown name costs the same hash as a wrong password: the answer's time does
        not tell which)."""
        from argon2.exceptions import InvalidHashError, VerificationError

        hasher = _hasher()
        user = self.fresh().get(name)
        if user is None:
            if not self._dummy:
                self._dummy = hasher.hash(secrets.token_hex(16))
            target = self._dummy
        else:
            target = user["hash"]
        try:
            hasher.verify(target, password)
        except (VerificationError, InvalidHashError):
            return None
        return user


def _stat(path: str) -> tuple[int, ...] | None:
    """What changes when the file is written or replaced (None: there is no file)."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return st.st_ino, st.st_dev, st.st_size, st.st_mtime_ns, st.st_ctime_ns


def _read(path: str) -> dict[str, dict[str, str]]:
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except OSError as e:
        raise SabotError(f"accounts file {path}: {e.strerror}") from None
    doc = parse_json(raw, f"accounts file {path}")
    users: dict[str, dict[str, str]] = {}
    rows = doc.get("accounts") if isinstance(doc, dict) else None
    if not isinstance(rows, list):
        raise SabotError(f"accounts file {path}: wants {{\"accounts\": [...]}}")
    for row in rows:
        if (not isinstance(row, dict) or name_problem(row.get("name"))
                or row.get("role") not in ROLES or not isinstance(row.get("hash"), str)
                or not row["hash"].startswith("$argon2")):
            raise SabotError(f"accounts file {path}: an entry is not {{\"name\", \"role\" "
                             f"({', '.join(ROLES)}), \"hash\" (argon2)}}")
        if row["name"] in users:
            raise SabotError(f"accounts file {path}: {row['name']} is listed twice")
        users[row["name"]] = {"role": row["role"], "hash": row["hash"]}
    return users


@dataclass
class Session:
    name: str
    role: str
    hash: str  # the account's password hash at login: a new one ends the session
    csrf: str
    started: float
    seen: float
    client: str


class Sessions:
    """serve's logged-in operators, and the limit on failed logins. Thread-safe."""

    def __init__(self) -> None:
        self._by_token: dict[str, Session] = {}
        self._failures: dict[str, list[float]] = {}
        self._lock = threading.Lock()

    def start(self, name: str, user: dict[str, str], client: str) -> tuple[str, Session]:
        token = secrets.token_urlsafe(32)
        now = time.time()
        s = Session(name, user["role"], user["hash"], secrets.token_urlsafe(32), now, now, client)
        with self._lock:
            self._by_token[token] = s
        return token, s

    def get(self, token: str | None) -> Session | None:
        if not token:
            return None
        now = time.time()
        with self._lock:
            s = self._by_token.get(token)
            if s is None:
                return None
            if now - s.started > SESSION_S or now - s.seen > IDLE_S:
                del self._by_token[token]
                return None
            s.seen = now
            return s

    def end(self, token: str | None) -> None:
        with self._lock:
            self._by_token.pop(token or "", None)

    def attempt(self, name: str, client: str) -> tuple[float, float]:
        """A login for `name` from `client` begins: (0, its mark) when it may be checked, counted
        as a failure from now on (so attempts sent at once cannot all pass before one fails);
        (seconds to wait, 0) when the window's failures are used up."""
        now = time.time()
        keys = (f"name:{name}", f"from:{client}")
        with self._lock:
            waits = []
            for key in keys:
                recent = [t for t in self._failures.get(key, []) if now - t < WINDOW_S]
                self._failures[key] = recent
                if len(recent) >= FAILURES:
                    waits.append(WINDOW_S - (now - recent[0]))
            if waits:
                return max(waits), 0.0
            for key in keys:
                self._failures[key].append(now)
            return 0.0, now

    def succeeded(self, name: str, client: str, mark: float) -> None:
        """The login begun at `mark` was good: it is no failure."""
        with self._lock:
            for key in (f"name:{name}", f"from:{client}"):
                with contextlib.suppress(ValueError):
                    self._failures.get(key, []).remove(mark)
