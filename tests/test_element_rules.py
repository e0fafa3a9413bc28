"""The element emulator refuses what a real ATECC608 refuses: each test is one rule of the data
sheet (ATECC608B, "Configuration zone", "Lock command", "Write command", "Read command", "GenKey
command", "Sign command", "Verify command"), as Microchip's CryptoAuthLib and
dmazzella/ucryptoauthlib drive it — through the shoe's own driver, in process.

Then sabot's provisioning on such a chip: a factory-fresh one is set up, a provisioned one or one
locked with another configuration is refused, and an interrupted provisioning starts again."""

import hashlib

import pytest
from cryptography.hazmat.primitives.asymmetric import ec

from sabot import keys
from sabot.errors import SabotError
from sabot.registry import check_provisioning
from sabot.virtual import factory
from sabot.virtual.element_formats import crc16, public_key_from_xy, signature_to_der
from sabot.virtual.element_store import KeyStore

el_mod = factory.firmware("shoe.element")
provision = factory.firmware("shoe.provision")
store_mod = factory.firmware("shoe.store")
ElementError = el_mod.ElementError
CONFIG, OTP, DATA = provision.ZONE_CONFIG, provision.ZONE_OTP, provision.ZONE_DATA
addr = provision.data_address


class Chip:
    """The driver with provisioning's memory commands as methods (shoe/provision.py)."""

    def __init__(self, element):
        self.element = element

    def __getattr__(self, name):
        return getattr(self.element, name)

    def read(self, zone, address, out):
        return provision.read(self.element, zone, address, out)

    def write(self, zone, address, data):
        provision.write(self.element, zone, address, data)

    def lock(self, mode, crc=0):
        provision.lock(self.element, mode, crc)

    def locked(self):
        return provision.locked(self.element)
COMMAND_XY = keys.xy(ec.generate_private_key(ec.SECP256R1()).public_key())


def refused(call, status=el_mod.EXECUTION_ERROR):
    with pytest.raises(ElementError) as e:
        call()
    assert e.value.status == status
    return True


@pytest.fixture
def chip(tmp_path):
    """A factory-fresh chip (an empty store) and its driver."""
    return Chip(factory.element(tmp_path / "el"))


def config_of(chip):
    return provision._read_config(chip)


def lock_sabot_config(chip):
    provision._write_configuration(chip)
    chip.lock(provision.LOCK_CONFIG, el_mod.crc16(config_of(chip), 0, 128))


def test_a_factory_chip_has_both_zones_unlocked(chip):
    # LockValue (byte 86) and LockConfig (87) are 0x55 until locked; SlotLocked (88-89) all ones
    c = config_of(chip)
    assert chip.locked() == (False, False) and c[86] == c[87] == 0x55 and c[88:90] == b"\xff\xff"
    assert c[0:2] == b"\x01\x23" and c[12] == 0xEE and chip.info() == bytes.fromhex("00006003")
    assert provision.state(chip) == "blank"


def test_before_the_configuration_lock_keys_and_the_data_zone_are_off_limits(chip):
    # "GenKey, Sign, ... require the configuration zone to be locked"; the data zone can be
    # neither written nor read before it; Random answers a fixed pattern
    assert refused(lambda: chip.genkey(0, bytearray(64)))
    assert refused(lambda: chip.write(DATA, addr(9, 0), bytes(32)))
    assert refused(lambda: chip.read(DATA, addr(9, 0), bytearray(32)))
    assert refused(lambda: chip.lock(provision.LOCK_DATA | provision.LOCK_NO_CRC))
    assert refused(lambda: chip.counter(0))
    out = bytearray(32)
    assert chip.random(out) == bytes.fromhex("ffff0000") * 8


def test_configuration_writes_spare_the_factory_bytes_and_the_lock_bytes(chip):
    # bytes 0-15 (serial number, revision, I2C_Enable) are never written; 84-87 change only by
    # UpdateExtra and Lock, so a 32-byte write of block 2 is refused too
    assert refused(lambda: chip.write(CONFIG, provision.config_address(0, 0), b"\0\0\0\0"))
    assert refused(lambda: chip.write(CONFIG, provision.config_address(0), bytes(32)))
    assert refused(lambda: chip.write(CONFIG, provision.config_address(2, 5), b"\0\0\0\0"))
    assert refused(lambda: chip.write(CONFIG, provision.config_address(2), bytes(32)))
    chip.write(CONFIG, provision.config_address(0, 5), b"\x81\x20\x81\x20")  # bytes 20-23
    assert config_of(chip)[20:24] == b"\x81\x20\x81\x20"


def test_the_configuration_lock_checks_its_crc_and_is_for_good(chip):
    # Lock mode 0 compares the CRC of all 128 bytes; a mismatch locks nothing
    provision._write_configuration(chip)
    crc = el_mod.crc16(config_of(chip), 0, 128)
    assert refused(lambda: chip.lock(provision.LOCK_CONFIG, crc ^ 1))
    assert chip.locked() == (False, False)
    chip.lock(provision.LOCK_CONFIG, crc)
    assert chip.locked() == (True, False) and provision.state(chip) == "configured"
    assert refused(lambda: chip.lock(provision.LOCK_CONFIG | provision.LOCK_NO_CRC))
    assert refused(lambda: chip.write(CONFIG, provision.config_address(0, 5), b"\0\0\0\0"))


def test_between_the_locks(chip):
    # data zone unlocked: clear writes to any slot but a private key's (PrivWrite only), no
    # reads, GenKey in any private-key slot, no Sign, no single-slot lock
    lock_sabot_config(chip)
    assert refused(lambda: chip.write(DATA, addr(0, 0), bytes(32)))
    chip.write(DATA, addr(9, 0), bytes(range(32)))
    assert refused(lambda: chip.read(DATA, addr(9, 0), bytearray(32)))
    xy = bytearray(64)
    chip.genkey(0, xy)
    chip.genkey(0, bytearray(64))  # made again: nothing fixes slot 0 before the data lock
    assert refused(lambda: chip.sign_digest(0, bytes(32), bytearray(64)))
    assert refused(lambda: chip.lock(provision.LOCK_SLOT | 1 << 2))
    assert refused(lambda: chip.write(DATA, addr(9, 2), bytes(32)))  # past the 72-byte slot


def test_the_data_lock_checks_its_crc(tmp_path):
    store = tmp_path / "el"
    chip = Chip(factory.element(store))
    lock_sabot_config(chip)
    chip.write(OTP, provision.config_address(0), bytes(range(32)))
    contents = bytes(KeyStore(store).data) + bytes(KeyStore(store).otp)
    crc = crc16(contents)
    assert refused(lambda: chip.lock(provision.LOCK_DATA, (crc[0] | crc[1] << 8) ^ 0x100))
    chip.lock(provision.LOCK_DATA, crc[0] | crc[1] << 8)
    assert chip.locked() == (True, True)
    assert refused(lambda: chip.lock(provision.LOCK_DATA | provision.LOCK_NO_CRC))  # once only
    assert refused(lambda: chip.write(OTP, provision.config_address(0), bytes(32)))  # read-only
    assert chip.read(OTP, provision.config_address(0), bytearray(32)) == bytes(range(32))


@pytest.fixture
def provisioned(tmp_path):
    store = tmp_path / "el"
    serial, xy, proof, *_ = factory.provision(store, tmp_path / "flash", 0x5AB0_0007, 2,
                                                COMMAND_XY)
    return Chip(factory.element(store)), serial, xy, proof, tmp_path


def test_a_provisioned_chip_keeps_its_keys_where_sabot_put_them(provisioned):
    chip, serial, xy, proof, _ = provisioned
    assert chip.locked() == (True, True) and provision.state(chip) == "provisioned"
    # SlotConfig.IsSecret: the private key's slot is never read in the clear; the command
    # key's slot is readable and WriteConfig Never refuses any new one
    assert refused(lambda: chip.read(DATA, addr(0, 0), bytearray(32)))
    assert factory.command_key_xy(chip_store(provisioned)) == COMMAND_XY
    assert refused(lambda: chip.write(DATA, addr(9, 0), bytes(32)))
    # slot 0's WriteConfig has no GenKey bit: version 1 can never be made again
    assert refused(lambda: chip.genkey(0, bytearray(64)))
    assert chip.public_key(0, bytearray(64)) == xy
    # Verify stored takes a public-key slot only; Sign a private-key slot only
    assert refused(lambda: chip.verify_stored(0, bytes(32), bytes(64)))
    assert refused(lambda: chip.sign_digest(9, bytes(32), bytearray(64)))
    # the key made inside signed the statement naming chip, shoe and command key
    check_provisioning(serial, 0x5AB0_0007, xy, COMMAND_XY, proof)
    with pytest.raises(SabotError):
        check_provisioning(serial, 0x5AB0_0008, xy, COMMAND_XY, proof)


def chip_store(provisioned):
    return provisioned[4] / "el"


def test_a_rekey_slot_takes_one_key_then_is_locked(provisioned):
    # after the data lock GenKey needs SlotConfig.WriteConfig's GenKey bit and an unlocked slot
    # (SlotLocked); Lock mode 2 locks one slot of a Lockable key, once
    chip = provisioned[0]
    new = bytearray(64)
    chip.genkey(1, new)
    chip.lock(provision.LOCK_SLOT | 1 << 2)
    assert refused(lambda: chip.genkey(1, bytearray(64)))
    assert refused(lambda: chip.lock(provision.LOCK_SLOT | 1 << 2))
    assert config_of(chip)[88] == 0x7C  # slots 0 and 7 (provisioning's), then 1
    digest = hashlib.sha256(b"v2").digest()
    sig = chip.sign_digest(1, digest, bytearray(64))
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric.utils import Prehashed
    public_key_from_xy(bytes(new)).verify(signature_to_der(bytes(sig)), digest,
                                          ec.ECDSA(Prehashed(hashes.SHA256())))


def test_provisioning_refuses_a_provisioned_or_foreign_chip(provisioned, tmp_path):
    with pytest.raises(SabotError, match="provisioned already"):
        factory.provision(chip_store(provisioned), tmp_path / "f2", 1, 2, COMMAND_XY)
    foreign = tmp_path / "foreign"
    chip = Chip(factory.element(foreign))
    chip.write(CONFIG, provision.config_address(0, 5), b"\x8f\x8f\x8f\x8f")  # someone else's
    chip.lock(provision.LOCK_CONFIG | provision.LOCK_NO_CRC)
    with pytest.raises(SabotError, match="another configuration"):
        factory.provision(foreign, tmp_path / "f3", 1, 2, COMMAND_XY)
    assert not (tmp_path / "f3" / "identity").exists()


def test_an_interrupted_provisioning_starts_again(tmp_path):
    # power lost after the configuration lock: the shoe is still blank (its data zone open), and
    # provisioning goes on from the locked configuration, which is sabot's
    store = tmp_path / "el"
    lock_sabot_config(Chip(factory.element(store)))
    serial, xy, proof, *_ = factory.provision(store, tmp_path / "flash", 3, 2, COMMAND_XY)
    check_provisioning(serial, 3, xy, COMMAND_XY, proof)
    flash = store_mod.Flash(str(tmp_path / "flash"))
    assert store_mod.load_identity(flash) == (1, 3)
    assert flash.read("variant") == b"\x02\x08"  # the variant byte, the deck count


def configured_with(tmp_path, patch, data_lock=True, name="el"):
    """A chip locked with sabot's configuration but `patch` ({byte: value}), result key 1 made,
    the data zone locked unless told not to."""
    chip = Chip(factory.element(tmp_path / name))
    provision._write_configuration(chip)
    for at, value in patch.items():
        word = bytearray(provision._read_config(chip)[at & ~3 : (at & ~3) + 4])
        word[at & 3] = value
        chip.write(CONFIG, provision.config_address(at // 32, at % 32 // 4), bytes(word))
    chip.lock(provision.LOCK_CONFIG | provision.LOCK_NO_CRC)
    chip.genkey(0, bytearray(64))
    if data_lock:
        chip.lock(provision.LOCK_DATA | provision.LOCK_NO_CRC)
    return chip


def test_before_the_configuration_lock_nothing_signs_or_verifies(chip):
    assert refused(lambda: chip.sign_digest(0, bytes(32), bytearray(64)))
    assert refused(lambda: chip.verify_external(bytes(32), bytes(64), COMMAND_XY))
    assert refused(lambda: chip.public_key(0, bytearray(64)))


def test_a_private_key_is_never_read_whatever_its_slot_config_says(tmp_path):
    # KeyConfig.Private: "ECC private keys can never be read", IsSecret or not
    chip = configured_with(tmp_path, {20: 0x03})  # slot 0's SlotConfig without IsSecret
    assert refused(lambda: chip.read(DATA, addr(0, 0), bytearray(32)))
    assert refused(lambda: chip.read(DATA, addr(0, 1), bytearray(32)))


def test_otp_is_unreadable_until_the_data_lock(tmp_path):
    chip = configured_with(tmp_path, {}, data_lock=False)
    assert refused(lambda: chip.read(OTP, provision.config_address(0), bytearray(32)))


def test_permissions_from_slot_and_key_config(tmp_path):
    # GenKey's public mode needs KeyConfig.PubInfo; Sign needs SlotConfig.ReadKey bit 0 (external
    # signatures); Verify stored refuses a key that needs validation (PubInfo on a public key);
    # a slot lock needs KeyConfig.Lockable; a locked slot takes no Write
    chip = configured_with(tmp_path, {96: 0x31, 20: 0x82, 114: 0x32, 98: 0x13, 39: 0x00})
    assert refused(lambda: chip.public_key(0, bytearray(64)))
    assert refused(lambda: chip.sign_digest(0, bytes(32), bytearray(64)))
    assert refused(lambda: chip.verify_stored(9, bytes(32), bytes(64)))
    assert refused(lambda: chip.lock(provision.LOCK_SLOT | 1 << 2))  # slot 1 not Lockable
    chip.write(DATA, addr(9, 0), bytes(32))  # WriteConfig 0000 (Always): a clear write
    chip.lock(provision.LOCK_SLOT | 9 << 2)
    assert refused(lambda: chip.write(DATA, addr(9, 0), bytes(32)))


@pytest.mark.board
def test_a_shoe_whose_element_is_not_configured_as_sabots_tilts(tmp_path):
    """A chip locked with a weaker configuration (slot 0 regenerable, slot 9 writable) is
    'foreign': the shoe signs nothing with it and tilts, never deals."""
    from sabot.virtual.board import VirtualBoard

    from kit import SIGN_MS

    store = tmp_path / "flash.element"
    chip = configured_with(tmp_path, {21: 0x20, 39: 0x00}, name="flash.element")
    assert provision.state(chip) == "foreign"
    chip.genkey(0, bytearray(64))  # what that configuration lets anyone do: a new key 1
    flash = store_mod.Flash(str(tmp_path / "flash"))
    (tmp_path / "flash").mkdir()
    store_mod.write_identity(flash, 5, 1)
    board = VirtualBoard(tmp_path / "flash", sign_ms=SIGN_MS, element=str(store))
    try:
        board.start()
        assert board.wait(lambda s: s[0] == 5 and s[5] == 15)  # PH_TILT, ALARM_TILT
    finally:
        board.stop()
