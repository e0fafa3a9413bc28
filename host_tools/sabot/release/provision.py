"""`sabot provision --port`: factory provisioning of a blank shoe over its port.

A blank shoe (its element's data zone never locked) keeps the MicroPython REPL, and nothing else
does (firmware/main.py). Over that REPL the host runs the shoe's own provisioning
(`maint.provision`, firmware/shoe/provision.py): the shoe writes and locks its element's
configuration, has it make result key 1 inside, writes the command key's public half, puts its
identity and table configuration (variant byte, deck count) on flash and locks the data zone.
The host only hands over the shoe id, the variant byte, the deck count and the command public
key; what comes back (the chip's serial, result key 1, and key 1's signature of a statement
naming them and the command key) is checked before it is registered."""

from __future__ import annotations

import io
from collections.abc import Callable
from typing import Any

from sabot import keys
from sabot.errors import SabotError
from sabot.link.answering import ANY_SHOE, hello_answer
from sabot.link.transport import DEFAULT_BAUD, ShoePort
from sabot.protocol import shoe_id_text
from sabot.registry import check_provisioning, first_checkpoint, public_from_xy
from sabot.release.deploy import FRESH, PROBE_WAIT, element_state, hard_reset, mpremote


def _dealing_shoe(url: str, baud: int) -> int | None:
    """The id of a shoe answering a hello in the sabot protocol on `url`, or None: as soon as a
    REPL talks back (a blank shoe), after two seconds of nothing else."""
    got = io.BytesIO()
    try:
        port = ShoePort(url, baud, open_timeout=0, capture=got)
    except SabotError:
        return None
    try:
        status = hello_answer(port, ANY_SHOE, 2.0, got)
    finally:
        port.close()
    return None if status is None else status.shoe_id


def parse_provisioned(said: str) -> tuple[int, bytes, bytes, bytes, bytes, bytes, bytes]:
    """(shoe_id, serial, result key X||Y, proof, attestation key X||Y, its certificate of key 1,
    key 1's signature of the log's first checkpoint) from maint.provision's `PROVISIONED <id>
    <serial> <X||Y> <r||s> [<attestation X||Y> <certificate r||s> [<checkpoint r||s>]]` line
    (b"" for what a shoe of older firmware does not print: without an attestation key it is
    registered for version 1 only, without a first checkpoint its key is bound to the witnesses
    at the first checkpoint a pit sends them); SabotError with the shoe's reason for a REFUSED
    one."""
    for line in said.splitlines():
        words = line.split()
        if words[:1] == ["REFUSED"]:
            raise SabotError(f"the shoe refused provisioning: {' '.join(words[1:])}")
        if words[:1] == ["PROVISIONED"] and len(words) in (5, 7, 8):
            attest, certificate, first = (words[5:] + ["", "", ""])[:3]
            try:
                return (int(words[1]), bytes.fromhex(words[2]), bytes.fromhex(words[3]),
                        bytes.fromhex(words[4]), bytes.fromhex(attest),
                        bytes.fromhex(certificate), bytes.fromhex(first))
            except ValueError:
                break
    lines = said.strip().splitlines()
    raise SabotError(f"the shoe did not say it was provisioned: "
                     f"{lines[-1] if lines else 'no output'}")


def provision_over_port(url: str, command_key: keys.CommandKey, shoe_id: int,
                        variant: int, baud: int = DEFAULT_BAUD,
                        log: Callable[[str], Any] = print, decks: int = 8,
                        rules: bytes = b"") -> tuple[int, str, str, str, str, str]:
    """Provision the blank shoe on `url` for `command_key`, dealing `decks` decks of the game
    `variant` names (the shoe refuses more than its board holds; `rules`: a 21 Baccarat table's
    rule bytes): (shoe_id, result key 1's public
    PEM, the element's serial number in hex, the attestation key's PEM and its certificate of
    key 1 in hex, the log's first checkpoint as a signed note: each "" from a shoe that reports
    none). The shoe reboots into its firmware after."""
    command_xy = keys.xy(command_key.public_key())
    # a dealing shoe says so at once to a hello (mpremote would wait 10 s for its raw REPL)
    dealing = _dealing_shoe(url, baud)
    if dealing is not None:
        raise SabotError(f"{url}: shoe {shoe_id_text(dealing)} is provisioned already and "
                         "dealing (no REPL: provisioning is for a blank shoe)")
    try:
        # longer than deploy's probe: importing maint reads the element (a busy bench machine)
        said = mpremote(url, ["exec", FRESH + "import maint; maint.state()"],
                        timeout=2.5 * PROBE_WAIT)
    except SabotError as e:
        if "no module named 'maint'" in str(e):
            raise SabotError(f"{url}: the shoe holds no sabot firmware: deploy it first (sabot "
                             "deploy --port URL --board B)") from None
        raise SabotError(f"nothing answers on {url}: neither a blank shoe's REPL nor a dealing "
                         "shoe") from None
    state = element_state(said, url)
    if state == "provisioned":
        raise SabotError(f"{url}: the shoe is provisioned already (its element's data zone is "
                         "locked)")
    if state == "foreign":
        raise SabotError(f"{url}: the shoe's element is locked with another configuration than "
                         "sabot's: it cannot be provisioned")
    log(f"a blank shoe answers on {url}: provisioning it as shoe {shoe_id_text(shoe_id)}")
    said = mpremote(url, ["exec", FRESH + f"import maint; maint.provision({shoe_id}, {variant}, "
                                  f"'{command_xy.hex()}', {decks}, '{rules.hex()}')"], timeout=60)
    got_id, serial, result_xy, proof, attestation_xy, certificate, first = parse_provisioned(said)
    if got_id != shoe_id:
        raise SabotError(f"the shoe answered for shoe {shoe_id_text(got_id)}, not "
                         f"{shoe_id_text(shoe_id)}")
    public = check_provisioning(serial, shoe_id, result_xy, command_xy, proof)
    log(f"the shoe reports its element {serial.hex()} provisioned, and result key 1 signed the "
        "provisioning statement")
    attestation = keys.public_pem(public_from_xy(attestation_xy)) if attestation_xy else ""
    checkpoint = first_checkpoint(shoe_id, first, public) if first else ""
    hard_reset(url)
    log("hard reset: the shoe boots its firmware (no REPL from now on)")
    return (shoe_id, keys.public_pem(public), serial.hex(), attestation, certificate.hex(),
            checkpoint)

