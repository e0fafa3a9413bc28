"""Result key certificates the element builds itself (docs/ELEMENT.md "Attestation"): the
attestation key signs, with Sign internal, the message the chip assembles after GenKey's digest of
a result key's slot, and the host rebuilds that message byte for byte (sabot/attestation.py) from
CryptoAuthLib's layout. The chip refuses every other way to have the attestation key sign, and
the registry refuses every certificate an insider can make: an external signature over bytes the
host chose, a key made on the host, a certificate of another version or another shoe.

All in process: the shoe's driver, provisioning and rekey code over the emulated chip."""

import hashlib
import json

import pytest
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec, utils

from sabot import attestation, keys
from sabot.errors import SabotError
from sabot.registry import Registry, ShoeEntry, public_from_xy
from sabot.virtual import factory
from sabot.virtual.element_formats import genkey_message, sign_internal_message, signature_to_der

el_mod = factory.firmware("shoe.element")
provision = factory.firmware("shoe.provision")
rekey_mod = factory.firmware("shoe.rekey")
store_mod = factory.firmware("shoe.store")
ElementError = el_mod.ElementError
SHOE = 0x5AB0_0011
COMMAND_XY = keys.xy(ec.generate_private_key(ec.SECP256R1()).public_key())


def refused(call):
    with pytest.raises(ElementError) as e:
        call()
    return e.value.status == el_mod.EXECUTION_ERROR


class FactoryShoe:
    """A provisioned virtual shoe: its element store, flash and what provisioning returned."""

    def __init__(self, tmp, shoe_id=SHOE):
        self.store, self.flash, self.shoe_id = tmp / "el", tmp / "flash", shoe_id
        (self.serial, self.xy, self.proof, self.attestation_xy,
         self.certificate, _) = factory.provision(self.store, self.flash, shoe_id, 2, COMMAND_XY)

    def element(self):
        return factory.element(self.store)

    def entry(self, shoe_id=None):
        """Its registry entry as provisioning writes it: the attestation key, key 1 and its
        certificate (under another shoe id: the same element's keys, no key yet)."""
        e = ShoeEntry(self.shoe_id if shoe_id is None else shoe_id, serial=self.serial.hex(),
                      attestation_key=pem(self.attestation_xy))
        if shoe_id is None:
            assert e.add_public_key(1, pem(self.xy), self.certificate.hex())
        return e

    def rekey(self):
        return factory.rekey(self.store, self.flash)


def pem(xy):
    return keys.public_pem(public_from_xy(bytes(xy)))


def sign_raw(private_key, digest):
    r, s = utils.decode_dss_signature(private_key.sign(digest, ec.ECDSA(utils.Prehashed(
        hashes.SHA256()))))
    return r.to_bytes(32, "big") + s.to_bytes(32, "big")


@pytest.fixture
def shoe(tmp_path):
    return FactoryShoe(tmp_path)


# -- the message layout ---------------------------------------------------------------------


SERIAL = bytes.fromhex("0123 a1b2 c3d4e5f6 ee")  # SN[0:1] 01 23, SN[2:3] a1 b2, SN[4:7], SN[8] ee
TEMPKEY = bytes(range(0x80, 0xA0))
XY = bytes(range(64))


def test_the_genkey_digest_message_is_the_data_sheets():
    # "Public Key Digest Generation": TempKey(32) OpCode(1) Param1(1) Param2(2) SN[8] SN[0:1]
    # 25 zeros, X and Y (64): 128 bytes, written out field by field
    want = TEMPKEY + bytes.fromhex("40 08 0300 ee 0123") + bytes(25) + XY
    assert len(want) == 128
    assert genkey_message(TEMPKEY, 0x08, 3, SERIAL, XY) == want
    assert attestation.genkey_digest(TEMPKEY, 3, SERIAL, XY) == hashlib.sha256(want).digest()


def test_the_sign_internal_message_is_the_data_sheets():
    # "Internal Message Generation", serial number included: TempKey, Opcode, Mode, KeyID,
    # SlotConfig and KeyConfig of TempKeyFlags.KeyID, TempKeyFlags, 2 zeros, SN[8], SN[4:7],
    # SN[0:1], SN[2:3], SlotLocked:TempKeyFlags.KeyID, 0x00, 0x00: 55 bytes
    want = TEMPKEY + bytes.fromhex("41 40 0700 8120 3300 53 0000 ee c3d4e5f6 0123 a1b2 00 00 00")
    assert len(want) == 55
    assert sign_internal_message(TEMPKEY, 0x40, 7, 0x2081, 0x0033, 0x53, SERIAL, True) == want
    assert attestation.sign_internal_message(TEMPKEY, 3, SERIAL) == want
    # without the include-SN bit: zeros where SN[4:7] and SN[2:3] were; an unlocked slot: 01
    bare = sign_internal_message(TEMPKEY, 0x00, 7, 0x2081, 0x0033, 0x53, SERIAL, False)
    assert bare == want[:33] + b"\x00" + want[34:44] + bytes(4) + want[48:50] + bytes(2) + \
        b"\x01\x00\x00"


def test_the_hosts_configuration_is_the_one_provisioning_writes():
    # the host rebuilds SlotConfig/KeyConfig from its own constants: they must be the chip's
    c = bytes(16) + bytes(provision.configuration())
    word = lambda at: c[at] | c[at + 1] << 8  # noqa: E731
    for slot in range(attestation.RESULT_VERSIONS):
        assert word(20 + 2 * slot) == attestation.RESULT_SLOT_CONFIG[slot]
        assert word(96 + 2 * slot) == attestation.RESULT_KEY_CONFIG
    assert attestation.ATTESTATION_SLOT == provision.ATTESTATION_SLOT
    assert attestation.RESULT_VERSIONS == provision.RESULT_VERSIONS
    assert word(20 + 14) == attestation.ATTESTATION_SLOT_CONFIG
    assert word(96 + 14) == attestation.ATTESTATION_KEY_CONFIG


def test_the_chips_certificate_verifies_against_the_host_rebuild(shoe):
    # provisioning's certificate of key 1, and one made now: both over the rebuilt message
    key = public_from_xy(shoe.attestation_xy)
    attestation.check_certificate(key, shoe.serial, SHOE, 1, shoe.xy, shoe.certificate)
    xy, nonce, cert = rekey_mod.certify(shoe.element(), SHOE, 1)
    assert bytes(xy) == shoe.xy and bytes(nonce) == attestation.rekey_nonce(SHOE, 1)
    message = attestation.certificate_message(shoe.serial, SHOE, 1, shoe.xy)
    key.verify(signature_to_der(bytes(cert)), message, ec.ECDSA(hashes.SHA256()))


# -- what the chip refuses --------------------------------------------------------------------


def test_the_attestation_key_signs_no_host_bytes(shoe):
    chip, slot = shoe.element(), provision.ATTESTATION_SLOT
    # external Sign: its ReadKey has no external bit
    assert refused(lambda: chip.sign_digest(slot, bytes(32), bytearray(64)))
    # Sign internal of a TempKey a Nonce or SHA put there (bytes the host chose)
    chip.load_digest(hashlib.sha256(b"host").digest())
    assert refused(lambda: chip.command(el_mod.SIGN, 0x40, slot, 64, out=bytearray(64)))
    chip.sha256(b"host bytes", bytearray(32))
    assert refused(lambda: chip.command(el_mod.SIGN, 0x40, slot, 64, out=bytearray(64)))
    # GenKey's digest needs a valid TempKey first; a Sign uses TempKey up
    chip.sleep()
    assert refused(lambda: chip.command(el_mod.GENKEY, 0x08, 0, 64, out=bytearray(64)))
    rekey_mod.certify(chip, SHOE, 1)
    assert refused(lambda: chip.command(el_mod.SIGN, 0x40, slot, 64, out=bytearray(64)))


def test_result_keys_sign_no_internal_message(shoe):
    chip = shoe.element()
    chip.load_digest(bytes(32))
    chip.command(el_mod.GENKEY, 0x08, 0, 64, out=bytearray(64))
    assert refused(lambda: chip.command(el_mod.SIGN, 0x40, 0, 64, out=bytearray(64)))
    chip.sign_digest(0, bytes(32), bytearray(64))  # external: what frames need


def test_the_attestation_key_is_made_once(shoe):
    # WriteConfig without the GenKey bit, and its slot locked: neither GenKey mode makes another
    chip, slot = shoe.element(), provision.ATTESTATION_SLOT
    assert refused(lambda: chip.genkey(slot, bytearray(64)))
    chip.load_digest(bytes(32))
    assert refused(lambda: chip.command(el_mod.GENKEY, 0x0C, slot, 64, out=bytearray(64)))
    assert not provision._read_config(chip)[88] & 0x81  # slots 0 and 7 locked
    xy = bytearray(64)
    assert chip.public_key(slot, xy) == shoe.attestation_xy


# -- rekey and the registry -----------------------------------------------------------------


def test_a_rekey_is_certified_and_the_registry_takes_it(shoe, tmp_path):
    entry = shoe.entry()
    version, xy, nonce, cert = shoe.rekey()
    assert version == 2 and nonce == attestation.rekey_nonce(SHOE, 2)
    assert store_mod.load_identity(store_mod.Flash(str(shoe.flash))) == (2, SHOE)
    assert factory.result_public_xy(shoe.store, 2) == xy
    assert entry.add_public_key(2, pem(xy), cert.hex())
    reg = Registry(str(tmp_path / "shoes.json"))
    reg.put(entry)
    doc = json.loads((tmp_path / "shoes.json").read_text())["shoes"][0]
    assert doc["attestation_key"] == pem(shoe.attestation_xy)
    assert doc["serial"] == shoe.serial.hex()
    assert [k["certificate"] for k in doc["public_keys"]] == [shoe.certificate.hex(), cert.hex()]
    assert Registry.load(str(tmp_path / "shoes.json")).get(SHOE).key_versions == [1, 2]


def test_register_records_the_attestation_key(shoe, tmp_path):
    reg = Registry(str(tmp_path / "shoes.json"))
    attested = pem(shoe.attestation_xy)
    reg.register(SHOE, 1, pem(shoe.xy), shoe.certificate.hex(), fresh_element=True,
                 attestation_key=attested, serial=shoe.serial.hex())
    with pytest.raises(SabotError, match="not certified"):  # key 1 without its certificate
        Registry(str(tmp_path / "other.json")).register(
            SHOE, 1, pem(shoe.xy), attestation_key=attested, serial=shoe.serial.hex())
    other = pem(keys.xy(ec.generate_private_key(ec.SECP256R1()).public_key()))
    with pytest.raises(SabotError, match="another attestation key"):
        reg.register(SHOE, 1, pem(shoe.xy), shoe.certificate.hex(), attestation_key=other)
    _, xy, _, cert = shoe.rekey()
    entry, changed = Registry.load(reg.path).register(SHOE, 2, pem(xy), cert.hex())
    assert changed and entry.key_versions == [1, 2]


def test_a_certificate_the_host_had_signed_externally_is_refused(shoe):
    # (a) the insider's old trick: an external Sign over a digest the host chose — even the
    # digest of exactly the message the registry rebuilds — by any slot that signs externally
    entry = shoe.entry()
    host_xy = keys.xy(ec.generate_private_key(ec.SECP256R1()).public_key())
    digest = hashlib.sha256(attestation.certificate_message(shoe.serial, SHOE, 2,
                                                           host_xy)).digest()
    _, new_xy, _, _ = shoe.rekey()  # the element's real key 2 signs externally too
    chip = shoe.element()  # the chip's memory as the rekey left it
    for slot in (0, 1):
        forged = chip.sign_digest(slot, digest, bytearray(64))
        with pytest.raises(SabotError, match="not certified by the shoe's attestation key"):
            entry.add_public_key(2, pem(host_xy), bytes(forged).hex())
    # and the attestation key itself will not sign it
    assert refused(lambda: chip.sign_digest(provision.ATTESTATION_SLOT, digest, bytearray(64)))
    # the old form: the previous key's signature of "sabot-rekey" shoe_id version X||Y
    old = b"sabot-rekey" + SHOE.to_bytes(4, "big") + (2).to_bytes(2, "big") + bytes(new_xy)
    cert = chip.sign_digest(0, hashlib.sha256(old).digest(), bytearray(64))
    with pytest.raises(SabotError, match="not certified"):
        entry.add_public_key(2, pem(new_xy), bytes(cert).hex())
    assert entry.key_versions == [1]


def test_a_key_made_on_the_host_is_refused_whatever_the_element_certifies(shoe):
    # (b) every certificate this element gives is of a key inside it: none names a host key
    entry = shoe.entry()
    _, _, _, rekey_cert = shoe.rekey()
    host_xy = keys.xy(ec.generate_private_key(ec.SECP256R1()).public_key())
    certs = [shoe.certificate, rekey_cert]
    certs += [rekey_mod.certify(shoe.element(), SHOE, v)[2] for v in (1, 2)]
    for cert in certs:
        with pytest.raises(SabotError, match="not certified"):
            entry.add_public_key(2, pem(host_xy), bytes(cert).hex())
    assert entry.key_versions == [1]


def test_a_certificate_is_good_for_one_version_of_one_shoe(shoe, tmp_path):
    # (c) the nonce names shoe and version, the message the slot: version 2's certificate is
    # not version 3's, nor another shoe's (even one registered with the same element)
    entry = shoe.entry()
    _, xy2, _, cert2 = shoe.rekey()
    with pytest.raises(SabotError, match="version 3 is not certified"):
        entry.add_public_key(3, pem(xy2), cert2.hex())
    assert entry.add_public_key(2, pem(xy2), cert2.hex())
    _, xy3, _, cert3 = shoe.rekey()
    with pytest.raises(SabotError, match="version 3 is not certified"):
        entry.add_public_key(3, pem(xy3), cert2.hex())
    assert entry.add_public_key(3, pem(xy3), cert3.hex())
    twin = shoe.entry(shoe_id=SHOE + 1)  # the same attestation key and serial, another id
    with pytest.raises(SabotError, match="not certified"):
        twin.add_public_key(2, pem(xy2), cert2.hex())
    # another element's attestation key certifies nothing of this one
    stranger = FactoryShoe(tmp_path / "stranger")
    with pytest.raises(SabotError, match="not certified"):
        stranger.entry().add_public_key(2, pem(xy2), cert2.hex())


def test_a_registry_file_cannot_add_a_version(shoe, tmp_path):
    # a version written into the file, by whoever can write it, is refused when the file loads;
    # a shoe registered without an attestation key holds version 1 only
    _, xy2, _, cert2 = shoe.rekey()
    reg = Registry(str(tmp_path / "shoes.json"))
    reg.put(shoe.entry())
    doc = json.loads((tmp_path / "shoes.json").read_text())
    doc["shoes"][0]["public_keys"].append({"version": 2, "algorithm": "ecdsa-p256",
                                           "key": pem(xy2), "certificate": "00" * 64})
    (tmp_path / "forged.json").write_text(json.dumps(doc))
    with pytest.raises(SabotError, match="version 2 is not certified"):
        Registry.load(str(tmp_path / "forged.json"))
    doc["shoes"][0]["public_keys"][1]["certificate"] = cert2.hex()
    del doc["shoes"][0]["attestation_key"]
    (tmp_path / "bare.json").write_text(json.dumps(doc))
    with pytest.raises(SabotError, match="needs the shoe's attestation key"):
        Registry.load(str(tmp_path / "bare.json"))
