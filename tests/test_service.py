"""What a service manager relies on, in process: a settings file (`--config`) as the command's
defaults with the command line winning, its refusals in one line; the log formats and their
severities; sd_notify's datagrams and the watchdog's interval (docs/INSTALL.md)."""

import io
import json
import os
import re
import socket
import sys

import pytest

from sabot import service
from sabot.cli import build_parser, main
from sabot.cli.config import apply, command_parser, config_path, read


def parsed(words, settings=None, tmp_path=None):
    parser = build_parser(words[0])
    fill = None
    if settings is not None:
        path = tmp_path / "s.toml"
        path.write_text(settings)
        fill = apply(command_parser(parser, words[0]), str(path), read(str(path)))
    args = parser.parse_args(words)
    if fill:
        fill(args)
    return args


def test_settings_are_defaults_and_the_command_line_wins(tmp_path):
    text = ('db = "pit.db"\nlisten = "127.0.0.1:8123"\nstore-alarm = 10\nfail-on-notice = true\n'
            'shoe = ["socket://127.0.0.1:7001=1", "socket://127.0.0.1:7002=2"]\n'
            'shifts = "19:00,07:00"\n')
    args = parsed(["serve"], text, tmp_path)
    assert args.db == "pit.db" and args.listen == ("127.0.0.1", 8123)
    assert args.store_alarm == 10.0 and args.fail_on_notice is True
    assert args.shoe == ["socket://127.0.0.1:7001=1", "socket://127.0.0.1:7002=2"]
    assert args.shifts == ["07:00", "19:00"]  # through the option's own type
    args = parsed(["serve", "--db", "other.db", "--shoe", "socket://127.0.0.1:7009=9",
                   "--store-alarm", "3"], text, tmp_path)
    assert args.db == "other.db" and args.store_alarm == 3.0
    assert args.shoe == ["socket://127.0.0.1:7009=9"], "a repeated option replaces the list"
    assert parsed(["serve"], 'db = "x.db"\n', tmp_path).witness == []
    # a switch the file turns on, the command line turns off
    args = parsed(["serve", "--no-fail-on-notice", "--no-floor"], text + "floor = true\n",
                  tmp_path)
    assert args.fail_on_notice is False and args.floor is False
    assert parsed(["serve"], text + "floor = true\n", tmp_path).floor is True


@pytest.mark.parametrize(("text", "said"), [
    ("bogus = 1\n", "'bogus' is no setting of sabot serve (its settings: accounts,"),
    ("store-alarm = \"soon\"\n", "store-alarm: not a number"),
    ("floor = 1\n", "floor is a switch: true or false, not 1"),
    ("db = [\"a\", \"b\"]\n", "db takes one value, as --db does"),
    ("log-format = \"xml\"\n", "log-format takes one of text, logfmt, json, not 'xml'"),
    ("db = \n", "not TOML"),
    ("help = true\n", "'help' is no setting"),
    # a path given as a number is a mistake, not a file named "5"
    ("db = 5\n", "db takes text, in quotes (as --db takes it), not 5"),
])
def test_a_setting_refused_is_one_line_naming_the_file_and_key(tmp_path, capsys, text, said):
    path = tmp_path / "serve.toml"
    path.write_text(text)
    assert main(["serve", "--config", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"sabot serve: --config {path}") and said in err, err
    assert err.count("\n") == 1


def test_the_witness_vkey_is_no_setting(tmp_path, capsys):
    """--vkey prints the key and exits: set in a service's file it would stop the service at
    every start, so the file cannot hold it."""
    path = tmp_path / "witness.toml"
    path.write_text('key = "w.key"\nvkey = true\n')
    assert main(["witness", "--config", str(path)]) == 2
    assert "'vkey' is no setting of sabot witness" in capsys.readouterr().err


def test_a_missing_settings_file_is_one_line(tmp_path, capsys):
    assert main(["witness", f"--config={tmp_path}/none.toml"]) == 2
    assert "No such file or directory" in capsys.readouterr().err


def test_config_path_forms():
    assert config_path(["serve", "--config", "a.toml"]) == "a.toml"
    assert config_path(["serve", "--config=b.toml", "--db", "x"]) == "b.toml"
    assert config_path(["serve", "--db", "x"]) is None


@pytest.fixture
def log_format():
    """Each test's own format; standard error as it was afterwards."""
    raw = sys.stderr
    yield
    sys.stderr = raw
    service._state.format, service._state.raw, service._state.program = "text", None, "sabot"


def test_text_lines_are_the_ones_people_read(log_format, capsys):
    service.configure("serve", "text")
    service.log("recording again", "notice")
    line = capsys.readouterr().err
    assert re.fullmatch(r"sabot serve: \d{4}-\d\d-\d\dT\d\d:\d\d:\d\d[+-]\d{4} recording "
                        r"again\n", line), line
    service._state.program = "sabot"  # a command that named none (its database's lines)
    service.log("audit database x back after 1.0 s", "warning")
    line = capsys.readouterr().err
    assert re.fullmatch(r"sabot: \d{4}-\d\d-\d\dT\d\d:\d\d:\d\d[+-]\d{4} audit database x "
                        r"back after 1\.0 s\n", line), line


def test_logfmt_and_json_structure_every_line_with_its_severity(log_format):
    raw = io.StringIO()
    sys.stderr = raw
    service.configure("serve", "logfmt")
    service.log('ALARM not_recording: "db1" waits', "critical")
    print("sabot serve: 2026-12-05T06:00:00+0000 ALARM player_advantage on bac1",
          file=sys.stderr)
    print("served: 3 rounds", file=sys.stderr)
    lines = raw.getvalue().splitlines()
    assert re.fullmatch(r'time=\S+ level=critical program=serve msg="ALARM not_recording: '
                        r'\\"db1\\" waits"', lines[0]), lines[0]
    assert lines[1].endswith('level=warning program=serve msg="ALARM player_advantage on bac1"')
    assert lines[2].endswith('level=info program=serve msg="served: 3 rounds"')
    service._state.format = "json"
    service.log("the shoe speaks again", "notice", "serve")
    record = json.loads(raw.getvalue().splitlines()[-1])
    assert record["level"] == "notice" and record["msg"] == "the shoe speaks again"
    assert set(record) == {"time", "level", "program", "msg"}


def test_a_line_break_in_what_a_line_names_makes_no_second_record(log_format):
    raw = io.StringIO()
    sys.stderr = raw
    service.configure("serve", "logfmt")
    service.say("serve", "http://127.0.0.1:8000/ (audit pit.db\nCRITICAL: forged)")
    lines = raw.getvalue().splitlines()
    assert len(lines) == 1 and "level=info" in lines[0] and "\\nCRITICAL" in lines[0], lines


def test_the_journal_gets_each_line_s_priority(log_format, tmp_path, monkeypatch):
    with open(tmp_path / "journal", "w") as journal:
        st = os.fstat(journal.fileno())
        monkeypatch.setenv("JOURNAL_STREAM", f"{st.st_dev}:{st.st_ino}")
        sys.stderr = journal
        service.configure("witness", "logfmt")
        service.log("refused a fork", "error")
    assert (tmp_path / "journal").read_text().startswith("<3>time=")


def test_notify_sends_datagrams_to_the_service_manager(tmp_path, monkeypatch):
    path = str(tmp_path / "notify")
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as s:
        s.bind(path)
        monkeypatch.setenv("NOTIFY_SOCKET", path)
        assert service.notify("READY=1", "STATUS=serving")
        assert s.recv(100) == b"READY=1\nSTATUS=serving"
    monkeypatch.delenv("NOTIFY_SOCKET")
    assert service.notify("READY=1") is False  # not under systemd: nothing to tell


def test_the_watchdog_interval_is_half_systemd_s_for_this_process_only(monkeypatch):
    monkeypatch.setenv("WATCHDOG_USEC", "30000000")
    monkeypatch.setenv("WATCHDOG_PID", str(os.getpid()))
    assert service.watchdog_interval() == 15.0
    monkeypatch.setenv("WATCHDOG_PID", str(os.getpid() + 1))  # a parent's watchdog
    assert service.watchdog_interval() is None
    monkeypatch.delenv("WATCHDOG_USEC")
    assert service.watchdog_interval() is None


def test_a_service_refused_before_it_starts_is_an_error_record(log_format, tmp_path, capsys):
    path = tmp_path / "serve.toml"
    path.write_text('log-format = "json"\nbogus = 1\n')
    assert main(["serve", "--config", str(path)]) == 2
    record = json.loads(capsys.readouterr().err)
    assert record["level"] == "error" and "'bogus' is no setting" in record["msg"]
    with pytest.raises(SystemExit) as exit:  # argparse's usage error
        main(["serve", "--log-format", "logfmt", "--db", "x.db", "--listen", "nowhere"])
    assert exit.value.code == 2
    line = capsys.readouterr().err
    assert re.fullmatch(r'time=\S+ level=error program=serve msg="argument --listen: .*"\n',
                        line), line


def test_an_exception_nothing_caught_is_one_critical_record(log_format):
    import threading

    raw = io.StringIO()
    sys.stderr = raw
    service.configure("serve", "json")
    t = threading.Thread(target=lambda: 1 / 0, name="validate-bac1")
    t.start()
    t.join()
    lines = raw.getvalue().splitlines()
    assert len(lines) == 1, lines
    record = json.loads(lines[0])
    assert record["level"] == "critical" and record["msg"].startswith("thread validate-bac1: ")
    assert "ZeroDivisionError" in record["msg"] and "Traceback" in record["msg"]


def test_a_value_refused_is_said_once(tmp_path, capsys):
    path = tmp_path / "serve.toml"
    path.write_text('db = "x.db"\nstore-alarm = "five"\n')
    assert main(["serve", "--config", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("five") == 1, err


def test_the_unit_quotes_a_path_as_systemd_splits_it(capsys, tmp_path):
    assert main(["unit", "serve", "--settings", "/etc/sabot pit/100%.toml"]) == 0
    unit = capsys.readouterr().out
    assert '--config "/etc/sabot pit/100%%.toml" --log-format logfmt' in unit
    assert main(["unit", "serve", "--settings", "/etc/${HOME}/serve.toml"]) == 0
    assert "--config /etc/$${HOME}/serve.toml " in capsys.readouterr().out  # not expanded
    assert main(["unit", "witness", "--settings", "witness.toml"]) == 2


def test_a_unit_whose_sabot_lives_under_a_home_directory_is_said_to_be_hidden_from_it(
        capsys, tmp_path, monkeypatch):
    """A developer's clone (its venv's Python under /root or /home) prints a unit the service,
    its home directories hidden (ProtectHome=true), could not run: said on standard error."""
    sabot = tmp_path / "sabot"
    sabot.write_text("#!/home/tech/sabot/.venv/bin/python\nimport sys\n")
    sabot.chmod(0o755)
    monkeypatch.setattr(sys, "argv", [str(sabot)])
    assert main(["unit", "serve"]) == 0
    out, err = capsys.readouterr()
    said = "/home/tech/sabot/.venv/bin/python is under a home directory"
    assert f"ExecStart={sabot} " in out and said in err, err
    sabot.write_text("#!/usr/bin/python3\n")
    assert main(["unit", "serve"]) == 0 and "warning" not in capsys.readouterr().err
