"""The figures come from `make bench` alone. bench/bench.py prints them and writes them to
docs/FIGURES.md (bench/page.py), by label, `section.key`; the hand-written documents (README and
the documents below) say what each figure measures and what it is asked to be, and cite its label,
linked to its row in docs/FIGURES.md, without copying its number. So a number a document states
beside a label is a target (after ≤, <, "under", ...), never a measurement that could go stale:
the checks below fail on a copied figure, naming the document, line, label and both values."""

import functools
import importlib.util
import json
import re
from pathlib import Path
from typing import NamedTuple

ROOT = Path(__file__).resolve().parents[1]
# the page the bench writes, and only the bench
PAGE = "docs/FIGURES.md"
# the documents held to the bench: the front page and every hand-written document
DOCUMENTS = ("README.md", *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs").glob("*.md")
                                  if str(p.relative_to(ROOT)) != PAGE))
# the document of the figures, and its sections whose tables and examples are figures; anywhere,
# a paragraph citing the bench
FIGURES = "docs/PERFORMANCE.md"
FIGURE_SECTIONS = ("Performance", "Reliability")
# a measured-looking number: a size, a time, a rate
FIGURE = re.compile(r"\d[\d,.]*\s?(?:ms|µs|s|h|KB|KiB|MB|B|%|×|rounds/s|frames/s|checkpoints/s)"
                    r"(?![\w/])")
LABEL = re.compile(r"`([a-z]+)\.([a-z0-9_]+)`")
FILE_SUFFIXES = {"py", "db", "md", "json", "txt", "pem", "key", "sock", "img", "png", "mpy", "uf2",
                 "bin", "toml", "yml", "service", "gz"}
# a number after one of these is a target, a requirement, not a measurement
TARGET = re.compile(r"(?:[≤≥<>]|\b(?:under|within|below|at most|at least|up to|"
                    r"more than|less than))\s*$", re.IGNORECASE)
NUMBER = re.compile(r"(?<![\w.\-])\d[\d,]*(?:\.\d+)?(?![\w\-]|\.\d)")
CODE_OR_LINK = re.compile(r"`[^`]*`|\]\([^)]*\)")


@functools.cache
def _load(name):
    spec = importlib.util.spec_from_file_location(name, ROOT / "bench" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _bench():
    return _load("bench")


@functools.cache
def _page():
    """{(section, key): value} of docs/FIGURES.md, as the latest bench runs printed them."""
    records = _load("page").parse((ROOT / PAGE).read_text())
    return {(s, k): v for s, r in records.items() for k, v in r["figures"].items()}


class Block(NamedTuple):
    section: str  # the heading (##) it is under
    kind: str  # "row" (a table row), "code" (a fenced block) or "text" (a paragraph)
    text: str
    line: int  # its first line in the document, from 1
    header: tuple = ()  # a row's table header cells


def _cells(row):
    return tuple(c.strip() for c in row.strip().strip("|").split("|"))


def _blocks(text):
    """Each table row, fenced code block and paragraph on its own (a table's header row too)."""
    section, lines, fenced, first, header = "", [], False, 0, None
    for n, line in enumerate(text.splitlines() + [""], 1):
        if line.startswith("```"):
            if lines:
                yield Block(section, "text" if not fenced else "code", "\n".join(lines), first)
            lines, first = [], n + 1
            fenced = not fenced
            continue
        if fenced:
            lines.append(line)
            continue
        if line.startswith(("## ", "|")) or not line.strip():
            if lines:
                yield Block(section, "text", "\n".join(lines), first)
            lines, first = [], n + 1
            if line.startswith("## "):
                section = line[3:].strip()
            if not line.startswith("|"):
                header = None
            elif not set(line) <= set("|-: "):
                header = header or _cells(line)
                yield Block(section, "row", line, n, header)
            continue
        if not lines:
            first = n
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
        named[path] = {lab for b in blocks for lab in _labels(b.text, bench.SECTIONS)}
        unknown += sorted(f"{path}: {s}.{k}" for s, k in named[path] if (s, k) not in labels)
    assert not unknown, f"the documents name figures bench/bench.py does not print: {unknown}"
    assert len(named[FIGURES]) >= 40  # the figures really are labelled (not a vacuous pass)
    # a document that cites a bench label is one of those held to the checks
    unheld = [str(p.relative_to(ROOT)) for p in sorted((ROOT / "docs").glob("*.md"))
              if str(p.relative_to(ROOT)) not in (*DOCUMENTS, PAGE)
              and any(_labels(b.text, bench.SECTIONS) for b in _blocks(p.read_text()))]
    assert not unheld, f"these cite bench labels: add them to DOCUMENTS: {unheld}"


def _checked(block):
    """Whether a figure in this block must name its label: a table row or an example in the
    figures sections (prose there may state a setting: a timeout, a rate), or any block that cites
    the bench."""
    cites_bench = "make bench" in block.text or "bench.py" in block.text
    return cites_bench or (block.section in FIGURE_SECTIONS and block.kind != "text")


def test_every_figure_in_the_figures_sections_names_its_bench_label():
    """A table row or example in docs/PERFORMANCE.md's Performance or Reliability that states a
    figure, and any paragraph of any document that cites `make bench` and states one, names at
    least one label (and then the next test holds that figure to be a target)."""
    bench = _bench()
    unlabelled = []
    for path, blocks in _documents():
        for b in blocks:
            held = b._replace(section=b.section if path == FIGURES else "")
            if FIGURE.findall(b.text) and _checked(held) and not _labels(b.text, bench.SECTIONS):
                unlabelled.append(f"{path}:{b.line} [{b.section}] {b.text[:100]}")
    assert not unlabelled, "figures without a bench label:\n" + "\n".join(unlabelled)


def _number(text):
    return float(re.match(r"[\d,.]*\d", text).group().replace(",", ""))


def _copied(block, labels, figures):
    """The numbers this block, which names `labels`, states as measurements: [(its line, the
    number as written, the label it is nearest, that label's figure in docs/FIGURES.md)]. Any
    number with a unit (a size, a time, a rate), and any other equal to a count (20 or more) of a
    label the block names, unless it is a target (after ≤, <, "under", ..., or in a table's target
    column); commands and code (`...`) and link targets are not read."""
    text = block.text
    if block.kind == "row":  # the target column is requirements
        cells = _cells(text)
        text = " | ".join(c for i, c in enumerate(cells)
                          if i >= len(block.header) or block.header[i].lower() != "target")
    text = CODE_OR_LINK.sub(lambda m: re.sub(r"[^\n]", " ", m.group()), text)
    values = {lab: figures[lab] for lab in labels if lab in figures}
    numeric = {lab: v for lab, v in values.items()
               if isinstance(v, int | float) and not isinstance(v, bool)}
    found = []
    for m in list(FIGURE.finditer(text)) + list(NUMBER.finditer(text)):
        if TARGET.search(text[:m.start()]):
            continue
        stated = _number(m.group())
        # a bare number is held to counts (ints, which the seeds fix: a timing could meet any
        # number by chance), and only from 20 up: below, it is as often a setting (seed 5, best
        # of 5, 16 hex digits)
        equal = [lab for lab, v in numeric.items() if abs(v - stated) <= 1e-9 * max(1, abs(v))
                 and (m.re is FIGURE or (isinstance(v, int) and v >= 20))]
        if m.re is NUMBER and not equal:
            continue  # a count of something else: 8 decks, 17 wagers
        nearest = min(numeric, key=lambda lab: abs(numeric[lab] - stated), default=None)
        line = block.line + text[:m.start()].count("\n")
        found.append((m.start(), -len(m.group()), line, " ".join(m.group().split()),
                      (equal or [nearest])[0]))
    seen, out = set(), []
    for _, _, line, stated, lab in sorted(found):  # a figure with a unit is found twice
        if (line, _number(stated)) not in seen:
            seen.add((line, _number(stated)))
            out.append((line, stated, lab, values.get(lab)))
    return out


def _say(path, line, stated, label, value):
    if label is None:
        return f"{path}:{line}: states {stated}, which no label it names prints"
    s, k = label
    return (f"{path}:{line}: states {stated} beside `{s}.{k}`, which is {json.dumps(value)} in "
            f"{PAGE}: cite the label, linked to its row, and do not copy the number")


def test_the_documents_copy_no_figure():
    """Beside a bench label, a document states no measured figure, neither a copy of the label's
    (which the next bench run would leave stale) nor one the bench does not print: docs/FIGURES.md
    holds the numbers; the documents hold targets, settings in commands, and what the figures
    mean."""
    bench, figures = _bench(), _page()
    copied = []
    for path, blocks in _documents():
        before: list = []  # the labels of the paragraph before: an example after it is its
        for b in blocks:
            labels = _labels(b.text, bench.SECTIONS) or (before if b.kind == "code" else [])
            if labels:
                copied += [_say(path, *c) for c in _copied(b, labels, figures)]
            before = _labels(b.text, bench.SECTIONS) if b.kind == "text" else []
    assert not copied, "figures copied into the documents:\n" + "\n".join(copied)


# a rate or a time in microseconds is a measurement wherever it is written, unless it is a
# target or a setting (after ≤, ≥, "under", ..., "takes": a chip's datasheet time)
MEASURED = re.compile(r"\d[\d,.]*\s?(?:µs|rounds/s|frames/s|checkpoints/s|cards/s)(?![\w/])")
SETTING = re.compile(r"(?:[≤≥<>]|\b(?:under|within|below|at most|at least|up to|more than|"
                     r"less than|takes))\s*$", re.IGNORECASE)


def _unlabelled_measurements(path, blocks, sections):
    """A rate or a µs time stated in a block that names no bench label (an example after a
    labelled paragraph counts as labelled: the copy check above reads it)."""
    out, before = [], []
    for b in blocks:
        own = _labels(b.text, sections)
        labelled = own or (before if b.kind == "code" else [])
        before = own if b.kind == "text" else []
        if labelled or (path == FIGURES and b.kind == "row"):
            continue
        text = CODE_OR_LINK.sub(lambda m: " " * len(m.group()), b.text)
        for m in MEASURED.finditer(text):
            if not SETTING.search(text[:m.start()]):
                out.append(f"{path}:{b.line + text[:m.start()].count(chr(10))}: {m.group()}")
    return out


def test_no_document_states_a_rate_or_time_the_bench_does_not_print():
    """A figure with no bench label anywhere near it (a rate in a security note, a card's time
    in a guide) is one nobody reruns: each must cite the label whose row has it."""
    bench = _bench()
    found = [m for path, blocks in _documents()
             for m in _unlabelled_measurements(path, blocks, bench.SECTIONS)]
    assert not found, "measured figures with no bench label:\n" + "\n".join(found)
    planted = list(_blocks("## Other\n\nThe audit verifies 12,413 frames/s, a card 13 µs; the "
                           "chip takes 400 µs a page, under 50 µs a card.\n"))
    assert _unlabelled_measurements("x.md", planted, bench.SECTIONS) == [
        "x.md:3: 12,413 frames/s", "x.md:3: 13 µs"]


def test_every_label_cited_links_to_its_row():
    """A label a document names is a link to its row in docs/FIGURES.md:
    [`section.key`](FIGURES.md#section.key) (docs/FIGURES.md#... from README)."""
    bench = _bench()
    unlinked = []
    for path, blocks in _documents():
        page = Path(*[".."] * (path.count("/"))) / Path(PAGE).relative_to(Path(path).parent) \
            if not path.startswith("docs/") else Path(PAGE).name
        for b in blocks:
            for s, k in _labels(b.text, bench.SECTIONS):
                if f"[`{s}.{k}`]({page}#{s}.{k})" not in b.text:
                    unlinked.append(f"{path}:{b.line}: `{s}.{k}`, not linked as "
                                    f"[`{s}.{k}`]({page}#{s}.{k})")
    assert not unlinked, "labels not linked to their rows:\n" + "\n".join(unlinked)


def test_the_figures_document_has_its_figures_sections():
    """docs/PERFORMANCE.md keeps the sections the checks above hold row by row, each with a table
    of labelled figures (a renamed heading would let its rows go unchecked)."""
    sections = {b.section for b in _blocks((ROOT / FIGURES).read_text()) if b.kind == "row"}
    assert set(FIGURE_SECTIONS) <= sections


def test_the_figures_page_is_the_bench_output_untouched():
    """docs/FIGURES.md is as bench/page.py writes it from bench runs: its first line says so, it
    has every section with exactly the labels the bench prints, each with the machine, command,
    date and load of its run, and it is what page.render() makes of its own records (a number
    edited by hand in a row makes it differ)."""
    bench, page = _bench(), _load("page")
    text = (ROOT / PAGE).read_text()
    assert text.splitlines()[0] == page.FIRST_LINE
    records = page.parse(text)
    assert set(records) == set(bench.SECTIONS), \
        f"{PAGE} lacks {set(bench.SECTIONS) - set(records)}"
    for section, r in records.items():
        assert set(r["figures"]) == {*bench.LABELS[section], "section_s"}, section
        assert all(r[k] for k in ("machine", "command", "date", "load_start", "load_end")), section
        assert "bench" in r["command"] and "cores" in r["machine"], section
        assert "MicroPython" in r["machine"], section
    assert text == page.render(records, list(bench.SECTIONS)), \
        f"{PAGE} was edited by hand: run the bench (make bench) to change it"


def test_a_section_run_rewrites_only_its_section(tmp_path):
    """A run of some sections replaces their rows and run lines on the page and keeps the
    others'; a section the bench no longer has is dropped."""
    page, out = _load("page"), tmp_path / "FIGURES.md"

    def record(figures, load):
        return {"figures": figures, "command": "make bench", "machine": "x86_64 2 cores (A)",
                "date": "2025-01-01 00:00 UTC", "load_start": load, "load_end": load}

    page.write(out, {"audit": record({"frames_per_s": 1}, "0.1/0.1/0.1"),
                     "link": record({"rounds": 2}, "0.2/0.2/0.2"),
                     "gone": record({"x": 1}, "0")}, ["link", "audit", "gone"])
    page.write(out, {"audit": record({"frames_per_s": 3}, "1.5/1.0/0.5")}, ["link", "audit"])
    records = page.parse(out.read_text())
    assert list(records) == ["link", "audit"]
    assert records["link"]["figures"] == {"rounds": 2}
    assert records["link"]["load_start"] == "0.2/0.2/0.2"
    assert records["audit"]["figures"] == {"frames_per_s": 3}
    assert records["audit"]["load_end"] == "1.5/1.0/0.5"
    text = out.read_text()
    assert text.splitlines()[0] == page.FIRST_LINE and '<a id="audit.frames_per_s"></a>' in text


def test_the_checks_find_an_unlabelled_figure_an_unknown_label_and_a_copied_figure():
    """The checks above can fail: a figure with no label, a label bench does not print, a figure
    copied beside its label, and one no label prints; and they let a target pass."""
    bench = _bench()
    text = ("## Performance\n\n| serve rate | 222 rounds/s |\n\nthe soak: `soak.rounds_made` 12\n"
            "\n```\nsabot soak   # 80 s\n```\n\n## Other\n\n`make bench` says 3.2 s\n")
    blocks = list(_blocks(text))
    assert [b.kind for b in blocks] == ["row", "text", "code", "text"]
    row, code, cited = blocks[0], blocks[2], blocks[3]
    for block in (row, code, cited):
        assert FIGURE.findall(block.text) and _checked(block)
        assert not _labels(block.text, bench.SECTIONS)
    named = _labels(blocks[1].text, bench.SECTIONS)
    assert named == [("soak", "rounds_made")] and "rounds_made" not in bench.LABELS["soak"]
    figures = {("audit", "frames_per_s"): 14331, ("audit", "rows"): 11458}
    text = ("## Performance\n\n| figure | target | measured | label |\n|---|---|---|---|\n"
            "| verify | ≥ 10,000 frames/s | 14,331 frames/s over 11,458 rows, 0.5 s | "
            "`audit.frames_per_s`, `audit.rows` |\n\nUnder 20 ms; within 1 s (`audit.rows`).\n")
    row, prose = [b for b in _blocks(text) if b.line > 3]
    found = _copied(row, _labels(row.text, bench.SECTIONS), figures)
    assert [(line, stated) for line, stated, _, _ in found] == [
        (5, "14,331 frames/s"), (5, "11,458"), (5, "0.5 s")]
    assert found[0][2:] == (("audit", "frames_per_s"), 14331)
    assert found[1][2:] == (("audit", "rows"), 11458)
    assert "docs/X.md:5: states 14,331 frames/s beside `audit.frames_per_s`, which is 14331" \
        in _say("docs/X.md", *found[0])
    assert _copied(prose, _labels(prose.text, bench.SECTIONS), figures) == []
