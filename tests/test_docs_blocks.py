"""Every runnable shell block of the documents (README.md, docs/*.md), run as written: a block
marked `<!-- runnable -->` on the line before its fence must exit 0 (tests/kit/docblocks.py says
the markers and how a session runs). Each document's blocks are one session, in order, in one
fresh directory: one test a document, so a reader's sequence never splits across workers. A block
that fails names its file and line, and shows its output and that of the blocks running in the
background. docs/FLOOR.md's blocks are run by tests/test_floor_runbook.py instead."""

import re

import pytest

from kit import ROOT
from kit.docblocks import Session, blocks_of, documents, parse_runnable

# Each document's session starts boards, servers and sabot commands; one may wait for another
# that holds the same ports, so each can take ten seconds or more.
DOCUMENTS = documents()


@pytest.mark.board
@pytest.mark.long
@pytest.mark.parametrize("document", DOCUMENTS)
def test_runnable_blocks_run_as_written(document, tmp_path):
    doc, examples = blocks_of(ROOT / document)
    assert examples, f"{document}: no runnable block"
    with Session(document, tmp_path, [e.parsed for e in examples]) as session:
        doc.namespace["session"] = session
        for example in examples:
            example.evaluate()  # a failure: sybil's SybilFailure, with the block's file:line


def test_the_documents_have_runnable_blocks():
    assert "README.md" in DOCUMENTS and "docs/TECHNICIAN.md" in DOCUMENTS, DOCUMENTS
    assert "docs/FLOOR.md" not in DOCUMENTS  # (its own test runs every block)


class Text:
    def __init__(self, text, path):
        self.text, self.path = text, path


def regions(text, path="/x/GUIDE.md"):
    return list(parse_runnable(Text(text, path)))


def test_the_marker_takes_the_block_after_it():
    text = ("intro\n\n```\nnot runnable\n```\n\n<!-- runnable -->\n```sh\necho one\necho two\n"
            "```\n<!-- runnable: in the background -->\n```sh\nsabot board --listen "
            "127.0.0.1:7000\n```\n<!-- runnable: again until it passes -->\n```\ntrue\n```\n")
    found = regions(text)
    assert [(r.parsed.line, r.parsed.mode, r.parsed.text) for r in found] == [
        (8, "run", "echo one\necho two\n"),
        (13, "background", "sabot board --listen 127.0.0.1:7000\n"),
        (17, "until", "true\n")]
    # bash's line numbers are the document's: the block's first line is the fence's next
    assert found[0].parsed.script().splitlines()[8] == "echo one"


@pytest.mark.parametrize("text, said", [
    ("<!-- runnable: later -->\n```sh\ntrue\n```\n", "not a runnable marker"),
    ("<!-- runnable -->\n\n```sh\ntrue\n```\n", "just before"),
    ("<!-- runnable -->\n```sh\ntrue\n", "never closed"),
    ("<!-- runnable -->\n```sh\nsabot serve --db x.db\n```\n", "name it with --listen"),
])
def test_a_marker_that_cannot_be_run_is_said(text, said):
    with pytest.raises(ValueError, match=said) as e:
        regions(text)
    assert re.search(r"GUIDE.md:[12]: ", str(e.value))


@pytest.mark.board
def test_a_failing_block_names_its_line_and_shows_its_output(tmp_path):
    guide = tmp_path / "GUIDE.md"
    guide.write_text("# a guide\n\n<!-- runnable -->\n```sh\necho made > made.txt\n```\n\n"
                     "<!-- runnable -->\n```sh\ncat made.txt\necho about to fail\n"
                     "test -n \"$UNSET_IN_THIS_TEST\"\necho never\n```\n")
    doc, examples = blocks_of(guide)
    with pytest.raises(AssertionError) as e, Session(guide, tmp_path / "s",
                                                      [x.parsed for x in examples]) as session:
        doc.namespace["session"] = session
        for example in examples:
            example.evaluate()
    said = str(e.value)
    assert "GUIDE.md:9: exited 1" in said  # the second block, the shared directory's file read
    assert "made\nabout to fail\n" in said and "line 12: UNSET_IN_THIS_TEST: unbound" in said
    assert "never" not in said.split("--- its output")[1]
