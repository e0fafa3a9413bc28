"""Factory provisioning of a blank shoe: sabot's configuration written into a factory-fresh
ATECC608 and locked, result key 1 and the attestation key made inside, the host command key's
public half written, the shoe's identity put on flash, then the data zone locked, and the
attestation key certifies result key 1 (shoe/rekey.py). docs/ELEMENT.md gives the configuration
byte by byte and why each permission is what it is.

Runs on the shoe itself (`maint.provision`, over a blank shoe's REPL: `sabot provision --port`)
and, for the virtual board, from the host against the element emulator through this same driver
(`sabot provision --flash`): one sequence of chip commands either way.

The data-zone lock is the commit point. Before it the element stays blank (boot offers the REPL,
and provisioning may run again from the top: a locked configuration that is sabot's is kept);
after it the shoe is provisioned for good: no REPL, the command key, result key 1 and the
attestation key fixed."""

import struct

from shoe.element import LOCK, READ, WRITE
from shoe.element_wire import crc16
from shoe.frames import V_B21, V_DEFAULT
from shoe.port import COMMAND_KEY_SLOT
from shoe.store import REKEY_FILE, write_identity

RESULT_VERSIONS = 7  # result key version v lives in slot v - 1 (36-byte private-key slots 0-6)
# The attestation key: made once at provisioning, it signs only messages the element builds
# itself (Sign internal over GenKey's digest of a result key), never bytes the host sends
ATTESTATION_SLOT = 7

# Memory zones (Read / Write param1 bits 0-1, | 0x80 for 32 bytes) and Lock modes. These commands
# live here, not in shoe/element.py: the card path loads the driver, never provisioning.
ZONE_CONFIG = 0x00
ZONE_OTP = 0x01
ZONE_DATA = 0x02
LOCK_CONFIG = 0x00  # Lock param1: the configuration zone
LOCK_DATA = 0x01  # the data and OTP zones
LOCK_SLOT = 0x02  # one slot: | slot << 2
LOCK_NO_CRC = 0x80  # do not compare the zone's summary CRC
_32 = 0x80


def data_address(slot, block, word=0):
    """A data-zone address: block << 8 | slot << 3 | word (a 32-byte access takes word 0)."""
    return block << 8 | slot << 3 | word


def config_address(block, word=0):
    return block << 3 | word


def read(element, zone, address, out):
    """Read 4 or 32 bytes (len(out)) at `address` of a zone into out."""
    n = len(out)
    element.command(READ, zone | _32 if n == 32 else zone, address, n, out=out)
    return out


def write(element, zone, address, data):
    """Write 4 or 32 bytes (len(data)) in the clear at `address` of a zone."""
    n = len(data)
    element.command(WRITE, zone | _32 if n == 32 else zone, address, 1, data, n)


def lock(element, mode, crc=0):
    """Lock a zone (LOCK_CONFIG, LOCK_DATA, with the CRC of its contents unless | LOCK_NO_CRC)
    or one slot (LOCK_SLOT | slot << 2). For good: no command undoes it."""
    element.command(LOCK, mode, crc, 1)


def locked(element):
    """(configuration zone locked, data zone locked), from LockConfig and LockValue."""
    word = bytearray(4)
    read(element, ZONE_CONFIG, config_address(2, 5), word)  # bytes 84-87
    return word[3] != 0x55, word[2] != 0x55

# SlotConfig and KeyConfig, little-endian per slot, as the configuration zone holds them.
#   result key 1 (slot 0): IsSecret, ReadKey 0001: external signatures only (it signs frame
#     digests), WriteConfig 0: no GenKey once the data zone is locked, so version 1 can never be
#     made again
#   result keys 2-7 (slots 1-6): the same, WriteConfig bit 13: GenKey allowed (rekey), and each
#     slot locked on its own after its key is made
#   attestation key (slot 7): IsSecret, ReadKey 0010: internal signatures only (messages the
#     chip builds from GenKey or GenDig, never a digest the host sends), WriteConfig 0: made once
#   command key (slot 9): not secret (its public half), WriteConfig Never after the data lock
#   unused slots (8, 10-15): secret and never written
_SLOT_CONFIG = (b"\x81\x00" + b"\x81\x20" * 6 + b"\x82\x00" + b"\x80\x20" + b"\x00\x20"
                + b"\x80\x20" * 6)
#   private P-256, PubInfo (GenKey may give its public key), Lockable   0x0033
#   public P-256 used without validation, Lockable                    0x0030
#   other data, Lockable                                              0x003C
_KEY_CONFIG = (b"\x33\x00" * 8 + b"\x3c\x00" + b"\x30\x00" + b"\x3c\x00" * 6)


def configuration():
    """Bytes 16-127 of sabot's configuration zone (bytes 0-15 are the chip's own)."""
    c = bytearray(112)
    c[0] = 0xC0  # 16 I2C_Address: 0x60, the default
    # 17 reserved, 18 CountMatch off, 19 ChipMode 0: watchdog 1.3 s, clock divider M0 (the
    # execution times the driver waits for), no TTL input levels
    c[20 - 16:52 - 16] = _SLOT_CONFIG
    c[52 - 16:56 - 16] = b"\xff\xff\xff\xff"  # 52-59 Counter[0] starts at zero (the data
    c[60 - 16:64 - 16] = b"\xff\xff\xff\xff"  # sheet's encoding), 60-67 Counter[1] too
    # 68 UseLock, 69 VolatileKeyPermission, 70-71 SecureBoot, 72-74 KDF IV: all off (0)
    # 84 UserExtra, 85 UserExtraAdd 0; 86 LockValue, 87 LockConfig: unlocked until the locks
    c[86 - 16] = c[87 - 16] = 0x55
    c[88 - 16] = c[89 - 16] = 0xFF  # SlotLocked: every slot unlocked (a 0 bit locks one)
    # 90-91 ChipOptions 0 (no I/O protection key, health test failure clears), 92-95 X509format
    c[96 - 16:128 - 16] = _KEY_CONFIG
    return c


class Refused(ValueError):
    """Provisioning cannot go on: one line saying why."""


def _read_config(element):
    config = bytearray(128)
    block = bytearray(32)
    for b in range(4):
        read(element, ZONE_CONFIG, config_address(b), block)
        config[b * 32 : b * 32 + 32] = block
    return config


def _ours(config):
    """Whether a configuration zone is sabot's (the lock bytes and SlotLocked aside)."""
    want = configuration()
    for i in range(112):
        if 70 <= i < 74:  # 86-89: LockValue, LockConfig, SlotLocked change after the locks
            continue
        if config[16 + i] != want[i]:
            return False
    return True


def _write_configuration(element):
    """Every writable byte of sabot's configuration: 16-83 and 88-127 (84-87 are UpdateExtra's
    and Lock's), in 4-byte words where a block holds bytes Write may not touch."""
    want = configuration()
    for at in range(16, 128, 4):
        if 84 <= at < 88:
            continue
        if at in (32, 96):  # blocks 1 and 3: one 32-byte write each
            write(element, ZONE_CONFIG, config_address(at // 32), want[at - 16 : at + 16])
        elif not 32 <= at < 64 and not at >= 96:
            write(element, ZONE_CONFIG, config_address(at // 32, at % 32 // 4),
                          want[at - 16 : at - 12])


def _command_key_blocks(xy):
    """The 72-byte slot's contents for a public key, as CryptoAuthLib lays it out: 4 pad bytes,
    X, 4 pad bytes, Y."""
    raw = bytearray(72)
    raw[4:36] = xy[0:32]
    raw[40:72] = xy[32:64]
    return raw


def state(element):
    """'blank' (configuration unlocked), 'configured' (sabot's configuration locked, data zone
    not), 'provisioned' (both locked, sabot's), or 'foreign' (locked with another
    configuration)."""
    config_locked, data_locked = locked(element)
    if not config_locked:
        return "blank"
    if not _ours(_read_config(element)):
        return "foreign"
    return "provisioned" if data_locked else "configured"


def provision(element, flash, shoe_id, variant, command_xy, decks=8, rules=b""):
    """Provision a blank shoe for the host command key (its public X||Y), dealing `decks` decks
    of the game `variant` names (flash `variant`: those two bytes, then a 21 Baccarat table's two
    `rules` bytes: shoe/b21.py): returns (serial(9),
    result key 1's X||Y, proof r||s: key 1's signature of statement(...), the attestation key's
    X||Y, its certificate r||s of result key 1: shoe/rekey.py certify, and key 1's signature of
    the log's first checkpoint: first_checkpoint), all of which the host
    checks before it registers the shoe. Raises Refused."""
    if len(command_xy) != 64:
        raise Refused("the command key must be a P-256 public key (64 bytes X||Y)")
    if not 0 <= variant <= 255 or not 1 <= decks <= 8:
        raise Refused("a shoe deals 1 to 8 decks of a game its variant byte names")
    if variant & V_B21 and variant != V_B21 | V_DEFAULT:
        raise Refused("21 Baccarat's variant byte is 130, no other with bit 7")
    if len(rules) != (2 if variant & V_B21 else 0):
        raise Refused("a 21 Baccarat table has two rule bytes, and no other game any")
    if rules and not (12 <= rules[0] & 31 <= 21 and rules[1] < 64
                      and (rules[1] == 0 or 12 <= rules[1] & 31 <= 21)):
        raise Refused("those rule bytes name no 21 Baccarat table's settings")
    now = state(element)
    if now == "foreign":
        raise Refused("the element is locked with another configuration than sabot's")
    if now == "provisioned":
        raise Refused("the shoe is provisioned already (its element's data zone is locked)")
    if now == "blank":
        _write_configuration(element)
        config = _read_config(element)
        if not _ours(config):
            raise Refused("the element did not keep the configuration written to it")
        lock(element, LOCK_CONFIG, crc16(config, 0, 128))  # exactly what was read back
    xy = bytearray(64)
    element.genkey(0, xy)
    attestation = bytearray(64)
    element.genkey(ATTESTATION_SLOT, attestation)  # its last GenKey: WriteConfig has no bit
    blocks = _command_key_blocks(command_xy)
    write(element, ZONE_DATA, data_address(COMMAND_KEY_SLOT, 0), blocks[0:32])
    write(element, ZONE_DATA, data_address(COMMAND_KEY_SLOT, 1), blocks[32:64])
    write(element, ZONE_DATA, data_address(COMMAND_KEY_SLOT, 2, 0), blocks[64:68])
    write(element, ZONE_DATA, data_address(COMMAND_KEY_SLOT, 2, 1), blocks[68:72])
    write_identity(flash, shoe_id, 1)
    flash.write_atomic("variant", bytes((variant, decks)) + rules)  # every shoe_start says it
    # the rekey gate closed as after a rekey in shoe 0: the first waits for a round dealt too
    flash.write_atomic(REKEY_FILE, bytes(2))
    # The commit point. No CRC: it would cover the private key, which nobody outside the chip
    # knows (CryptoAuthLib's atcab_lock_data_zone() locks so too); what matters is read back.
    lock(element, LOCK_DATA | LOCK_NO_CRC)
    stored = bytearray(32)
    for b in range(2):
        read(element, ZONE_DATA, data_address(COMMAND_KEY_SLOT, b), stored)
        if stored != blocks[b * 32 : b * 32 + 32]:
            raise Refused("the command key the element holds is not the one written")
    # Slot locks, beside WriteConfig's missing GenKey bit: every certificate then says "locked"
    # (SlotLocked is in the message Sign internal signs) for every version alike
    lock(element, LOCK_SLOT | 0 << 2)
    lock(element, LOCK_SLOT | ATTESTATION_SLOT << 2)
    serial = element.serial()
    digest = bytearray(32)
    element.sha256(statement(serial, shoe_id, xy, command_xy), digest)
    proof = bytearray(64)
    element.sign(0, proof)
    from shoe.rekey import certify  # off the card path, as this module

    certified, _, certificate = certify(element, shoe_id, 1)
    if certified != xy:
        raise Refused("the element certified another key than result key 1")
    return (serial, bytes(xy), bytes(proof), bytes(attestation), bytes(certificate),
            first_checkpoint(element, shoe_id))


def first_checkpoint(element, shoe_id):
    """Result key 1's signature r||s of the shoe's log at size 0 (shoe/tree.py's note text, the
    root of no leaves): what `sabot provision --witness` hands the witnesses, so they hold the
    shoe's key from the factory on, before anyone at a casino could register another."""
    import hashlib

    from shoe.frames import shoe_bytes
    from shoe.tree import note_text_into

    text = bytearray(96)
    n = note_text_into(text, shoe_bytes(shoe_id), 0, hashlib.sha256(b"").digest())
    digest = bytearray(32)
    element.sha_from(text, 0, n, digest)
    signature = bytearray(64)
    element.sign(0, signature)
    return bytes(signature)


def statement(serial, shoe_id, result_xy, command_xy):
    """What result key 1 signs at provisioning: the host sees the key it registers sign."""
    return (b"sabot-provision" + bytes(serial) + struct.pack(">I", shoe_id) + bytes(result_xy)
            + bytes(command_xy))
