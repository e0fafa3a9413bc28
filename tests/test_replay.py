"""`sabot replay` accounts for every frame and takes a capture as its live validators took it:
a capture cut anywhere is verified frame by frame from its first frame; one kept by `validate
--capture` over a tty, across reconnections and across sessions appended to one file replays with
the live validators' verdicts and alarms; a recorded status played back on the cable is refused and
never stops a validator. In-process (frames from capture_gen's signer through real Validators),
one board test over a real pseudo-terminal."""

import json
import random
import threading
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sabot import protocol as pr
from sabot.audit.replay import MARK, open_capture, received, replay, split_capture
from sabot.audit.validator import Validator
from sabot.errors import SabotError
from sabot.game.cards import shuffled_shoe
from sabot.virtual.capture_gen import shoe_frames, status_payload

from kit import PtyBridge, provision_shoe, signing_shoe

CATEGORIES = ("verified", "resent", "rejected", "deferred", "pending")


def accounted(summary):
    return sum(summary[k] for k in CATEGORIES)


def status(signer, frames, made, acked=0):
    """The shoe's signed status when it has made `made` of `frames` and `acked` were acknowledged:
    it holds the rest, and resends them after it."""
    unacked = made > acked
    chain = pr.parse(frames[made - 1]).digest if made else pr.ZERO_CHAIN
    payload = status_payload(acked=acked, unacked_from=acked + 1 if unacked else 0,
                             unacked_to=made if unacked else 0)
    return pr.build(signer.private_key, 1, signer.shoe_id, 1, made, chain, pr.T_STATUS, payload)


class LiveShoe:
    """One-deck shoes' frames delivered to validators as a live link delivers them: at each
    connection the frames in flight, then the status answering the hello and the resends of what
    is unacknowledged, then new frames, each read acknowledged once stored."""

    def __init__(self, shoes=2, seed=3):
        self.signer, self.entry = signing_shoe(decks=1)
        self.frames = []
        for n in range(shoes):
            self.frames += shoe_frames(self.signer, shuffled_shoe(1, seed + n), n + 1, decks=1)[0]
        self.made = self.acked = 0

    def make(self, n):
        new = self.frames[self.made : self.made + n]
        self.made += len(new)
        return new

    def connect(self, v, rng, in_flight=0, new=0, line=b"", acks_lost=0):
        """One connection of `v`'s link; `line`: bytes the cable adds after the resends;
        `acks_lost`: the last acknowledgements never reached the shoe (the link went first)."""
        v.live = v.awaiting_status = True
        stream = [pr.encode_frame(f) for f in self.make(in_flight)]
        stream.append(pr.encode_frame(status(self.signer, self.frames, self.made, self.acked)))
        stream += [pr.encode_frame(f) for f in self.frames[self.acked : self.made]]
        stream.append(line)
        stream += [pr.encode_frame(f) for f in self.make(new)]
        data = b"".join(stream)
        while data:  # reads of any size: frames torn between them
            cut = rng.randint(1, 300)
            v.receive(data[:cut])
            data = data[cut:]
            if v.status is not None:
                self.acked = max(self.acked, v.state["last_seq"])
        self.acked -= min(acks_lost, self.acked)


def forged(**spacing):
    """A mark as the cable could send one: without the capture's own token."""
    return MARK + json.dumps({"capture": "0" * 16, "run": "x", "live": False,
                              "awaiting_status": False, "anchored": True,
                              "state": {"last_seq": 99, "last_digest": "", "last_boot": 1,
                                        "host_counter": 0, "inventory": {}}},
                             **spacing).encode() + b"\x00"


# as short as a frame (refused as one), and longer (line noise, to live and replay alike)
FORGED = forged(separators=(",", ":")) + forged(indent=1)


def sessions(tmp, shoe, plan, seed=1):
    """`plan`: one list of connections (LiveShoe.connect's keywords, `away`: frames made
    while no link listened) per validate session into one store; a session marked
    `uncaptured` keeps no capture (a `sabot status` in between). The live summaries (of an
    uncaptured session: the last seq it stored); the capture, every session appended to one
    file."""
    rng = random.Random(seed)
    cap = open_capture(str(tmp / "cap.bin"))
    lives = []
    for session in plan:
        v = Validator(shoe.entry, str(tmp / "audit.db"))
        if not session[0].get("uncaptured"):
            v.capture = cap
        for conn in session:
            shoe.make(conn.get("away", 0))
            shoe.connect(v, rng, conn.get("in_flight", 0), conn.get("new", 0),
                         conn.get("line", b""), conn.get("acks_lost", 0))
        lives.append(v.summary() if v.capture is not None else v.state["last_seq"])
        v.store.close()
    cap.close()
    return lives, (tmp / "cap.bin").read_bytes()


def as_replayed(lives, shoe_ended):
    """What a replay of these sessions' capture says: their counts and alarms, and what the
    capture's end adds: a frame still waiting for its seal is unsealed, a shoe not ended an
    alarm."""
    want = {k: sum(s[k] for s in lives) for k in ("frames", *CATEGORIES, "rounds")}
    want["rejected"] += lives[-1]["pending"]
    want["pending"] -= lives[-1]["pending"]
    alarms = [a["kind"] for s in lives for a in s["alarms"]]
    return want, alarms + ([] if shoe_ended else ["missing_shoe_end"])


def replayed(capture, entry):
    r = replay(capture, entry)
    assert r["frames"] == accounted(r), r
    counts = {k: r[k] for k in ("frames", *CATEGORIES, "rounds")}
    return counts, [a["kind"] for a in r["alarms"]], r


PLAN = [
    # validate 1: a fresh store, frames in flight before the status; the link lost and back
    [{"in_flight": 2, "new": 9, "acks_lost": 3},
     {"away": 3, "in_flight": 1, "new": 6, "line": FORGED}],
    [{"uncaptured": True, "new": 3}],  # `sabot status`: its frames stored, acknowledged
    [{"away": 2, "in_flight": 2, "new": 8, "acks_lost": 2}],  # validate 2, appended
    [{"in_flight": 1, "new": 99}],  # validate 3: to the end of the second shoe
]


@pytest.fixture(scope="module")
def kept(tmp_path_factory):
    shoe = LiveShoe()
    lives, capture = sessions(tmp_path_factory.mktemp("kept"), shoe, PLAN)
    assert shoe.made == len(shoe.frames)
    return shoe, [s for s in lives if isinstance(s, dict)], capture, lives


def test_a_capture_across_sessions_and_reconnections_replays_as_the_live_validators_took_it(
        kept):
    shoe, lives, capture, every = kept
    counts, alarms, r = replayed(capture, shoe.entry)
    assert (counts, alarms) == as_replayed(lives, shoe_ended=True)
    assert counts["deferred"] > 0 and counts["resent"] > 0  # what each connection brings
    assert r["sessions"] == 3 and r["connections"] == 4  # the cable's marks are none
    # the session in between kept no capture: what it stored is named, not alarmed
    assert r["uncaptured"] == [{"first": r["uncaptured"][0]["first"], "last": every[1]}]
    assert every[1] > r["uncaptured"][0]["first"]
    # the same refusals, in order: the cable's short forged mark among them, a frame to both
    assert r["rejections"] == [x for s in lives for x in s["rejections"]]
    assert {"seq": None, "reason": "bad_framing"} in r["rejections"]


def test_each_session_of_an_appended_capture_replays_alone_as_it_was_taken(kept):
    shoe, lives, capture, _ = kept
    marks = [m for m, _ in split_capture(capture) if m is not None]
    assert len({m["capture"] for m in marks}) == 1  # appended: one capture, one token
    runs = list(dict.fromkeys(m["run"] for m in marks))  # one validator per session
    assert len(runs) == 3
    second, third = (_mark_at(capture, run) for run in runs[1:])
    counts, alarms, r = replayed(capture[second:], shoe.entry)
    assert (counts, alarms) == as_replayed(lives[1:], shoe_ended=True)
    assert r["uncaptured"][0]["first"] == 1  # what the live store held before it began
    counts, alarms, _ = replayed(capture[third:], shoe.entry)
    assert (counts, alarms) == as_replayed(lives[2:], shoe_ended=True)


def _mark_at(capture, run):
    """Where the first mark of validator `run` begins."""
    at = capture.find(MARK)
    while run.encode() not in capture[at : capture.find(b"\x00", at + len(MARK))]:
        at = capture.find(MARK, at + 1)
    return at


def test_a_capture_cut_mid_shoe_with_a_late_status_verifies_every_frame_in_it():
    """A capture of 107 frames cut mid-shoe, of which only 11 once verified: nothing before a
    late status is deferred."""
    shoe = LiveShoe()
    frames, k, m = shoe.frames, 9, len(shoe.frames) - 6
    if not pr.parse(frames[m - 1]).signed:
        m += 1  # the status comes after a signed frame (a hello answered between rounds)
    stream = (frames[k:m] + [status(shoe.signer, frames, m, acked=m - 2)] + frames[m - 2 : m]
              + frames[m:])
    counts, alarms, r = replayed(b"".join(pr.encode_frame(f) for f in stream), shoe.entry)
    assert counts["verified"] == len(frames) - k + 1 and counts["resent"] == 2  # + the status
    assert counts["rejected"] == counts["deferred"] == 0 and alarms == ["sequence_gap"]
    assert f"frames 1..{k} were never seen here" in r["alarms"][0]["detail"]


@settings(max_examples=30, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(start=st.floats(0, 1), length=st.floats(0, 1))
def test_every_frame_of_a_capture_cut_anywhere_is_counted_once(kept, start, length):
    shoe, _, capture, _ = kept
    a = int(start * len(capture))
    b = a + int(length * (len(capture) - a))
    r = replay(capture[a:b], shoe.entry)
    assert r["frames"] == accounted(r)
    # ... and a frame is what the validator would deframe, the one the cut tore included
    assert r["frames"] == len(pr.Deframer().feed(received(capture[a:b]) + b"\x00"))


def test_a_file_that_is_not_a_capture_is_refused_untouched(tmp_path):
    other = tmp_path / "audit.db"
    other.write_bytes(b"SQLite format 3\x00" + bytes(100))
    before = other.read_bytes()
    with pytest.raises(SabotError, match="not a capture kept by sabot"):
        open_capture(str(other))
    assert other.read_bytes() == before


# ---- a replayed status never stops a validator -------------------------------------------------
def played(answer):
    from kit.ports import shoe_on_a_socket_pair

    return shoe_on_a_socket_pair(answer)


def test_three_recorded_statuses_played_back_on_a_live_link_are_refused_and_the_audit_goes_on(
        tmp_path):
    from sabot.link.session import ValidationSession

    shoe = LiveShoe(shoes=1)
    frames, signer = shoe.frames, shoe.signer
    recorded = [status(signer, frames, n, acked=n - 1) for n in (2, 3, 4)]
    made = [0]
    port, far = played(lambda: [status(signer, frames, made[0], made[0])])
    v = Validator(shoe.entry, str(tmp_path / "a.db"))
    session = ValidationSession(v, "socketpair://shoe", None)
    try:
        session.open(port, 5)
        made[0] = 10
        far.sock.sendall(b"".join(pr.encode_frame(f) for f in frames[:10]))
        far.sock.sendall(b"".join(pr.encode_frame(f) for f in recorded))  # on the cable
        made[0] = len(frames)
        far.sock.sendall(b"".join(pr.encode_frame(f) for f in frames[10:]))
        session.run(until="shoe-end", end=time.monotonic() + 10)
    finally:
        far.stop()
        v.store.close()
    assert [r["reason"] for r in v.rejections] == ["replayed"] * 3
    assert v.state["last_seq"] == len(frames) and session.ended == [1]  # every frame after them


def test_a_shoe_behind_its_store_is_named_at_first_contact_in_one_line(tmp_path):
    from sabot.link.session import ValidationSession

    shoe = LiveShoe(shoes=1)
    frames, signer = shoe.frames, shoe.signer
    stored = Validator(shoe.entry, str(tmp_path / "a.db"))
    stored.receive(b"".join(pr.encode_frame(f) for f in frames[:12]))  # what the store holds
    stored.store.close()
    v = Validator(shoe.entry, str(tmp_path / "a.db"))  # the next validate, on that store
    port, far = played(lambda: [status(signer, frames, 3, 3)])  # what the shoe says: seq 3
    session = ValidationSession(v, "socketpair://shoe", None)
    try:
        with pytest.raises(SabotError) as e:
            session.open(port, 5)
    finally:
        far.stop()
        v.store.close()
    assert "says its newest frame is seq 3" in str(e.value) and "\n" not in str(e.value)
    assert "holds up to seq 12" in str(e.value)


# ---- over a real pseudo-terminal, as a USB shoe appears --------------------------------------
@pytest.mark.long
@pytest.mark.board
def test_a_capture_kept_over_a_tty_across_two_validate_sessions_replays_as_they_took_it(
        tmp_path, monkeypatch):
    """The tty holds a torn backlog of what the shoe sent before validate opened it, which the
    link drops unread: the capture keeps what the validator took, so its replay is the live one."""
    import sabot.link.session as session_module
    from sabot.link.session import validate
    from sabot.link.transport import ShoePort
    from sabot.virtual.board import VirtualBoard
    from sabot.virtual.dealer import Dealer
    from sabot.virtual.element import SIGN_MS

    key, flash, config, _ = provision_shoe(tmp_path)
    port_bytes = open(tmp_path / "port.bin", "ab")  # everything the port read
    monkeypatch.setattr(session_module, "open_port",
                        lambda url, baud: ShoePort(url, baud, 10.0, port_bytes))
    board = VirtualBoard(flash, sign_ms=SIGN_MS).start()
    bridge = None
    stop = threading.Event()
    try:
        bridge = PtyBridge(tmp_path, board.port)
        dealer = Dealer(board, shuffled_shoe(8, seed=9))
        for _ in range(150):  # more than the pty holds: socat waits with the rest
            dealer.step()
        # the element signs and logs those cards' frames at its own pace (Sign 50 ms, and the
        # shoe's log besides): let it, so the backlog is there before the first session
        time.sleep(4)

        def deal():
            while not stop.is_set() and dealer.step():
                time.sleep(0.05)

        threading.Thread(target=deal, daemon=True).start()
        lives = []
        for _ in range(2):
            s, _ = validate(bridge.path, key, config, str(tmp_path / "audit.db"),
                            capture=str(tmp_path / "cap.bin"), seconds=2.5)
            lives.append(s)
            time.sleep(0.5)  # dealt meanwhile: sent to nobody, resent to the next session
    finally:
        stop.set()
        if bridge:
            bridge.stop()
        board.stop()
        port_bytes.close()
    capture = (tmp_path / "cap.bin").read_bytes()
    # usually a backlog the link dropped (the port read more than the sessions took); how much
    # sits in the pty when a session opens it is the machine's timing, so never less is all
    # that is certain: what the replay must match is what the sessions took
    assert len((tmp_path / "port.bin").read_bytes()) >= len(received(capture))
    assert all(s["rejected"] == 0 and s["verified"] > 0 for s in lives)
    counts, alarms, r = replayed(capture, config)
    assert (counts, alarms) == as_replayed(lives, shoe_ended=False)
    assert r["sessions"] == 2
    second = _mark_at(capture, [m for m, _ in split_capture(capture)][-1]["run"])
    counts, alarms, r = replayed(capture[second:], config)
    assert (counts, alarms) == as_replayed(lives[1:], shoe_ended=False)
    assert r["uncaptured"] == [{"first": 1, "last": r["uncaptured"][0]["last"]}]


@pytest.mark.parametrize("in_flight,acks_lost", [(1, 0), (2, 0), (0, 2), (3, 1)])
def test_an_initial_cards_whose_seal_no_link_heard_is_deferred_not_unsealed(tmp_path, in_flight,
                                                                          acks_lost):
    """The link goes between an unsigned initial_cards and its seal, and the seal is made while
    no link listens. After the reconnect, a newer frame in flight before the status (the shoe
    went on), or the resends of frames before it (acknowledgements lost), show it comes again
    among the resends with its seal: it is deferred, nothing authentic is rejected, and a replay
    of the capture decides the same."""
    shoe = LiveShoe(shoes=1)
    first = next(i for i, raw in enumerate(shoe.frames)
                 if pr.parse(raw).type == pr.T_INITIAL_CARDS)
    lives, capture = sessions(tmp_path, shoe, [[
        {"new": first + 1, "acks_lost": acks_lost},  # ends with the initial_cards unsealed
        {"away": 1, "in_flight": in_flight, "new": 4}]])
    s = lives[0]
    assert s["rejected"] == 0 and s["deferred"] >= 1 and s["frames"] == accounted(s), s
    counts, alarms, _ = replayed(capture, shoe.entry)
    assert (counts, alarms) == as_replayed(lives, shoe_ended=False)


def test_an_initial_cards_not_the_shoes_held_for_its_resend_is_still_unsealed(tmp_path):
    """The cable slips in an initial_cards of its own just before the link goes; after the
    reconnect a newer frame shows the shoe went on, so it waits for the resend of its seq: the
    shoe's own frame there is other bytes, and the cable's is rejected unsealed."""
    shoe = LiveShoe(shoes=1)
    first = next(i for i, raw in enumerate(shoe.frames)
                 if pr.parse(raw).type == pr.T_INITIAL_CARDS)
    v = Validator(shoe.entry, str(tmp_path / "audit.db"))
    rng = random.Random(5)
    shoe.connect(v, rng, new=first)
    forged = bytearray(shoe.frames[first])
    forged[-1] ^= 0x01  # other cards
    v.receive(pr.encode_frame(bytes(forged)))
    assert v.pending is not None
    shoe.make(2)  # the shoe's own initial_cards and its result, while no link listened
    shoe.connect(v, rng, in_flight=1, new=3)
    s = v.summary()
    assert v.rejections == [{"seq": first + 1, "reason": "unsealed"}], v.rejections
    assert s["frames"] == accounted(s) and s["rounds"] >= 1
    v.store.close()


def test_an_initial_cards_of_a_seq_the_shoe_never_reaches_is_unsealed_not_held(tmp_path):
    """The cable slips in an initial_cards with a far-off seq mid-session: the shoe's next
    frame, older, is no resend, so it is decided at once (unsealed), and a reconnect after it
    still waits for the resend of the shoe's own frame."""
    shoe = LiveShoe(shoes=1)
    firsts = [i for i, raw in enumerate(shoe.frames)
              if pr.parse(raw).type == pr.T_INITIAL_CARDS]
    v = Validator(shoe.entry, str(tmp_path / "audit.db"))
    rng = random.Random(5)
    shoe.connect(v, rng, new=firsts[0] + 2)  # the first round stored
    g = pr.parse(shoe.frames[firsts[0]])
    far = pr.build(None, g.key_id, g.shoe_id, g.boot, 0xFFFFFFF0, g.chain, pr.T_INITIAL_CARDS,
                   g.payload)
    v.receive(pr.encode_frame(far))
    v.receive(b"".join(pr.encode_frame(f) for f in shoe.make(firsts[1] - shoe.made + 1)))
    assert v.rejections == [{"seq": 0xFFFFFFF0, "reason": "unsealed"}] and v.held is None
    shoe.make(2)  # the next initial_cards' seal and a frame more, while no link listened
    shoe.connect(v, rng, in_flight=1, new=3)
    s = v.summary()
    assert len(v.rejections) == 1 and s["frames"] == accounted(s), v.rejections
    v.store.close()


def test_an_initial_cards_met_again_after_a_reconnect_is_deferred_not_unsealed(tmp_path):
    """The link goes between an unsigned initial_cards and its seal: the copy resent after the
    reconnect is sealed and taken, the first copy deferred, nothing rejected; a different
    unsigned frame in its place still leaves the first unsealed."""
    shoe = LiveShoe(shoes=1)
    first = next(i for i, raw in enumerate(shoe.frames)
                 if pr.parse(raw).type == pr.T_INITIAL_CARDS)
    v = Validator(shoe.entry, str(tmp_path / "audit.db"))
    rng = random.Random(5)
    shoe.connect(v, rng, new=first + 1)  # the link ends with the initial_cards unsealed
    assert v.pending is not None
    shoe.make(1)  # its result, made while no link listened
    shoe.connect(v, rng, new=4)  # the status, then both resent, then new frames
    s = v.summary()
    assert s["rejected"] == 0 and s["deferred"] >= 1, s
    assert s["frames"] == accounted(s) and v.pending is None
    v.store.close()

    shoe2 = LiveShoe(shoes=1)  # the same unsigned frame with other cards in it: no copy
    v = Validator(shoe2.entry, str(tmp_path / "other.db"))
    shoe2.connect(v, rng, new=first + 1)
    assert v.pending is not None
    other = bytearray(shoe2.frames[first])
    other[-1] ^= 0x01
    v.receive(pr.encode_frame(bytes(other)))
    assert [r["reason"] for r in v.rejections] == ["unsealed"]
    v.store.close()
