"""The pit's side of the witnesses (C2SP tlog-witness): every checkpoint of a shoe's log that the
validator has checked against the stored frames goes to each witness with the consistency proof
from the size that witness cosigned last, and each cosignature it answers is stored beside the
checkpoint (the store's `cosignatures` table). A checkpoint with the quorum's cosignatures is the
shoe's published head: receipts are made to it (`sabot receipt`).

A witness's last size is learnt from the witness itself: the first request says "old 0", and a
witness that holds a later size answers 409 with it, when the request is made again from there.
A witness that cannot be reached, or refuses, is said in one line and tried again at the next
checkpoint; the validation never waits for it (Cosigner runs in its own thread)."""

from __future__ import annotations

import http.client
import queue
import threading
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from sabot import note, tlog
from sabot.errors import SabotError
from sabot.protocol import shoe_id_text

TYPE_CHECKING = False
if TYPE_CHECKING:
    from sabot.registry import ShoeEntry

STATE_HEADER = "sabot.witness-state/v1\n"  # a witness's signed state (witness/service.py)

TIMEOUT = 5.0  # seconds a witness has to answer one request


@dataclass(frozen=True)
class WitnessSpec:
    """A witness the pit submits to: its add-checkpoint URL and its verifier key."""

    url: str
    verifier: note.Verifier

    @property
    def name(self) -> str:
        return self.verifier.name


def parse_witness(text: str) -> WitnessSpec:
    """URL=VKEY (as --witness takes it): a SabotError in one line for anything else."""
    url, sep, vkey = text.partition("=")
    try:
        from urllib.parse import urlsplit

        parts = urlsplit(url)
        parts.port  # noqa: B018 (a port that is no number raises here)
        good = bool(parts.hostname) and parts.scheme in ("http", "https")
    except ValueError:
        good = False
    if not sep or not good:
        raise SabotError(f"--witness takes URL=VKEY (the witness's http(s) address and its "
                         f"verifier key: sabot witness --key FILE --vkey), not {text!r}")
    return WitnessSpec(url.rstrip("/"), note.Verifier.parse(vkey))


def check_quorum(witnesses: Sequence[WitnessSpec], quorum: int | None) -> int:
    """The quorum of cosignatures a checkpoint needs (default: every witness)."""
    if not witnesses:
        if quorum is not None:
            raise SabotError("--quorum needs --witness")
        return 0
    names = [w.name for w in witnesses]
    if len(set(names)) != len(names):
        raise SabotError("a witness is named twice in --witness")
    q = len(witnesses) if quorum is None else quorum
    if not 1 <= q <= len(witnesses):
        raise SabotError(f"--quorum {q}: give 1 to {len(witnesses)} (the witnesses named)")
    return q


def post(url: str, body: bytes, timeout: float = TIMEOUT) -> tuple[int, str]:
    """POST body to a witness's add-checkpoint: (status, text); status 0 when it cannot be
    reached."""
    try:
        req = urllib.request.Request(url + "/add-checkpoint", data=body, method="POST",
                                     headers={"Content-Type": "text/plain"})
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.read(64 * 1024).decode(errors="replace")
    except urllib.error.HTTPError as e:
        return e.code, e.read(64 * 1024).decode(errors="replace")
    except (OSError, ValueError, http.client.HTTPException) as e:  # (no HTTP at all answers)
        return 0, str(getattr(e, "reason", e)) or type(e).__name__


def cosign(witness: WitnessSpec, signed: str, size: int, hashes: Sequence[bytes],
           last: dict[str, int], send: Callable[[str, bytes], tuple[int, str]] = post
           ) -> tuple[str | None, str]:
    """One checkpoint (its signed note, over the first `size` of `hashes`) to one witness:
    (the cosignature line, "") or (None, why not). `last` keeps the size each witness cosigned
    last (by name); a 409 naming another size is tried again from there, once."""
    text, _ = note.split(signed)
    for _ in range(2):
        old = last.get(witness.name, 0)
        if old > size:
            return None, (f"it holds a larger size of this log ({old}) than this checkpoint's "
                          f"({size})")
        proof = tlog.consistency_proof(hashes, old, size) if 0 < old < size else []
        status, answer = send(witness.url, tlog.add_checkpoint_body(old, proof, signed))
        said = answer.strip()
        if status == 409 and said.isascii() and said.isdigit() and len(said) < 20:
            last[witness.name] = int(said)
            continue
        if status != 200:
            why = said.splitlines()[0] if said else "no answer"
            return None, (f"could not be reached ({why})" if status == 0
                          else f"refused it ({status}: {why})")
        try:
            _, sigs = note.split(text + "\n" + answer)
        except SabotError:
            sigs = []
        v = witness.verifier
        line = next((s.line for s in sigs if (s.name, s.id) == (v.name, v.id)
                     and v.verify(text, s.sig) is not None), None)
        if line is None:
            return None, "answered no cosignature of its key"
        last[witness.name] = size
        return line, ""
    return None, "kept answering another size"


def bind(witnesses: Sequence[WitnessSpec], quorum: int, entry: ShoeEntry,
         say: Callable[[str], None]) -> int:
    """A shoe's first checkpoint (its log at size 0, signed by result key 1 at provisioning) to
    every witness: each that cosigns it holds the shoe's key from then on, and refuses a log
    signed by any other (witness/service.py). A line said per witness; how many took it.
    SabotError when fewer than `quorum` did."""
    signed = entry.first_checkpoint
    if signed:
        origin, key = tlog.origin(entry.shoe_id), entry.public_key(1)
        try:
            if key is None:
                raise SabotError("no key 1")
            text, _ = note.verified(signed, [note.ecdsa_verifier(origin, key)])
            cp = tlog.Checkpoint.parse(text)
            if (cp.origin, cp.size, cp.root, cp.extensions) != (origin, 0, tlog.EMPTY_ROOT, []):
                raise SabotError("not the log at size 0")
        except SabotError:
            raise SabotError(f"shoe {shoe_id_text(entry.shoe_id)}'s first_checkpoint in the "
                             "registry is not its log at size 0 signed by its result key 1 "
                             "(altered?): not sent") from None
        signed = text + "\n" + next(s.line for s in note.split(signed)[1]
                                    if s.name == origin and s.id == note.ecdsa_verifier(
                                        origin, key).id)
    if not signed:
        raise SabotError(f"shoe {shoe_id_text(entry.shoe_id)} was provisioned without a first "
                         "checkpoint (older firmware): its key is bound at the first checkpoint "
                         "a pit sends the witnesses")
    bound = 0
    for w in witnesses:
        line, why = cosign(w, signed, 0, [], {})
        if line is not None:
            bound += 1
            say(f"witness {w.name} holds the shoe's key from its first checkpoint")
        elif why.startswith("it holds a larger size"):
            # (a 409 is signed by no one: the witness's signed state says which key it bound)
            held = _bound_key(w, entry)
            if held is True:
                bound += 1
                say(f"witness {w.name} holds the shoe's log already, bound to its key 1 (its "
                    "signed state says so)")
            else:  # (a 409 from the URL is signed by no one: maybe not that witness at all)
                say(f"{w.url} answers that it holds the shoe's log at a later size already, "
                    f"and witness {w.name}'s {held}")
        else:
            say(f"witness {w.name} did not cosign the shoe's first checkpoint: it {why}")
    if bound < quorum:
        raise SabotError(f"{bound} of {len(witnesses)} witnesses are shown to hold the shoe's "
                         f"key 1, fewer than the quorum {quorum}: check each one's URL and "
                         "verifier key, and send it again with sabot bind once they can take it "
                         "(a witness that holds no log of the shoe binds the key of the first "
                         "checkpoint it is sent)")
    return bound


def _bound_key(w: WitnessSpec, entry: ShoeEntry) -> bool | str:
    """True when witness `w`'s signed state binds the shoe's log to its result key 1; else
    what it says instead."""
    origin = tlog.origin(entry.shoe_id)
    key = entry.public_key(1)
    try:
        logs = load_witness_state(w.url, [w.verifier])
    except SabotError as e:
        return f"signed state could not be had ({e})"
    held = next((x for x in logs if tlog.origin(x.shoe_id) == origin), None)
    if held is None:
        return "signed state does not list the log"
    if key is None or held.key != note.ecdsa_verifier(origin, key).public:
        return "signed state binds the log to another key than the shoe's key 1"
    return True


Cosigned = tuple[int, int, dict[str, str]]  # (checkpoint frame id, size, {witness: its line})


class Cosigner:
    """Submits checkpoints to the witnesses from a thread of its own. What they answered waits in
    `take()` for the validator, which stores it in its next batch (the store is the validator
    thread's alone); `say(line)` is called with each witness that did not cosign."""

    def __init__(self, witnesses: Sequence[WitnessSpec], quorum: int,
                 say: Callable[[str], None]) -> None:
        self.witnesses = list(witnesses)
        self.quorum = quorum
        self.say = say
        self._done: list[Cosigned] = []
        self._lock = threading.Lock()
        self.last: dict[str, int] = {}
        self.cosigned = 0  # the newest size every witness has answered for
        self._queue: queue.Queue[tuple[int, str, int, list[bytes]] | None] = queue.Queue()
        self._thread = threading.Thread(target=self._run, daemon=True, name="cosigner")
        self._thread.start()

    def submit(self, frame_id: int, signed: str, size: int, hashes: Sequence[bytes]) -> None:
        self._queue.put((frame_id, signed, size, list(hashes[:size])))

    def _run(self) -> None:
        stop = False
        while not stop:
            items = [self._queue.get()]
            while True:
                try:
                    items.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            jobs = [j for j in items if j is not None]
            stop = len(jobs) < len(items)
            if jobs:
                try:
                    self._one(*jobs[-1])  # only the newest checkpoint waiting matters
                except Exception as e:  # a witness's answer no code here foresaw: said, and the
                    self.say(f"witnesses: a checkpoint was not sent on ({type(e).__name__}: "
                             f"{e}); the next one is")  # thread goes on with the next one
            for _ in items:
                self._queue.task_done()

    def _one(self, frame_id: int, signed: str, size: int, hashes: list[bytes]) -> None:
        got = {}
        for w in self.witnesses:
            line, why = cosign(w, signed, size, hashes, self.last)
            if line is None:
                self.say(f"witness {w.name} ({w.url}): the checkpoint of {size} frames was not "
                         f"cosigned: it {why}")
            else:
                got[w.name] = line
        if got:
            with self._lock:
                self._done.append((frame_id, size, got))
        if len(got) >= self.quorum:
            self.cosigned = max(self.cosigned, size)

    def take(self) -> list[Cosigned]:
        """The cosignatures answered since the last take (put them back if not stored)."""
        with self._lock:
            done, self._done = self._done, []
        return done

    def put_back(self, done: list[Cosigned]) -> None:
        with self._lock:
            self._done[:0] = done

    def wait(self, timeout: float = TIMEOUT * 2) -> None:
        """Until every checkpoint submitted so far has been answered (or `timeout`)."""
        done = threading.Event()

        def joined() -> None:
            self._queue.join()
            done.set()

        threading.Thread(target=joined, daemon=True).start()
        done.wait(timeout)

    def close(self) -> None:
        self._queue.put(None)
        self._thread.join(TIMEOUT)


# ---- a witness's state, to check a store against (audit verify --witness-state) -------------
@dataclass(frozen=True)
class Witnessed:
    """One log as a witness holds it: the latest checkpoint it cosigned, and the key that signed
    the log's first checkpoint there (DER SubjectPublicKeyInfo; None from an older witness)."""

    witness: str
    shoe_id: int
    size: int
    root: bytes
    key: bytes | None
    at: int = 0  # when the witness signed the state this is from (Unix seconds)


def load_witness_state(source: str, verifiers: Sequence[note.Verifier]) -> list[Witnessed]:
    """A witness's GET /logs, from its URL or a saved copy: each log's checkpoint, its
    cosignature checked against `verifiers` (a copy is worth only what its witness signed). A
    SabotError in one line for a source that cannot be read or does not hold."""
    import base64
    import json

    try:
        if source.startswith(("http://", "https://")):
            url = source if source.rstrip("/").endswith("/logs") else source.rstrip("/") + "/logs"
            with urllib.request.urlopen(url, timeout=TIMEOUT) as r:
                state = json.loads(r.read(16 * 1024 * 1024))
        else:
            with open(source, encoding="utf-8") as f:
                state = json.load(f)
        logs = state["logs"]
        if not isinstance(logs, list):
            raise TypeError(logs)
    except (OSError, ValueError, KeyError, TypeError, RecursionError,
            http.client.HTTPException) as e:
        raise SabotError(f"witness state {source}: cannot be read as a witness's /logs "
                         f"({getattr(e, 'reason', None) or getattr(e, 'strerror', None) or e})"
                         ) from None
    # Only what the witness signed as one counts (`signed`: a line per log it holds, and the
    # time): the per-log fields beside it are for people, and a copy can be neither pruned nor
    # edited; how old it is, its time says.
    signed = state.get("signed") if isinstance(state, dict) else None
    try:
        if not isinstance(signed, str):
            raise TypeError("no signed state (a witness from before it)")
        text, good = note.open_note(signed, list(verifiers))
        if not text.startswith(STATE_HEADER):
            raise ValueError("not a witness's state")
        rows = [line.split(" ") for line in text[len(STATE_HEADER):].splitlines()]
        if any(len(r) != 4 for r in rows):
            raise ValueError("a log line is not origin, size, root and key")
    except (SabotError, TypeError, ValueError) as e:
        raise SabotError(f"witness state {source}: not signed by a witness given with "
                         f"--witness ({e})") from None
    out: list[Witnessed] = []
    for origin, size, root_b64, key_b64 in rows:
        prefix = "sabot.shoe/"
        hexid = origin[len(prefix):]
        if not origin.startswith(prefix) or len(hexid) != 8 or any(
                c not in "0123456789abcdef" for c in hexid):
            continue  # another kind of log the witness also keeps
        try:
            cp = tlog.Checkpoint.parse(f"{origin}\n{size}\n{root_b64}\n")
            key = None if key_b64 == "-" else base64.b64decode(key_b64, validate=True)
        except (SabotError, ValueError):
            raise SabotError(f"witness state {source}: its line for {origin} does not "
                             "parse") from None
        out.extend(Witnessed(name, int(hexid, 16), cp.size, cp.root, key, at)
                   for name, at in good.items())
    return out
