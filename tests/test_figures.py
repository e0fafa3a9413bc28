"""The documents state only figures that `make bench` prints: each figure names the bench label it
comes from, `section.key`, and every label is one bench/bench.py prints (its LABELS, which bench's
main() checks against each section's output), so the documents and bench cannot drift apart
unnoticed. docs/PERFORMANCE.md holds the figures' tables; README and the documents the rest of
its text moved to cite some of them, held to the same checks."""

import functools
import importlib.util
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# the documents held to the bench: the front page and every document its text moved to
DOCUMENTS = ("README.md", "docs/PERFORMANCE.md", "docs/DEVELOPING.md", "docs/TECHNICIAN.md",
             "docs/HARDWARE.md", "docs/COMMANDS.md", "docs/SERVE.md", "docs/AUDIT.md",
             "docs/RULES.md", "docs/PROTOCOL.md")
# the document of the figures, and its sections whose tables and examples are figures; anywhere,
# a paragraph citing the bench
FIGURES = "docs/PERFORMANCE.md"
FIGURE_SECTIONS = ("Performance", "Reliability")
# a measured-looking number: a size, a time, a rate
FIGURE = re.compile(r"\d[\d,.]*\s?(?:ms|µs|s|KB|MB|B|%|×|rounds/s|frames/s)(?![\w/])")
LABEL = re.compile(r"`([a-z]+)\.([a-z0-9_]+)`")
FILE_SUFFIXES = {"py", "db", "md", "json", "txt", "pem", "key", "sock", "img", "png", "mpy"}


@functools.cache
def _bench():
    spec = importlib.util.spec_from_file_location("bench", ROOT / "bench" / "bench.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _blocks(text):
    """(section, kind, block): each table row ("row"), fenced code block ("code") and paragraph
    ("text") on its own."""
    section, lines, fenced = "", [], False
    for line in text.splitlines() + [""]:
        if line.startswith("```"):
            if fenced:
                yield section, "code", "\n".join(lines)
                lines = []
            elif lines:
                yield section, "text", "\n".join(lines)
                lines = []
            fenced = not fenced
            continue
        if fenced:
            lines.append(line)
            continue
        if line.startswith(("## ", "|")) or not line.strip():
            if lines:
                yield section, "text", "\n".join(lines)
            lines = []
            if line.startswith("## "):
                section = line[3:].strip()
            elif line.startswith("|") and not set(line) <= set("|-: "):
                yield section, "row", line
            continue
        lines.append(line)


def _documents():
    """(path, its blocks) of every document held to the bench."""
    return [(path, list(_blocks((ROOT / path).read_text()))) for path in DOCUMENTS]


def _labels(block, sections):
    return [(s, k) for s, k in LABEL.findall(block) if s in sections and k not in FILE_SUFFIXES]


def test_every_label_the_documents_name_is_one_bench_prints():
    bench = _bench()
    labels = {(s, k) for s, keys in bench.LABELS.items() for k in (*keys, "section_s")}
    unknown, named = [], {}
    for path, blocks in _documents():
        named[path] = {lab for _, _, block in blocks for lab in _labels(block, bench.SECTIONS)}
        unknown += sorted(f"{path}: {s}.{k}" for s, k in named[path] if (s, k) not in labels)
    assert not unknown, f"the documents name figures bench/bench.py does not print: {unknown}"
    assert len(named[FIGURES]) >= 40  # the figures really are labelled (not a vacuous pass)
    # a document that cites a bench label is one of those held to the checks
    unheld = [str(p.relative_to(ROOT)) for p in sorted((ROOT / "docs").glob("*.md"))
              if str(p.relative_to(ROOT)) not in DOCUMENTS
              and any(_labels(b, bench.SECTIONS) for _, _, b in _blocks(p.read_text()))]
    assert not unheld, f"these cite bench labels: add them to DOCUMENTS: {unheld}"


def _checked(section, kind, block):
    """Whether a figure in this block must name its label: a table row or an example in the
    figures sections (prose there may state a setting: a timeout, a rate), or any block that cites
    the bench."""
    cites_bench = "make bench" in block or "bench.py" in block
    return cites_bench or (section in FIGURE_SECTIONS and kind != "text")


def test_every_figure_in_the_figures_sections_names_its_bench_label():
    """A table row or example in docs/PERFORMANCE.md's Performance or Reliability that states a
    figure, and any paragraph of any document that cites `make bench` and states one, names at
    least one label."""
    bench = _bench()
    unlabelled = []
    for path, blocks in _documents():
        for section, kind, block in blocks:
            figures_section = section if path == FIGURES else ""
            if FIGURE.findall(block) and _checked(figures_section, kind, block) \
                    and not _labels(block, bench.SECTIONS):
                unlabelled.append(f"{path} [{section}] {block[:100]}")
    assert not unlabelled, "figures without a bench label:\n" + "\n".join(unlabelled)


def test_the_figures_document_has_its_figures_sections():
    """docs/PERFORMANCE.md keeps the sections the checks above hold row by row, each with a table
    of labelled figures (a renamed heading would let its rows go unchecked)."""
    sections = {section for section, kind, _ in _blocks((ROOT / FIGURES).read_text())
                if kind == "row"}
    assert set(FIGURE_SECTIONS) <= sections


def test_the_figures_say_which_machine_and_command():
    """The Performance section names the machine and the command its figures came from, as
    bench's own first lines print them."""
    text = (ROOT / FIGURES).read_text()
    performance = text.split("\n## Performance\n", 1)[1].split("\n## ", 1)[0]
    assert "machine: " in performance and "command: make bench" in performance
    source = (ROOT / "bench" / "bench.py").read_text()
    assert 'print(f"# machine: ' in source and '"# command: make bench' in source


def test_the_check_finds_an_unlabelled_figure_and_an_unknown_label():
    """The checks above can fail: a figure with no label, and a label bench does not print."""
    bench = _bench()
    text = ("## Performance\n\n| serve rate | 222 rounds/s |\n\nthe soak: `soak.rounds_made` 12\n"
            "\n```\nsabot soak   # 80 s\n```\n\n## Other\n\n`make bench` says 3.2 s\n")
    blocks = list(_blocks(text))
    assert [kind for _, kind, _ in blocks] == ["row", "text", "code", "text"]
    row, code, cited = blocks[0], blocks[2], blocks[3]
    for block in (row, code, cited):
        assert FIGURE.findall(block[2]) and _checked(*block)
        assert not _labels(block[2], bench.SECTIONS)
    named = _labels(blocks[1][2], bench.SECTIONS)
    assert named == [("soak", "rounds_made")] and "rounds_made" not in bench.LABELS["soak"]
