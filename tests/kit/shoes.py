"""Shoes for host tests: signed frames without a board, a provisioned virtual shoe, and a live
virtual board with the validator on its link (Rig)."""

from kit.base import SIGN_MS
from kit.procs import free_port_for_tests


def signing_shoe(shoe_id=0x5AB0_0001, **config):
    """A shoe's frames without a board: (ShoeSigner with a fresh result key standing in for the
    element, the registry entry holding its public half as version 1)."""
    from cryptography.hazmat.primitives.asymmetric import ec

    from sabot import keys
    from sabot.registry import ShoeEntry
    from sabot.virtual.capture_gen import ShoeSigner

    key = ec.generate_private_key(ec.SECP256R1())
    entry = ShoeEntry(shoe_id, **config)
    entry.add_public_key(1, keys.public_pem(key.public_key()))
    return ShoeSigner(key, shoe_id), entry


def registry_of(tmp, *shoe_ids, name="shoes.json"):
    """A registry file holding these shoes (added to what it holds), each with the public key of
    no shoe here; its path."""
    from cryptography.hazmat.primitives.asymmetric import ec

    from sabot import keys
    from sabot.registry import Registry, ShoeEntry

    reg = Registry.load(str(tmp / name))
    for shoe_id in shoe_ids:
        entry = ShoeEntry(shoe_id)
        entry.add_public_key(1, keys.public_pem(
            ec.generate_private_key(ec.SECP256R1()).public_key()))
        reg.put(entry)
    return tmp / name


def provision_shoe(tmp, variant=None, key_file="command.pem", shoe_id=None, decks=8):
    """A virtual shoe provisioned for a new command key, as `sabot provision` does it: (command
    key, flash dir, registry entry with the configuration and result key, registry path)."""
    from sabot import keys
    from sabot.protocol import decode_variant
    from sabot.registry import Registry, ShoeEntry
    from sabot.virtual.provisioning import provision, set_variant

    key = keys.load_or_create(str(tmp / key_file))
    flash = str(tmp / "flash")
    sid, version, pem, *_ = provision(flash, key, shoe_id)
    variant = 2 if variant is None else variant
    set_variant(flash, variant, decks)
    # the registry's word on this shoe: the configuration it was provisioned with, its key
    config = ShoeEntry(sid, decks=decks, **decode_variant(variant))
    config.add_public_key(version, pem)
    reg = Registry.load(str(tmp / "sabot-shoes.json"))
    reg.put(config)
    return key, flash, config, reg.path


class Rig:
    """A virtual shoe with the validator on its link, driven input by input."""

    def __init__(self, tmp, variant=None, decks=8):
        from sabot.audit.validator import Validator
        from sabot.link.host import HostLink
        from sabot.virtual.board import VirtualBoard

        self.tmp = tmp
        self.key, flash, self.config, self.registry = provision_shoe(tmp, variant, decks=decks)
        self.shoe_id = self.config.shoe_id
        self.board = VirtualBoard(flash, port=free_port_for_tests(), sign_ms=SIGN_MS).start()
        try:
            self.records = []
            self.validator = Validator(self.config, str(tmp / "audit.db"),
                                       on_record=lambda k, r: self.records.append((k, r)))
            self.link = HostLink(self.board.url, self.validator, self.key)
            self.closed = False
            self.settle()
        except BaseException:
            self.board.stop()  # and its element process
            raise

    def settle(self):
        """Wait until the shoe has read every input sent to it and every frame those produced is
        stored: the status answering a hello sent after that comes after those frames."""
        assert self.board.wait_read(10), "the board did not read its input"
        assert self.link.ask(10) is not None, "the shoe did not answer a hello"

    def send(self, data):
        self.board.send(data)
        self.settle()

    def deal(self, *tokens):
        from sabot.virtual.dealer_channel import card_bytes

        for t in tokens:
            self.send(card_bytes(t))

    def burn(self):
        self.deal("AS", "2H")  # exposed ace: one more card burned

    def of(self, kind):
        return [r for k, r in self.records if k == kind]

    def alarms(self):
        return [a["kind"] for a in self.validator.alarms]

    @property
    def phase(self):
        """The shoe's phase in its latest status (fresh after settle())."""
        return self.validator.status["phase"]

    def close(self):
        if self.closed:
            return
        self.closed = True
        self.link.close()
        self.board.stop()
        self.validator.store.close()
        assert self.validator.counts["rejected"] == 0, self.validator.rejections


def validated_capture(d, shoes, seed, **config):
    """`shoes` whole shoes from capture_gen (signed as a version-2 shoe signs) in d/cap.bin,
    validated into d/audit.db, the shoe's public key in d/shoes.json; the Validator."""
    from sabot.audit.validator import Validator
    from sabot.registry import Registry
    from sabot.virtual import capture_gen

    entry, cap, _ = capture_gen.generate(str(d), shoes, seed=seed, **config)
    (d / "cap.bin").write_bytes(cap)
    Registry(str(d / "shoes.json")).put(entry)
    v = Validator(entry, str(d / "audit.db"))
    v.receive(cap)
    v.finish()
    v.store.close()
    return v


def flip_a_stored_result(db):
    """An insider's edit of a store: the append-only trigger dropped, one bit of the first stored
    result frame's signature flipped. The edited frame's id."""
    import sqlite3

    con = sqlite3.connect(db)
    con.execute("DROP TRIGGER frames_append_only_u")
    fid, raw = con.execute("SELECT id, raw FROM frames WHERE type='result' LIMIT 1").fetchone()
    con.execute("UPDATE frames SET raw=? WHERE id=?", (raw[:-1] + bytes([raw[-1] ^ 1]), fid))
    con.commit()
    con.close()
    return fid
