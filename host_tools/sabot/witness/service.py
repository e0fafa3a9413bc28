"""The witness: C2SP tlog-witness add-checkpoint over each registered shoe's log.

A witness is run by someone the casino is not (a regulator, a test lab). For every shoe of the
registry it was given it trusts the shoe's result keys (the element's, signature type 0x02) for
the checkpoints of the shoe's log (origin `tlog.origin(shoe_id)`), and it keeps, per log, the
latest checkpoint it cosigned. A checkpoint is cosigned only when:
- its origin is a registered shoe's (else 404) and a trusted key of that shoe signed it (403);
- it is signed by the key that signed the first checkpoint this witness cosigned for that log
  (403: a registry whose key was replaced later is caught here, at the first checkpoint after);
- the old size the client gives is the witness's own latest size for that log (409, answering
  that size as text/x.tlog.size), no larger than the new size (400);
- the consistency proof from the witness's latest checkpoint to this one verifies (422), or, at
  the same size, the root is the same (409: a fork).
The check and the update of the log's row are one SQLite transaction (BEGIN IMMEDIATE), so two
requests can never roll the log back. Every refusal of a checkpoint that a trusted key signed is
kept as evidence (a fork, a failed proof, another key), with the request as it came."""

from __future__ import annotations

import base64
import contextlib
import sqlite3
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric import ed25519

from sabot import note, tlog
from sabot.audit.cosign import STATE_HEADER
from sabot.errors import SabotError
from sabot.registry import ShoeEntry, load_public_pem

SCHEMA = (
    "CREATE TABLE IF NOT EXISTS logs (origin TEXT PRIMARY KEY, size INTEGER NOT NULL,"
    " root BLOB NOT NULL, checkpoint TEXT NOT NULL, key_id INTEGER NOT NULL,"
    " cosigned_at INTEGER NOT NULL, key BLOB)",
    "CREATE TABLE IF NOT EXISTS evidence (id INTEGER PRIMARY KEY, origin TEXT NOT NULL,"
    " received_at REAL NOT NULL, reason TEXT NOT NULL, request TEXT NOT NULL)",
    # one copy of each refused request: a client resending it fills no disk
    "CREATE UNIQUE INDEX IF NOT EXISTS evidence_once ON evidence (origin, request)",
)
EVIDENCE_MAX = 1000  # refused requests kept per log; past it they are refused, not kept
# the receipt checker's files (the pit's pages serve the same ones at /verify)
CHECKER = Path(__file__).resolve().parents[1] / "pit" / "static"
MAX_BODY = 64 * 1024  # an add-checkpoint request is a checkpoint and at most 63 hashes
MAX_SIZE = 2**63 - 1  # SQLite's largest INTEGER; a tree of more needs over 63 proof hashes


def default_name(key: ed25519.Ed25519PrivateKey) -> str:
    """A witness's name when none is given: from its key, the same on every host."""
    import hashlib

    from cryptography.hazmat.primitives import serialization

    raw = key.public_key().public_bytes(serialization.Encoding.Raw,
                                        serialization.PublicFormat.Raw)
    return f"sabot.witness/{hashlib.sha256(raw).hexdigest()[:16]}"


@dataclass
class Answer:
    status: int
    body: str
    content_type: str = "text/plain; charset=utf-8"


class Witness:
    def __init__(self, db: str, key: ed25519.Ed25519PrivateKey, shoes: Mapping[int, ShoeEntry],
                 name: str | None = None) -> None:
        self.signer = note.Ed25519Signer(name or default_name(key), key, note.COSIGNATURE)
        self.logs: dict[str, list[note.Verifier]] = {}
        # each shoe's attestation key (DER SubjectPublicKeyInfo), the element's own, which
        # certifies every result key version the registry holds for it (the registry checks
        # each certificate as it loads): a rekeyed shoe's next version is taken when the same
        # attestation key that came with the log's first checkpoint certifies it
        self.attest: dict[str, bytes | None] = {}
        self.entries: dict[str, ShoeEntry] = {}
        self._trust(shoes)
        # the registry again, when a checkpoint names a shoe it lacks (the CLI's: the file read
        # again only once it changed; None when unchanged): a shoe provisioned since the start
        self.refresh: Callable[[], Mapping[int, ShoeEntry] | None] | None = None
        self.path = db
        self.say: Callable[[str], None] | None = None  # a line per request answered (the CLI's)
        self._lock = threading.Lock()  # one connection: its transaction is every thread's
        try:
            self.db = sqlite3.connect(db, isolation_level=None, check_same_thread=False)
            self.db.execute("PRAGMA journal_mode=WAL")
            self.db.execute("PRAGMA synchronous=FULL")  # cosigned only once it is on disk
            for sql in SCHEMA:
                self.db.execute(sql)
            columns = {r[1] for r in self.db.execute("PRAGMA table_info(logs)")}
            for column in ("key", "attestation"):  # a state from before them
                if column not in columns:
                    self.db.execute(f"ALTER TABLE logs ADD COLUMN {column} BLOB")
        except sqlite3.Error as e:
            raise SabotError(f"witness state {db}: {e}") from None

    def _trust(self, shoes: Mapping[int, ShoeEntry]) -> None:
        """Trust these shoes' keys: all of them or, when one does not load (SabotError), none
        (the keys trusted before stay, whole)."""
        logs, attest, entries = dict(self.logs), dict(self.attest), dict(self.entries)
        for sid, entry in shoes.items():
            origin = tlog.origin(sid)
            entries[origin] = entry
            keys = (entry.public_key(k["version"]) for k in entry.public_keys)
            logs[origin] = [note.ecdsa_verifier(origin, k) for k in keys if k is not None]
            attest[origin] = (note.ecdsa_verifier(origin, load_public_pem(
                entry.attestation_key)).public if entry.attestation_key else None)
        self.logs, self.attest, self.entries = logs, attest, entries

    def _retrust(self) -> bool:
        """The registry read again (once its file changed) and trusted; False when it did not
        change or could not be taken (said, the keys trusted before kept)."""
        shoes = self.refresh() if self.refresh is not None else None
        if shoes is None:
            return False
        try:
            self._trust(shoes)
        except SabotError as e:
            if self.say is not None:
                self.say(f"registry not taken, the keys trusted before kept: {e}")
            return False
        return True

    @property
    def vkey(self) -> str:
        return self.signer.verifier.vkey()

    def latest(self, origin: str) -> dict[str, Any] | None:
        row = self.db.execute("SELECT size, root, checkpoint, key_id, cosigned_at, key,"
                              " attestation FROM logs WHERE origin = ?", (origin,)).fetchone()
        if row is None:
            return None
        return {"size": row[0], "root": bytes(row[1]), "checkpoint": row[2], "key_id": row[3],
                "cosigned_at": row[4], "key": None if row[5] is None else bytes(row[5]),
                "attestation": None if row[6] is None else bytes(row[6])}

    def state(self) -> dict[str, Any]:
        """What GET /logs answers (and `sabot audit verify --witness-state` checks a store
        against): per log, the latest checkpoint cosigned (`cosigned`: its text and this
        witness's cosignature, so a copy of the state proves itself) and the key that signed
        the log's first checkpoint here (`key`: base64 of its DER SubjectPublicKeyInfo)."""
        rows = self.db.execute("SELECT origin, size, checkpoint, cosigned_at, key FROM logs"
                               " ORDER BY origin").fetchall()
        # the whole state, signed as one (so a copy can be neither pruned nor edited; its time
        # says how old it is): a line per log, origin, size, root, bound key
        lines = []
        for o, n, c, _, k in rows:
            root = c.split("\n")[2]
            lines.append(f"{o} {n} {root} {base64.b64encode(k).decode() if k else '-'}\n")
        text = STATE_HEADER + "".join(lines)
        now = int(time.time())
        return {"witness": self.vkey, "at": now,
                "signed": text + "\n" + self.signer.sign(text, timestamp=now), "logs": [
            {"origin": o, "size": n, "checkpoint": c, "cosigned_at": t,
             "cosigned": c + "\n" + self.signer.sign(c, timestamp=t),
             "key": base64.b64encode(k).decode() if k is not None else None}
            for o, n, c, t, k in rows],
            "evidence": self.db.execute("SELECT COUNT(*) FROM evidence").fetchone()[0]}

    def keys(self) -> dict[str, Any]:
        """What GET /keys answers, for the receipt checker this witness serves: its verifier key
        and, per shoe whose log it holds, the result keys it vouches for, in the shoe registry's
        shape the checker reads. A player's trust anchors, from the witness (the regulator's),
        never from the casino. Those keys are the one that signed the log's first checkpoint
        here, and every later version of its registry that the attestation key bound with that
        checkpoint certifies (the registry checks each certificate as it loads): a receipt
        signed after a rekey is checked with nothing pasted too, and a key the witness did not
        bind is never served."""
        from cryptography.hazmat.primitives import serialization

        def pem(der: bytes) -> str:
            return serialization.load_der_public_key(der).public_bytes(
                serialization.Encoding.PEM,
                serialization.PublicFormat.SubjectPublicKeyInfo).decode()

        shoes = []
        with self._lock:  # (on a worker thread: never inside another's transaction)
            rows = self.db.execute("SELECT origin, key, attestation FROM logs WHERE key IS NOT"
                                   " NULL ORDER BY origin").fetchall()
        for origin, der, attestation in rows:
            head, _, hexid = origin.partition("/")
            if head != "sabot.shoe" or len(hexid) != 8:
                continue
            bound, versions = bytes(der), {}
            entry = self.entries.get(origin)
            # the registry's element is the one bound: its every certified version is the shoe's
            same_element = attestation is not None and self.attest.get(origin) == bytes(
                attestation)
            for k in entry.public_keys if entry is not None else []:
                key = entry.public_key(k["version"]) if entry is not None else None
                spki = note.ecdsa_verifier(origin, key).public if key is not None else b""
                if spki == bound or same_element:
                    versions[k["version"]] = spki
            if bound not in versions.values():  # a registry without it: the bound key alone
                versions = {1: bound}
            shoes.append({"shoe_id": int(hexid, 16), "public_keys": [
                {"version": v, "key": pem(versions[v])} for v in sorted(versions)],
                # the table as the witness's own registry names it: the page refuses a
                # receipt of another table than the one its code named
                **({"table": entry.table} if entry is not None else {})})
        return {"witness": self.vkey, "shoes": shoes}

    def evidence(self) -> list[dict[str, Any]]:
        return [{"origin": o, "received_at": t, "reason": r, "request": q} for o, t, r, q in
                self.db.execute("SELECT origin, received_at, reason, request FROM evidence"
                                " ORDER BY id")]

    def add_checkpoint(self, body: bytes) -> Answer:
        """One add-checkpoint request's body; the answer tlog-witness specifies (said to
        `self.say`, when set, in one line: the log, the size, what was answered)."""
        answer, about = self._add_checkpoint(body)
        if self.say is not None:
            why = answer.body.strip().splitlines()[0] if answer.status != 200 else ""
            self.say(f"{about}: " + ("cosigned" if answer.status == 200
                                     else f"refused {answer.status}: {why}"))
        return answer

    def _add_checkpoint(self, body: bytes) -> tuple[Answer, str]:
        try:
            old, proof, signed = parse_request(body)
            text, _ = note.split(signed)
            cp = tlog.Checkpoint.parse(text)
        except SabotError as e:
            return Answer(400, f"{e}\n"), "a request that is no checkpoint"
        about = f"{cp.origin} at {cp.size}"
        return self._checked(cp, old, proof, signed, text, body), about

    def _checked(self, cp: tlog.Checkpoint, old: int, proof: list[bytes], signed: str, text: str,
                 body: bytes) -> Answer:
        trusted = self.logs.get(cp.origin)
        if trusted is None and self._retrust():
            trusted = self.logs.get(cp.origin)
        if trusted is None:
            return Answer(404, f"no log {cp.origin} is known to this witness (its registry has "
                          "no such shoe)\n")
        try:
            _, good = note.verified(signed, trusted)
        except SabotError as e:
            # a key its registry did not hold (a rekey since it was read): read again, once the
            # file changed; the key is still taken only as _decide binds it
            if not self._retrust():
                return Answer(403, f"{e}\n")
            try:
                _, good = note.verified(signed, self.logs.get(cp.origin, []))
            except SabotError as again:
                return Answer(403, f"{again}\n")
        if old > cp.size:
            return Answer(400, f"old size {old} is larger than the checkpoint's {cp.size}\n")
        if cp.size > MAX_SIZE:
            return Answer(400, f"a checkpoint of over {MAX_SIZE} leaves\n")
        request = body.decode()
        with self._lock:
            try:
                self.db.execute("BEGIN IMMEDIATE")  # checked and updated as one
                answer = self._decide(cp, old, proof, good[0][0], request, text)
                self.db.execute("COMMIT")
            except sqlite3.Error as e:
                return Answer(503, f"witness state {self.path}: {e}\n")
            finally:  # whatever went wrong, the write lock is not kept
                if self.db.in_transaction:
                    with contextlib.suppress(sqlite3.Error):
                        self.db.execute("ROLLBACK")
        return answer

    def _decide(self, cp: tlog.Checkpoint, old: int, proof: list[bytes], key: note.Verifier,
                request: str, text: str) -> Answer:
        row = self.latest(cp.origin)
        kid = key.id
        have = row["size"] if row else 0
        # the key itself, not its 4-byte ID: a key ground to the same ID is another key; checked
        # before the size, so a 409 says the log is bound to the key that signed this request
        attest = self.attest.get(cp.origin)
        if row is not None and (kid != row["key_id"] or row["key"] not in (None, key.public)) \
                and not (row["attestation"] is not None and attest == row["attestation"]):
            # (a later version of the shoe's key, certified by the element whose key signed
            # the first checkpoint here, is the same shoe's: a rekey goes on being witnessed)
            return self._refuse(cp, request, 403, "signed by another key than the one that "
                                f"signed this log's first checkpoint here (key ID {kid:08x}, "
                                f"not {row['key_id']:08x}), and not certified by the "
                                "attestation key that came with it")
        if old != have:
            return Answer(409, f"{have}\n", "text/x.tlog.size")
        old_root = row["root"] if row else tlog.EMPTY_ROOT
        if old == cp.size and row is not None and cp.root != old_root:
            return self._refuse(cp, request, 409, f"a fork: size {cp.size} with another root "
                                "than the one this witness cosigned", fork=True)
        if not tlog.verify_consistency(old, old_root, cp.size, cp.root, proof):
            return self._refuse(cp, request, 422, f"the consistency proof from {old} to "
                                f"{cp.size} does not verify")
        # never earlier than its last cosignature of this log (a clock stepped back)
        now = max(int(time.time()), row["cosigned_at"] if row else 0)
        self.db.execute("INSERT INTO logs (origin, size, root, checkpoint, key_id, cosigned_at,"
                        " key, attestation) VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (origin)"
                        " DO UPDATE SET size = excluded.size, root = excluded.root,"
                        " checkpoint = excluded.checkpoint, cosigned_at = excluded.cosigned_at,"
                        " key = COALESCE(logs.key, excluded.key),"
                        " attestation = logs.attestation",
                        (cp.origin, cp.size, cp.root, text, kid, now, key.public, attest))
        return Answer(200, self.signer.sign(text, timestamp=now))

    def _refuse(self, cp: tlog.Checkpoint, request: str, status: int, reason: str,
                fork: bool = False) -> Answer:
        """Keep the refused request as evidence: one per checkpoint (a shoe-signed checkpoint
        sent again with a thousand made-up proofs fills nothing), up to EVIDENCE_MAX a log, and
        a fork always (the evidence that matters most)."""
        signed = request.partition("\n\n")[2]
        if self.db.execute("SELECT 1 FROM evidence WHERE origin = ? AND substr(request,"
                           " length(request) - ? + 1) = ?",
                           (cp.origin, len(signed), signed)).fetchone():
            return Answer(status, f"{reason}\n")
        kept = self.db.execute("SELECT COUNT(*) FROM evidence WHERE origin = ?",
                               (cp.origin,)).fetchone()[0]
        if kept < EVIDENCE_MAX or fork:
            self.db.execute("INSERT OR IGNORE INTO evidence (origin, received_at, reason,"
                            " request) VALUES (?, ?, ?, ?)",
                            (cp.origin, time.time(), reason, request))
        return Answer(status, f"{reason}\n")

    def close(self) -> None:
        self.db.close()


def parse_request(body: bytes) -> tuple[int, list[bytes], str]:
    """An add-checkpoint body: "old N\\n", proof lines, an empty line, the signed checkpoint."""
    if len(body) > MAX_BODY:
        raise SabotError(f"a request of over {MAX_BODY} bytes")
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        raise SabotError("the request is not UTF-8") from None
    head, sep, signed = text.partition("\n\n")
    if not sep:
        raise SabotError("no empty line before the checkpoint")
    lines = head.split("\n")
    word, _, size = lines[0].partition(" ")
    if word != "old" or not size.isdigit() or not size.isascii() or len(size) > 19 or (
            size != "0" and size.startswith("0")) or int(size) > MAX_SIZE:
        raise SabotError("the first line is `old <size>`")
    proof = []
    for line in lines[1:]:
        try:
            h = base64.b64decode(line, validate=True)
        except ValueError:
            h = b""
        if len(h) != tlog.HASH_SIZE:
            raise SabotError("a consistency proof line is one base64 SHA-256 hash")
        proof.append(h)
    if len(proof) > tlog.MAX_PROOF:
        raise SabotError(f"over {tlog.MAX_PROOF} consistency proof lines")
    return int(size), proof, signed




def app(witness: Witness) -> Any:
    """The witness's HTTP service: POST /add-checkpoint, and GET /logs (what it holds)."""
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response
    from starlette.routing import Route

    async def add_checkpoint(request: Request) -> Response:
        # never more than a request can be held in memory: refused before it is all read
        too_big = Response(f"a request of over {MAX_BODY} bytes\n", status_code=413,
                           media_type="text/plain; charset=utf-8")
        length = request.headers.get("content-length", "")
        if length.isdigit() and int(length) > MAX_BODY:
            return too_big
        body = b""
        async for chunk in request.stream():
            body += chunk
            if len(body) > MAX_BODY:
                return too_big
        a = witness.add_checkpoint(body)
        return Response(a.body, status_code=a.status, media_type=a.content_type)

    async def logs(request: Request) -> Response:
        return JSONResponse(witness.state())

    # The receipt checker, served by the witness with its own keys: a table's QR code links
    # here (serve --checker URL/check) with the receipt's address at the pit, and the page
    # checks it in the player's browser against these keys, with nothing to paste.
    page = {"/check": ("verify.html", "text/html; charset=utf-8"),
            "/verify.js": ("verify.js", "text/javascript; charset=utf-8"),
            "/pages.css": ("pages.css", "text/css; charset=utf-8")}
    policy = ("default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; "
              "connect-src *; object-src 'none'; base-uri 'none'; frame-ancestors 'none'")

    async def checker(request: Request) -> Response:
        name, kind = page[request.url.path]
        body = (CHECKER / name).read_bytes()
        if name == "verify.html":  # the keys come from this witness, in the page: it says so
            import json

            from starlette.concurrency import run_in_threadpool

            held = json.dumps(await run_in_threadpool(witness.keys))
            carried = held.replace("<", "\\u003c").replace(">", "\\u003e").replace(
                "&", "\\u0026")
            body = body.replace(b'<body class="pit verify">', b'<body class="pit verify">\n'
                                b'<script type="application/json" id="witness-keys">'
                                + carried.encode() + b"</script>").replace(
                b"against the keys\nyou paste, which should come from the regulator, not from "
                b"the casino.", b"against the keys\nof this witness (the regulator's, not the "
                b"casino's), carried in this page: nothing to paste.")
        return Response(body, media_type=kind, headers={"Content-Security-Policy": policy,
                                                        "X-Content-Type-Options": "nosniff",
                                                        "Cache-Control": "no-cache"})

    async def keys(request: Request) -> Response:
        from starlette.concurrency import run_in_threadpool

        return JSONResponse(await run_in_threadpool(witness.keys),
                            headers={"Cache-Control": "no-cache"})

    return Starlette(routes=[Route("/add-checkpoint", add_checkpoint, methods=["POST"]),
                             Route("/logs", logs), Route("/keys", keys),
                             *(Route(path, checker) for path in page)])
