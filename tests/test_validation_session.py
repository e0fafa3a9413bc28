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


def test_work_asked_of_the_session_says_whether_it_was_sent_when_its_asker_gives_up(tmp_path):
    """serve's operations are done by the shoe's session thread between reads (`call`): an
    asker that gives up is told nothing was sent when the session never took the work, and
    that it is under way when it did (a command may yet reach the shoe); how it then ended is
    the session's line."""
    import threading
    import time

    import pytest

    from sabot.errors import SabotError

    entry, _, _ = capture_gen.generate(str(tmp_path), 1, seed=2)
    said = []
    session = ValidationSession(Validator(entry, str(tmp_path / "a.db")), "socket://x:1", None,
                                say=said.append)
    session.link_state = "up"
    sent = []
    with pytest.raises(SabotError, match=r"did not get to it within 0.2 s: nothing was sent"):
        session.call(sent.append, 0.2)  # no pass of the session's thread took it
    session._do_asked(None)  # its next pass: the given-up work is not done
    assert sent == [] and said == []

    started, release = threading.Event(), threading.Event()

    def slow(link):  # a command sent, its answer slow to be stored
        started.set()
        release.wait(30)
        return {"phase": "burn_first", "shoe": 2, "round": 0}

    def session_thread():
        while session._asked.empty():
            time.sleep(0.01)
        session._do_asked(None)

    taker = threading.Thread(target=session_thread)
    taker.start()
    with pytest.raises(SabotError, match=r"under way on the shoe's link when this page stopped "
                                         r"waiting, after 2 s: it may have taken effect"):
        session.call(slow, 2)
    assert started.is_set() and said == []
    release.set()
    taker.join()
    assert said == ["an operator's command its page gave up waiting for was done: the shoe's "
                    "phase is now burn_first (shoe 2, round 0)"]
    session.validator.store.close()
