"""Nothing a host sends fills the shoe's flash, and a tilted shoe is never mute (docs/SECURITY.md,
"The flash"): on the virtual board (real MicroPython, the element emulator), the frames a host
causes (refusals, maintenance records) are kept only within its budget, acknowledged or not,
then counted in the shoe's status; a shoe whose boot counter is spent tilts and still says why,
with every unacknowledged frame resent. (Updates: tests/test_update.py.)"""

import time
from pathlib import Path

import pytest

from sabot import protocol as pr
from sabot.link.transport import ShoePort
from sabot.release import update as channel
from sabot.virtual.board import VirtualBoard
from sabot.virtual.dealer import Dealer

from kit import SIGN_MS, provision_shoe

pytestmark = pytest.mark.board

ROUND = ["AS", "2H", "9S", "8D", "KD", "9C"]  # a burn, then a natural (player 9, banker 7)


def frames_resent(ch, st):
    """The seqs of the chained frames the shoe resent after its status."""
    seen = {f.seq for f in ch.backlog if f.type < pr.T_STATUS}
    ch.wait_for(lambda f: seen.add(f.seq) if f.type < pr.T_STATUS else None, 2.0)
    return seen


@pytest.mark.long
def test_refused_commands_beyond_the_reserve_are_counted_not_kept(tmp_path):
    key, flash, config, _ = provision_shoe(tmp_path)
    board = VirtualBoard(flash, sign_ms=SIGN_MS).start()
    port = ShoePort(board.url)
    try:
        ch = channel.ShoeChannel(port, key, config)
        st = ch.hello(5.0)
        first_unacked = st["unacked_to"]
        counter = st["host_counter"]
        # a host holding the command key asks, 20 times, to resolve what is not held, and never
        # acknowledges: each an authentic command the shoe refuses
        for _ in range(20):
            counter += 1
            ch.send(pr.C_RESOLVE, b"\x01", counter)
            time.sleep(0.3)  # under the shoe's 4 signed commands a second
        time.sleep(0.5)
        st = ch.hello(5.0)
        seen = frames_resent(ch, st)
    finally:
        port.close()
        board.stop()
    assert st["host_counter"] == counter  # all 20 taken and refused
    assert st["unacked_to"] - first_unacked == 14  # 14 kept (2 more only for a rekey's frames)
    assert st["refusals_unlogged"] == 6 and st["refused_bad_key"] == 0
    assert set(range(first_unacked + 1, st["unacked_to"] + 1)) <= seen


def test_a_shoe_whose_boot_counter_is_spent_tilts_says_why_and_resends_what_it_holds(tmp_path):
    key, flash, config, _ = provision_shoe(tmp_path)
    board = VirtualBoard(flash, sign_ms=SIGN_MS).start()
    dealer = Dealer(board, ROUND)
    for _ in range(len(ROUND)):
        dealer.step()
    board.stop()
    (Path(flash) / "boot").write_text(str(0xFFFF))  # every power-on it could number
    board.start()
    assert board.wait(lambda s: s[0] == 5)  # the tilt's lamp
    port = ShoePort(board.url)
    try:
        ch = channel.ShoeChannel(port, key, config)
        st = ch.hello(5.0)
        seen = frames_resent(ch, st)
    finally:
        port.close()
        board.stop()
    assert st["phase"] == "tilt" and st["tilt"] == "boots_spent"
    assert st["unacked_from"] == 1 and st["unacked_to"] >= 3  # the round it dealt, still held
    assert set(range(1, st["unacked_to"] + 1)) <= seen


def test_a_torn_log_tail_the_full_flash_cannot_cut_is_read_all_the_same(tmp_path):
    """On real MicroPython: the log's torn tail is cut by copying the intact records to a new
    file; when the flash cannot take that copy the records are read all the same (a tilted
    shoe still resends them), and the cut is left for the next append."""
    from kit import run_micropython

    script = tmp_path / "torn.py"
    script.write_text(
        "import sys\n"
        "from shoe.store import Flash, RecordLog\n"
        "class Full(Flash):\n"
        "    def path(self, name):\n"
        "        return '/no/room/' + name if name.endswith('.tmp') else Flash.path(self, name)\n"
        "log = RecordLog(Flash(sys.argv[1]))\n"
        "log.append(0x49, b'one')\n"
        "log.append(0x49, b'two')\n"
        "log._close()\n"
        "f = open(sys.argv[1] + '/log', 'ab')\n"
        "f.write(b'IX')\n"  # a record torn by a power cut
        "f.close()\n"
        "full = RecordLog(Full(sys.argv[1]))\n"
        "print([bytes(p) for _, p in full.records()], full.cut_due, full.size)\n"
        "try:\n"
        "    full.append(0x49, b'three')\n"
        "    print('appended')\n"
        "except OSError:\n"
        "    print('no append past the torn tail')\n")
    (tmp_path / "flash").mkdir()
    r = run_micropython(script, tmp_path / "flash")
    assert r.returncode == 0, r.stderr.decode()
    lines = r.stdout.decode().split("\n")
    assert lines[0] == "[b'one', b'two'] True 20"  # the 2 intact records, 7 + 3 bytes each
    assert lines[1] == "no append past the torn tail"


@pytest.fixture(scope="module")
def built():
    """The run's one build (kit/run.py), and its release key."""
    from kit.run import built_tree

    return built_tree()[0]


@pytest.mark.long
def test_a_host_keeps_no_more_than_its_budget_even_acknowledged_and_a_genuine_update_repairs(
        tmp_path, built):
    """On a tilted shoe (which never compacts its log), a host holding the command key sends
    updates of its own junk (each refused at chunk 0) and resolutions (each refused), and
    acknowledges: the log keeps 14 frames the host caused, acknowledged or not (2 more only for a
    rekey's), and counts the rest; a genuine update still repairs the shoe, its update_applied
    kept beyond the budget (a repair of a shoe tilted for its code)."""
    import shutil

    from sabot.release.build import FIRMWARE_VERSION, code_digest

    key, flash, config, _ = provision_shoe(tmp_path)
    code = tmp_path / "code"
    shutil.copytree(built / "tree", code)
    good = tmp_path / "good"
    shutil.copytree(code, good)
    (code / "shoe" / "implant.py").write_text("print('pwned')\n")  # the tree no longer matches
    board = VirtualBoard(flash, code=code, sign_ms=SIGN_MS).start()
    assert board.wait(lambda s: s[0] == 5)
    port = ShoePort(board.url)
    log = Path(flash) / "log"
    try:
        ch = channel.ShoeChannel(port, key, config)
        st = ch.hello(5.0)
        counter = st["host_counter"]
        junk = b"j" * 240
        jhead, _ = channel.chain(junk)
        release = channel.release_chunk(FIRMWARE_VERSION, "virtual", bytes(64))
        sizes = []
        for n in range(22):
            counter += 1
            if n % 2:
                ch.send(pr.C_RESOLVE, b"\x01", counter)
            else:
                ch.send(pr.C_UPDATE, len(junk).to_bytes(4, "big")
                        + channel.chunk_hash(0, jhead, release) + b"mallory", counter)
                time.sleep(0.3)
                ch.send(pr.C_UPDATE_DATA, bytes(2) + jhead + release)
            time.sleep(0.3)
            if n % 6 == 5:  # the host acknowledges all it holds
                st = ch.hello(5.0)
                ch.send(pr.C_ACK, st["unacked_to"].to_bytes(4, "big"))
                time.sleep(0.3)
            sizes.append(log.stat().st_size)
        st = ch.hello(5.0)
        rec = channel.update(port, key, config, {"dir": str(good), "manifest": code_digest(good)},
                             "tech", lambda m: None)
    except channel.OutcomeUnseen:  # the reset dropped the port before its outcome was read
        rec = {"what": "update_applied"}
    finally:
        port.close()
    try:
        assert st["host_counter"] == counter  # all 22 taken
        # the last six commands left no frame on flash: an acknowledgement's record (11 B) at
        # most
        assert st["refusals_unlogged"] == 22 - 14 and sizes[-1] - sizes[-6] <= 11
        assert rec["what"] == "update_applied" and board.wait_off() == 4
        assert not (code / "shoe" / "implant.py").exists()
    finally:
        board.stop()  # its element too, which outlives the board's resets


@pytest.mark.long
def test_with_the_budget_spent_a_switch_is_recorded_or_not_made(tmp_path, built):
    """A dealing shoe whose host budget a host spent: the release it already runs, sent again,
    is taken but not switched to (its update_applied could not be recorded, and an applied
    update resets the shoe: repeated, each would add a frame and a boot); an upgrade is switched
    to and recorded beyond the budget."""
    import shutil

    from sabot.errors import SabotError
    from sabot.release.build import (
        FIRMWARE_VERSION,
        code_digest,
        release_key,
        sign_manifest,
        sign_update,
    )

    key, flash, config, _ = provision_shoe(tmp_path)
    code = tmp_path / "code"
    shutil.copytree(built / "tree", code)
    same = tmp_path / "same"
    shutil.copytree(code, same)
    newer = tmp_path / "newer"
    shutil.copytree(code, newer)
    (newer / "NOTES").write_text("an upgrade\n")
    digest = code_digest(newer)
    (newer / "MANIFEST").write_text(sign_manifest(release_key(built / "release.pem"), digest,
                                                  "virtual", FIRMWARE_VERSION + 1))
    sign_update(release_key(built / "release.pem"), newer)
    board = VirtualBoard(flash, code=code, sign_ms=SIGN_MS).start()
    port = ShoePort(board.url)
    try:
        ch = channel.ShoeChannel(port, key, config)
        counter = ch.hello(5.0)["host_counter"]
        for _ in range(14):  # resolutions of nothing held: the budget spent on refusals
            counter += 1
            ch.send(pr.C_RESOLVE, b"\x01", counter)
            time.sleep(0.3)
        with pytest.raises(SabotError, match="could not record its outcome, so it did not switch"):
            channel.update(port, key, config, {"dir": str(same), "manifest": code_digest(same)},
                           "mallory", lambda m: None)
        assert board.alive()
        try:
            rec = channel.update(port, key, config, {"dir": str(newer), "manifest": digest},
                                 "tech", lambda m: None)
        except channel.OutcomeUnseen:
            rec = {"what": "update_applied"}
    finally:
        port.close()
    try:
        assert rec["what"] == "update_applied" and board.wait_off() == 4
        assert code_digest(code) == digest
    finally:
        board.stop()  # its element too, which outlives the board's resets
