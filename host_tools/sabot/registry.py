"""The shoe registry (docs/INTERFACES.md "Shoe registry"): the host's own record of its shoes —
table, game, variant, decks, side wagers (with the tie's odds and the Dragon Bonus paytable) and
public key material; never a secret. The validator takes a shoe's configuration from here, not
from what the shoe announces: a shoe that announces anything else raises a `config_mismatch`
alarm; the edges and `sabot settle --table` take the table's wagers from here. Written by `sabot
provision` / `sabot deploy`.

A registry is input like any other: a file over MAX_BYTES, nested too deep, or an entry that
does not fit (a table name that is not a short printable one) is refused in one line."""

from __future__ import annotations

import contextlib
import functools
import json
import os
import tempfile
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, utils

from sabot import attestation, frames21
from sabot.errors import SabotError
from sabot.game import baccarat21 as b21
from sabot.game.settle import GAMES
from sabot.protocol import blackjack_variant_byte, shoe_id_text
from sabot.table_checks import (
    LANGUAGES,
    languages_ok,
    limits_problem,
    shown,
    table_name_problem,
    wagers_problem,
)

DEFAULT = "sabot-shoes.json"
# A whole pit's registry is far smaller: an entry holding all seven result key versions with
# their certificates and the longest table name is 3.5 KB, so this holds over a thousand shoes.
MAX_BYTES = 4 * 1024 * 1024
ENTRY_ROOM = 16 * 1024  # room a new shoe's entry may take, certificates and keys included
_GAME_BITS = {name: i for i, name in enumerate(GAMES)}  # the variant byte's game field
B21 = b21.GAME
ALGORITHM = "ecdsa-p256"


def provisioning_statement(serial: bytes, shoe_id: int, result_xy: bytes,
                           command_xy: bytes) -> bytes:
    """What result key 1 signs at factory provisioning (firmware/shoe/provision.py)."""
    return (b"sabot-provision" + serial + shoe_id.to_bytes(4, "big") + result_xy + command_xy)


def check_provisioning(serial: bytes, shoe_id: int, result_xy: bytes, command_xy: bytes,
                       proof: bytes) -> ec.EllipticCurvePublicKey:
    """Result key 1 as a provisioned shoe reported it, once it has signed the statement naming
    its chip, its id and the command key: a shoe that answers with a key it does not hold, or
    for another command key, is refused (SabotError)."""
    key = public_from_xy(result_xy)
    if len(proof) != 64 or len(serial) != 9:
        raise SabotError("the shoe's provisioning answer is malformed")
    der = utils.encode_dss_signature(int.from_bytes(proof[:32], "big"),
                                     int.from_bytes(proof[32:], "big"))
    try:
        key.verify(der, provisioning_statement(serial, shoe_id, result_xy, command_xy),
                   ec.ECDSA(hashes.SHA256()))
    except InvalidSignature:
        raise SabotError("the shoe's result key did not sign its provisioning: not "
                         "registered") from None
    return key


@functools.lru_cache(maxsize=256)
def load_public_pem(pem: str) -> ec.EllipticCurvePublicKey:
    """A P-256 public key from its PEM (parsed once per process); SabotError if it is none."""
    try:
        key = serialization.load_pem_public_key(pem.encode())
    except (ValueError, TypeError, UnicodeEncodeError):
        raise SabotError("not a PEM public key") from None
    if not isinstance(key, ec.EllipticCurvePublicKey) or key.curve.name != "secp256r1":
        raise SabotError("not a P-256 (secp256r1) public key")
    return key


def first_checkpoint(shoe_id: int, signature: bytes, public: ec.EllipticCurvePublicKey) -> str:
    """The shoe's log at size 0 as the signed note result key 1 (`public`) made of it at
    provisioning; SabotError unless that key's signature verifies."""
    from sabot import note, tlog
    from sabot.protocol import signed_checkpoint

    if len(signature) != 64:
        raise SabotError("the shoe's first checkpoint signature is not 64 bytes r||s")
    signed = signed_checkpoint(shoe_id, 0, tlog.EMPTY_ROOT, signature, public)
    try:
        note.verified(signed, [note.ecdsa_verifier(tlog.origin(shoe_id), public)])
    except SabotError:
        raise SabotError("the shoe's first checkpoint is not signed by result key 1: not "
                         "registered") from None
    return signed


def public_mode(fd: int) -> None:
    """A file made by mkstemp (mode 600) given the mode a new file gets here (666 less the
    umask): for files that hold nothing secret."""
    mask = os.umask(0o022)
    os.umask(mask)
    os.fchmod(fd, 0o666 & ~mask)


def _utf8(text: str) -> bool:
    """Whether `text` is UTF-8 text (JSON lets a lone surrogate, "\\ud800", through)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def public_from_xy(xy: bytes) -> ec.EllipticCurvePublicKey:
    """A P-256 public key from the element's raw X||Y (64 bytes)."""
    if len(xy) != 64:
        raise SabotError(f"a P-256 public key is 64 bytes X||Y, got {len(xy)}")
    try:
        return ec.EllipticCurvePublicNumbers(int.from_bytes(xy[:32], "big"),
                                             int.from_bytes(xy[32:], "big"),
                                             ec.SECP256R1()).public_key()
    except ValueError:
        raise SabotError("X||Y is not a point on P-256") from None


# the rounds a witnessed table's shoe may deal beyond its last cosigned checkpoint: the shoe
# signs one every 10 results and at its shoe's end (docs/PROTOCOL.md), and a witnessed pit has
# each cosigned as it comes
WITNESS_BOUND = 10


@dataclass
class ShoeEntry:
    shoe_id: int
    table: str = ""
    game: str = "baccarat"
    ez: bool = False
    commission_free: bool = False
    squeeze: bool = False
    decks: int = 8
    side_wagers: list[str] = field(default_factory=list)
    tie_odds: int = 8  # a winning Tie pays this to 1 (627a.12(b): at least 8; 631c.5(j): 8)
    dragon_bonus_paytable: str | None = None  # A, B or C (627a.12(e)): with Dragon Bonus only
    # blackjack (game "blackjack"): the dealer's rule of the Rules Submission (s17 stands on all
    # 17s, h17 draws to a soft 17), whether the dealer takes a hole card, and the progressive
    # meters' reset amounts ({"hit_and_run": cents, "straight_jack": cents}; unnamed: the
    # regulation's least, § 633a.13(l)(2), (m)(2))
    dealer: str = "s17"
    hole_card: bool = True
    meter_reset_cents: dict[str, int] = field(default_factory=dict)
    # 21 Baccarat (game "21-baccarat"): the table's settings (game/baccarat21.py Rules, decks
    # aside: the entry's own), each one not named at its stated default
    rules21: dict[str, Any] = field(default_factory=dict)
    # the table's limits on a main wager, in cents (the players' scoreboard shows them); None:
    # not registered
    min_bet_cents: int | None = None
    max_bet_cents: int | None = None
    # the languages of the players' scoreboard ("en", "zh"): both side by side unless the table
    # registers one
    languages: list[str] = field(default_factory=lambda: ["en", "zh"])
    public_keys: list[dict[str, Any]] = field(default_factory=list)
    serial: str = ""  # the element's serial number (hex), recorded at provisioning
    # the element's attestation public key (PEM), recorded at provisioning: it certifies every
    # result key version (sabot/attestation.py); "" for a shoe registered without one, which
    # can then hold version 1 only
    attestation_key: str = ""
    # the shoe's log at size 0, signed by result key 1 at provisioning (a C2SP signed note):
    # what binds that key to the witnesses (`sabot provision --witness`, `sabot bind`)
    first_checkpoint: str = ""
    # a witnessed table: how many of its rounds may lie beyond the last checkpoint its witnesses
    # cosigned before `audit verify --witness` fails (set to WITNESS_BOUND when the shoe is bound
    # to witnesses); None: not witnessed
    witness_bound: int | None = None

    def __post_init__(self) -> None:
        if not self.table:
            self.table = f"shoe-{self.shoe_id}"
        self.check()

    def check(self) -> None:
        sid = self.shoe_id
        said = shoe_id_text(sid) if type(sid) is int and 0 <= sid < 1 << 32 else shown(sid)
        where = f"registry entry for shoe {said}"
        if (not isinstance(self.shoe_id, int) or isinstance(self.shoe_id, bool)
                or not 0 <= self.shoe_id < 1 << 32):
            raise SabotError(f"{where}: shoe_id must be a whole number 0..4294967295")
        for name in ("ez", "commission_free", "squeeze"):
            if not isinstance(getattr(self, name), bool):
                raise SabotError(f"{where}: {name} must be true or false")
        problem = table_name_problem(self.table)
        if problem:
            raise SabotError(f"{where}: {problem}")
        if not isinstance(self.serial, str) or len(self.serial) not in (0, 18) or any(
                c not in "0123456789abcdef" for c in self.serial):
            raise SabotError(f"{where}: serial must be the element's 9-byte serial in lower-case "
                             "hex")
        if not isinstance(self.attestation_key, str):
            raise SabotError(f"{where}: attestation_key must be a PEM public key")
        if not isinstance(self.first_checkpoint, str) or len(self.first_checkpoint) > 1024 or (
                not _utf8(self.first_checkpoint)):
            raise SabotError(f"{where}: first_checkpoint must be a signed note")
        if self.witness_bound is not None and (
                not isinstance(self.witness_bound, int) or isinstance(self.witness_bound, bool)
                or not 1 <= self.witness_bound <= 1000):
            raise SabotError(f"{where}: witness_bound must be a number of rounds, 1 to 1000")
        if self.attestation_key:
            try:
                load_public_pem(self.attestation_key)
            except SabotError as e:
                raise SabotError(f"{where}: attestation_key: {e}") from None
            if not self.serial:
                raise SabotError(f"{where}: an attestation key certifies keys of one element: "
                                 "its serial is needed")
        if not isinstance(self.side_wagers, list) or not isinstance(self.public_keys, list):
            raise SabotError(f"{where}: side_wagers and public_keys must be lists")
        self._check_game(where)
        self._check_table(where)
        problem = wagers_problem(self.table_config()) or limits_problem(self.min_bet_cents,
                                                                          self.max_bet_cents)
        if problem:
            raise SabotError(f"{where}: {problem}")
        versions = set()
        for k in self.public_keys:
            if (not isinstance(k, dict) or not isinstance(k.get("version"), int)
                    or isinstance(k.get("version"), bool) or not 1 <= k["version"] <= 0xFFFF
                    or not isinstance(k.get("key"), str)):
                raise SabotError(f"{where}: each public key must be {{\"version\": 1-65535, "
                                 "\"algorithm\": \"ecdsa-p256\", \"key\": PEM}")
            if k.get("algorithm") != ALGORITHM:
                raise SabotError(f"{where}: public key version {k['version']} has algorithm "
                                 f"{k.get('algorithm')!r}; only {ALGORITHM!r} is known")
            if k["version"] in versions:
                raise SabotError(f"{where}: public key version {k['version']} is listed twice")
            versions.add(k["version"])
        for k in self.public_keys:
            self._check_certificate(k)

    def _check_table(self, where: str) -> None:
        if (not isinstance(self.decks, int) or isinstance(self.decks, bool)
                or not 1 <= self.decks <= 8):
            raise SabotError(f"{where}: decks must be 1 to 8")
        if not languages_ok(self.languages):
            raise SabotError(f"{where}: languages must list one or both of "
                             f"{', '.join(LANGUAGES)}, each once")

    def _check_game(self, where: str) -> None:
        if not isinstance(self.game, str) or (self.game not in GAMES
                                              and self.game not in ("blackjack", B21)):
            raise SabotError(f"{where}: game must be one of {', '.join(GAMES)}, blackjack, "
                             f"{B21}")
        if self.game in ("blackjack", B21) and (self.ez or self.commission_free or self.squeeze):
            raise SabotError(f"{where}: ez, commission_free and squeeze are baccarat's")
        if not isinstance(self.rules21, dict) or (self.rules21 and self.game != B21):
            raise SabotError(f"{where}: rules21 is a 21 Baccarat table's object of settings")
        if "decks" in self.rules21:
            raise SabotError(f"{where}: a 21 Baccarat table's decks are the entry's decks")
        if not isinstance(self.hole_card, bool) or not isinstance(self.meter_reset_cents, dict):
            raise SabotError(f"{where}: hole_card must be true or false, meter_reset_cents an "
                             "object of cents by wager")
        if self.ez and self.commission_free:
            raise SabotError(f"{where}: EZ and commission-free are different games; pick one")

    def _check_certificate(self, k: dict[str, Any]) -> None:
        """A result key is believed only with its certificate: the shoe's attestation key,
        inside its element, signed with Sign internal the message the chip built from that
        key's slot (GenKey's digest of its public key, the slot, the chip's serial and a nonce
        naming shoe and version). Neither a registry file nor a host can make one: the
        attestation key signs no bytes a host chooses. A shoe registered without an attestation
        key keeps version 1 (registered at provisioning) and no other."""
        where = f"registry entry for shoe {shoe_id_text(self.shoe_id)}"
        version = k["version"]
        if not self.attestation_key:
            if version == 1:
                return
            raise SabotError(f"{where}: public key version {version} needs the shoe's "
                             "attestation key to certify it, and the entry has none: the "
                             "registry was altered, or the key did not come from the element")
        try:
            cert = bytes.fromhex(k.get("certificate") or "")
            new = load_public_pem(k["key"]).public_numbers()
            xy = new.x.to_bytes(32, "big") + new.y.to_bytes(32, "big")
            attestation.check_certificate(load_public_pem(self.attestation_key),
                                          bytes.fromhex(self.serial), self.shoe_id, version, xy,
                                          cert)
        except (ValueError, SabotError):
            raise SabotError(f"{where}: public key version {version} is not certified by the "
                             "shoe's attestation key (its certificate is missing or wrong): the "
                             "registry was altered, or the key did not come from the shoe's "
                             "element") from None

    def public_key(self, version: int) -> ec.EllipticCurvePublicKey | None:
        """The loaded result key of this version (cached); None when the registry has none."""
        for k in self.public_keys:
            if k["version"] == version:
                try:
                    return load_public_pem(k["key"])
                except SabotError as e:
                    raise SabotError(f"registry entry for shoe {shoe_id_text(self.shoe_id)}: "
                                     f"public key version {version}: {e}") from None
        return None

    @property
    def key_versions(self) -> list[int]:
        return sorted(k["version"] for k in self.public_keys)

    @property
    def key_versions_text(self) -> str:
        """The result key versions as a line names them: "1, 2", or "none"."""
        return ", ".join(map(str, self.key_versions)) or "none"

    def add_public_key(self, version: int, pem: str, certificate: str | None = None) -> bool:
        """Register a result key version (old versions stay: old frames are signed by them);
        False when it is there already, SabotError when that version names another key or when
        its certificate (hex r||s, the attestation key's Sign internal) does not certify it."""
        new = load_public_pem(pem)
        old = self.public_key(version)
        if old is not None:
            if old.public_numbers() != new.public_numbers():
                raise SabotError(f"shoe {shoe_id_text(self.shoe_id)} already has a different "
                                 "public key "
                                 f"version {version} in the registry: a re-provisioned element? "
                                 "register it as a new shoe")
            return False
        entry: dict[str, Any] = {"version": version, "algorithm": ALGORITHM, "key": pem}
        if certificate:
            entry["certificate"] = certificate
        self._check_certificate(entry)
        self.public_keys.append(entry)
        self.public_keys.sort(key=lambda k: k["version"])
        return True

    def table_config(self) -> dict[str, Any]:
        """The table as `sabot settle` takes it (settle.Table): game, EZ or commission-free, the
        tie's odds, the side wagers and their Dragon Bonus paytable. What the edges and
        settlement of this shoe's rounds use."""
        if self.game == B21:  # every setting, a default as what it is
            try:
                rules = self.rules21_rules
            except SabotError:  # as written: wagers_problem says what is wrong with it
                return {"game": B21, "decks": self.decks, **self.rules21,
                        "side_wagers": list(self.side_wagers)}
            return {"game": B21, **rules.settings(), "side_wagers": list(self.side_wagers)}
        if self.game == "blackjack":
            return {"game": "blackjack", "decks": self.decks, "dealer": self.dealer,
                    "hole_card": self.hole_card, "side_wagers": list(self.side_wagers),
                    **{f"{w}_reset_cents": c for w, c in self.meter_reset_cents.items()}}
        cfg: dict[str, Any] = {"game": self.game, "ez": self.ez,
                               "commission_free": self.commission_free,
                               "tie_odds": self.tie_odds, "side_wagers": list(self.side_wagers)}
        if self.dragon_bonus_paytable is not None:
            cfg["dragon_bonus_paytable"] = self.dragon_bonus_paytable
        return cfg

    @property
    def variant(self) -> dict[str, Any]:
        """The configuration as the shoe's shoe_start frame names it."""
        if self.game == B21:
            return {"game": B21, **frames21.dealing(self.rules21_rules)}
        if self.game == "blackjack":
            return {"game": "blackjack", "dealer": self.dealer, "hole_card": self.hole_card}
        return {"game": self.game, "ez": self.ez, "commission_free": self.commission_free,
                "squeeze": self.squeeze}

    @property
    def rules21_rules(self) -> b21.Rules:
        """A 21 Baccarat table's rules (SabotError when its settings are none)."""
        return b21.Rules.from_config({**self.rules21, "decks": self.decks})

    @property
    def rule_bytes(self) -> bytes:
        """What the shoe keeps after the variant byte and the deck count: 21 Baccarat's rule
        bytes, or nothing."""
        return frames21.rule_bytes(self.rules21_rules) if self.game == B21 else b""

    @property
    def variant_byte(self) -> int:
        if self.game == B21:
            return frames21.VARIANT
        if self.game == "blackjack":
            return blackjack_variant_byte(self.dealer, self.hole_card)
        return (_GAME_BITS[self.game] | self.ez << 2 | self.commission_free << 3
                | self.squeeze << 4)


def _size(n: int) -> str:
    return f"{n // (1024 * 1024)} MB" if n >= 1024 * 1024 else f"{n:,} bytes"


class Registry:
    max_bytes = MAX_BYTES  # the largest registry file read or written

    unwritten = ""  # the text put() could not write, until it writes one

    def __init__(self, path: str, shoes: dict[int, ShoeEntry] | None = None) -> None:
        self.path = path
        self.shoes = shoes or {}

    @classmethod
    def load(cls, path: str | None = None, must_exist: bool = False) -> Registry:
        path = path or DEFAULT
        try:
            with open(path, "rb") as f:
                raw = f.read(cls.max_bytes + 1)  # never more: a registry is small
            if len(raw) > cls.max_bytes:
                raise SabotError(f"{path} is not a sabot shoe registry (over "
                                 f"{_size(cls.max_bytes)}: no pit's registry is)")
            doc = json.loads(raw.decode("utf-8"))
        except FileNotFoundError:
            if must_exist:
                raise SabotError(f"no shoe registry at {path} (sabot provision writes it)"
                                 ) from None
            return cls(path)
        except OSError as e:
            raise SabotError(f"cannot read shoe registry {path}: {e.strerror}") from None
        except (json.JSONDecodeError, UnicodeDecodeError):
            raise SabotError(f"{path} is not a sabot shoe registry (not JSON)") from None
        except ValueError:  # a number of thousands of digits: Python's int conversion limit
            raise SabotError(f"{path} is not a sabot shoe registry (a number too long)"
                             ) from None
        except RecursionError:  # arrays nested thousands deep: no registry looks like that
            raise SabotError(f"{path} is not a sabot shoe registry (JSON nested too deep)"
                             ) from None
        if not isinstance(doc, dict) or not isinstance(doc.get("shoes"), list):
            raise SabotError(f"{path} is not a sabot shoe registry (no \"shoes\" list)")
        shoes = {}
        for raw in doc["shoes"]:
            try:
                entry = ShoeEntry(**raw)
            except TypeError as e:
                raise SabotError(f"{path}: a shoe entry does not fit the registry: {e}") from None
            if entry.shoe_id in shoes:
                raise SabotError(f"{path}: shoe {shoe_id_text(entry.shoe_id)} is registered twice")
            shoes[entry.shoe_id] = entry
        return cls(path, shoes)

    def get(self, shoe_id: int) -> ShoeEntry:
        try:
            return self.shoes[shoe_id]
        except KeyError:
            raise SabotError(f"shoe {shoe_id_text(shoe_id)} is not in the shoe registry "
                             f"{self.path} (sabot provision registers it)") from None

    def pick(self, shoe_id: int | None) -> ShoeEntry:
        """The entry of `shoe_id`; with None, the registry's only shoe (SabotError otherwise)."""
        if shoe_id is not None:
            return self.get(shoe_id)
        if len(self.shoes) == 1:
            return next(iter(self.shoes.values()))
        if not self.shoes:
            raise SabotError(f"the shoe registry {self.path} holds no shoe (sabot provision or "
                             "sabot deploy registers one)")
        ids = ", ".join(f"{shoe_id_text(i)}" for i in sorted(self.shoes))
        raise SabotError(f"the shoe registry {self.path} holds {len(self.shoes)} shoes ({ids}): "
                         "name one with --shoe-id")

    def at_table(self, table: str, one: bool = False) -> ShoeEntry:
        """The shoe registered at `table` (any of them, when several share one configuration;
        with `one`, refused then: what is asked is one shoe's); SabotError when none is, or
        when its shoes are configured differently."""
        at = [e for _, e in sorted(self.shoes.items()) if e.table == table]
        if not at:
            names = ", ".join(sorted({e.table for e in self.shoes.values()})) or "none"
            raise SabotError(f"no shoe in the shoe registry {self.path} is at table "
                             f"{shown(table)} (its tables: {names})")
        if one and len(at) > 1:
            raise SabotError(f"{len(at)} shoes are at table {table} ("
                             f"{', '.join(shoe_id_text(e.shoe_id) for e in at)}): name one with "
                             "--shoe-id")
        if any(e.table_config() != at[0].table_config() for e in at):
            ids = ", ".join(f"{e.shoe_id:#010x}" for e in at)
            raise SabotError(f"the shoes at table {table} ({ids}) are registered with different "
                             "wagers: name one with --shoe-id")
        return at[0]

    def free_id(self) -> int:
        """A random shoe id (below 2**31) that no shoe of this registry has."""
        while True:
            shoe_id = int.from_bytes(os.urandom(4), "big") & 0x7FFFFFFF
            if shoe_id not in self.shoes:
                return shoe_id

    def register(self, shoe_id: int, version: int, public_pem: str,
                 certificate: str | None = None, *, table: str = "", fresh_element: bool = False,
                 attestation_key: str = "", **config: Any) -> tuple[ShoeEntry, bool]:
        """Register result key `version` of a shoe (a new entry for a shoe not registered yet)
        and write the file when that changed anything; the entry, and whether it changed.

        Old key versions stay (old frames are signed by them); a version already registered with
        another key is refused (SabotError), unless `fresh_element`: a newly provisioned element
        replaces what the registry held for its version (and, with another attestation key,
        every key of the element it replaces). `attestation_key` (PEM): the element's, recorded
        at provisioning; another one than the entry's is refused but for a fresh element.
        `table` renames the shoe's table (kept when empty); `config` (game, ez, commission_free,
        squeeze, decks, side_wagers, serial) sets its configuration, the rest kept."""
        old = self.shoes.get(shoe_id)
        keys = [dict(k) for k in old.public_keys] if old else []
        if fresh_element:  # its key for this version replaced, unless it is the same key
            same = load_public_pem(public_pem).public_numbers()
            keys = [k for k in keys if k["version"] != version
                    or load_public_pem(k["key"]).public_numbers() == same]
        if old and old.attestation_key != attestation_key and (fresh_element or attestation_key):
            if not fresh_element:
                raise SabotError(f"shoe {shoe_id_text(shoe_id)} has another attestation key in "
                                 "the registry: "
                                 "a re-provisioned element? register it as a new shoe")
            keys = []  # the old element's keys were certified by its own attestation key
        fields: dict[str, Any] = asdict(old) if old else {"shoe_id": shoe_id}
        if fresh_element or attestation_key:
            fields["attestation_key"] = attestation_key
        if fresh_element and old is not None and (
                old.attestation_key != attestation_key or all(
                    k["version"] != version for k in keys)):
            # another element: the old one's first checkpoint is no longer this shoe's
            fields["first_checkpoint"] = ""
        fields.update(config, public_keys=keys, table=table or fields.get("table", ""))
        entry = ShoeEntry(**fields)
        entry.add_public_key(version, public_pem, certificate)
        changed = old is None or asdict(entry) != asdict(old)
        if changed:
            self.put(entry)
        return entry, changed

    def witnessed(self, shoe_id: int) -> None:
        """The shoe's table is a witnessed one from now on (its key bound to witnesses): at most
        WITNESS_BOUND of its rounds may lie beyond its last cosigned checkpoint (a bound set
        before is kept)."""
        entry = self.shoes[shoe_id]
        if entry.witness_bound is None:
            self.put(replace(entry, witness_bound=WITNESS_BOUND))

    def put(self, entry: ShoeEntry) -> None:
        """Add or replace a shoe's entry and write the file atomically (never half a registry)."""
        old = self.shoes.get(entry.shoe_id)
        if old is not None and not entry.public_keys:
            entry.public_keys = old.public_keys  # rewriting the table keeps the key history
        shoes = dict(self.shoes)
        shoes[entry.shoe_id] = entry
        doc = {"shoes": [asdict(e) for _, e in sorted(shoes.items())]}
        text = json.dumps(doc, indent=1) + "\n"
        if len(text.encode()) > self.max_bytes:  # it could not be read again
            raise SabotError(f"cannot write shoe registry {self.path}: it would be over "
                             f"{_size(self.max_bytes)}")
        self.unwritten = text  # until written: what a caller may save by other means
        self._write(text, self.path)
        self.unwritten = ""
        self.shoes[entry.shoe_id] = entry

    def _write(self, text: str, path: str) -> None:
        """`text` as the file at `path`, whole or not at all: written beside it, then renamed
        over it (the file beside it removed if that fails)."""
        tmp = None
        try:
            fd, tmp = tempfile.mkstemp(dir=os.path.dirname(os.path.abspath(self.path)),
                                       prefix=".sabot-shoes-")
            public_mode(fd)  # public material, handed to witnesses and players: not mkstemp's 600
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(text)
            os.replace(tmp, path)
        except OSError as e:
            if tmp is not None:
                with contextlib.suppress(OSError):
                    os.remove(tmp)
            raise SabotError(f"cannot write shoe registry {self.path}: {e.strerror}") from None

    def check_writable(self) -> None:
        """A SabotError unless a new registry file can be made and renamed in place beside this
        one, as put() does: asked before a shoe is provisioned, which cannot be undone."""
        size = os.path.getsize(self.path) if os.path.isfile(self.path) else 0
        if size + ENTRY_ROOM > self.max_bytes:
            raise SabotError(f"cannot write shoe registry {self.path}: another shoe's entry "
                             f"would take it over {_size(self.max_bytes)}")
        probe = os.path.join(os.path.dirname(os.path.abspath(self.path)),
                             f".sabot-shoes-probe-{os.getpid()}")
        self._write("", probe)
        with contextlib.suppress(OSError):
            os.remove(probe)
