"""What the frame counts the commands print hold, and that they add up: a session's `N frames
verified` (validate, serve, demo) are the frames it took that were new to the store — shoe
frames, statuses and checkpoints — with the resent copies and deferred frames said beside them;
`audit verify`'s `ok: F frames` are the shoe frames of every session and shoe of the store, each
once, with the statuses, checkpoints, copies and rejected frames it holds counted apart."""

import json

import pytest
from test_audit_verify import A, B, framed, status

from sabot.audit.validator import Validator
from sabot.audit.verify import verify
from sabot.cli.output import served_line, stored_text, validated_line
from sabot.game.cards import shuffled_shoe
from sabot.registry import Registry
from sabot.virtual.capture_gen import shoe_frames

from kit import signing_shoe


@pytest.fixture(scope="module")
def sessions(tmp_path_factory):
    """Shoe A validated in two sessions into one store, as a validate stopped and started again
    does: the first gets a status naming frames it has not had acknowledged (the shoe resends
    them: 5 copies) and a checkpoint; the second, live, meets a frame before the status that
    answers its hello (deferred, sent again) and finishes the shoe. Shoe B's whole shoe in a
    third session, and a frame too damaged to parse."""
    d = tmp_path_factory.mktemp("counts")
    s, entry = signing_shoe(A)
    sb, eb = signing_shoe(B)
    reg = Registry(str(d / "shoes.json"))
    reg.put(entry)
    reg.put(eb)
    frames, _ = shoe_frames(s, shuffled_shoe(2, seed=5), 1)
    db = str(d / "audit.db")
    first = Validator(entry, db, watch=False)
    first.receive(framed(*frames[:10]))
    first.receive(framed(status(s, frames, 10, 5), *frames[5:12]))
    first.receive(framed(s.checkpoint(12)))
    first.store.close()
    second = Validator(entry, db, watch=False)
    second.live = second.awaiting_status = True
    second.receive(framed(frames[13]))
    second.receive(framed(status(s, frames, 14, 12), *frames[12:], b"\x02junk"))
    second.store.close()
    fb, _ = shoe_frames(sb, shuffled_shoe(2, seed=6), 1)
    third = Validator(eb, db, watch=False)
    third.receive(framed(*fb))
    third.store.close()
    runs = [first.summary(), second.summary(), third.summary()]
    return d, frames, fb, runs


def test_audit_verify_counts_the_shoe_frames_once_and_the_rest_apart(sessions):
    d, frames, fb, runs = sessions
    r = verify(str(d / "audit.db"), Registry.load(str(d / "shoes.json")).shoes)
    assert r["ok"], r["problem"]
    assert (r["frames"], r["shoes"]) == (len(frames) + len(fb), 2)
    assert (r["statuses"], r["checkpoints"], r["resent"], r["deferred"], r["rejected"]) == (
        2, 1, 5, 1, 1)
    assert stored_text(r) == (
        f"{r['frames']} frames, {r['rounds']} rounds (the shoe frames of 2 shoe devices, each "
        "once; also stored: 2 statuses, 1 checkpoint, 5 resent copies, 1 deferred frame, 1 "
        f"rejected frame; {r['rows']} rows chained)")
    # what every session verified, together, is what the store holds new: no frame twice
    assert sum(v["verified"] for v in runs) == r["frames"] + r["statuses"] + r["checkpoints"]
    assert [v["resent"] for v in runs] == [5, 0, 0] and runs[1]["deferred"] == 1


def test_a_sessions_line_says_what_its_frames_verified_are(sessions):
    _, _, _, runs = sessions
    first = runs[0]
    assert validated_line(first) == (
        f"validated: {first['verified']} frames verified (new to the store: shoe frames, statuses "
        "and checkpoints), 5 resent copies of frames stored before, "
        f"{first['rounds']} rounds, 0 rejected, 0 alarms")
    assert validated_line(dict(runs[1], command_key="refused"), (1, None)).endswith(
        f"1 deferred until sent again, {runs[1]['rounds']} rounds, 1 rejected, 0 alarms; shoe 1 "
        "ended; none acknowledged (the shoe refuses our command key)")


def test_serves_line_adds_up_its_tables(sessions):
    """As pit/serve.py's Validation.summary() gives it: the sums, and each table's counts."""
    _, _, _, runs = sessions
    summary = {"rounds": sum(v["rounds"] for v in runs),
               "verified": sum(v["verified"] for v in runs),
               "rejections": [x for v in runs for x in v["rejections"]],
               "alarms": [], "logs": [("BAC-1", runs[0]), ("BAC-1", runs[1]), ("BAC-2", runs[2])]}
    assert served_line(summary) == (
        f"served: {summary['verified']} frames verified (new to the store: shoe frames, statuses "
        "and checkpoints), 5 resent copies of frames stored before, 1 deferred until sent "
        f"again, {summary['rounds']} rounds, 1 rejected, 0 alarms")


@pytest.mark.board
def test_a_demos_frames_verified_are_audit_verifys_frames_statuses_and_checkpoints(cli,
                                                                                    tmp_path):
    """A real run: the demo's virtual shoe, then audit verify of its store."""
    db, reg = tmp_path / "d.db", tmp_path / "shoes.json"
    r = cli("demo", "--seed", 3, "--db", db, "--key", tmp_path / "k.pem", "--registry", reg)
    assert r.returncode == 0, r.stderr
    line = next(x for x in r.stdout.splitlines() if "frames verified" in x)
    verified = int(line.split(" frames verified")[0].rsplit(" ", 1)[1])
    assert "frames verified (new to the store: shoe frames, statuses and checkpoints)" in line
    out = cli("audit", "verify", "--db", db, "--registry", reg, "--json")
    v = json.loads(out.stdout)
    assert v["ok"] and verified == v["frames"] + v["statuses"] + v["checkpoints"], (line, v)
