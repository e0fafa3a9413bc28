"""The validation session `sabot validate` and `sabot serve` share: it follows the records its
validator stores (shoes ended, irregularities holding the shoe) for --until, and says rejected
frames in one line. Host only: frames from capture_gen's signer through a real Validator."""

from sabot.audit.validator import Validator
from sabot.link.session import ValidationSession, group_rejections
from sabot.virtual import capture_gen


def test_the_session_sees_the_shoe_end_its_validator_stores_and_passes_records_on(tmp_path):
    entry, cap, rounds = capture_gen.generate(str(tmp_path), 1, seed=2)
    seen = []
    v = Validator(entry, str(tmp_path / "a.db"), on_record=lambda k, r: seen.append(k))
    said = []
    session = ValidationSession(v, "socket://127.0.0.1:1", None, say=said.append)
    assert not session._reached("shoe-end") and session.ended == []
    v.receive(cap)
    v.finish()
    v.store.close()
    assert seen.count("result") == rounds and "shoe_end" in seen  # the caller's hook still runs
    assert session.ended == [1] and session._reached("shoe-end")
    assert said == []  # a shoe that ended is no irregularity to tell


def test_rejections_are_grouped_in_one_line():
    line = group_rejections([{"reason": "bad_signature"}, {"reason": "replayed"},
                             {"reason": "bad_signature"}])
    assert line == "2 x bad_signature, 1 x replayed"
