"""The documents build as a site (mkdocs.yml, `make docs`) with mkdocs' strict checks: every link
to a page, every anchor and every navigation entry is there, and so is every file of the repository
a document links to (docs/hooks.py); the home page is README.md and each reader has a page."""

import os
import subprocess
import sys

import pytest

from kit import ROOT

# README's readers, each to a page of their own (the site's path of each document)
READERS = {"the bench technician": "TECHNICIAN", "the pit supervisor": "PIT",
           "the casino's IT": "INSTALL", "its runbook": "FLOOR", "its pit hosts": "SERVE",
           "the test lab and the regulator": "LAB", "the developer": "DEVELOPING"}


@pytest.mark.board  # runs mkdocs
def test_the_site_builds_strictly_with_the_home_page_and_each_readers_page(tmp_path):
    site = tmp_path / "site"
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}  # the theme's notice about its successor
    r = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir",
                        str(site)], cwd=ROOT, env=env, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    home = (site / "index.html").read_text()
    assert "What sabot is" in home  # README itself
    assert 'href="AUDIT/#alarms"' in home  # README's links into docs/, the site's now
    missing = [f"{reader}: {page}" for reader, page in READERS.items()
               if not (site / page / "index.html").exists()]
    assert not missing, missing
    assert not (site / "hooks.py").exists()  # the build's own code is no page


def test_every_test_the_documents_cite_is_there():
    """A document that says which test shows a claim names one that exists: a test function
    (`test_x`, or `test_x_*` for those it begins) or a test file; a test renamed without its
    citation leaves a claim no test backs."""
    import re

    names = set()
    for path in (ROOT / "tests").rglob("*.py"):
        text = path.read_text()
        names.add(path.stem)
        names.update(re.findall(r"^\s*(?:async )?def (test_\w+)", text, re.M))
    missing = []
    for doc in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for n, line in enumerate(doc.read_text().splitlines(), 1):
            for cited, star in re.findall(r"\b(test_\w+?)(_\*)?(?![\w*])", line):
                prefix = cited + "_" if star else None
                if cited not in names and not (prefix and any(x.startswith(prefix)
                                                               for x in names)):
                    missing.append(f"{doc.relative_to(ROOT)}:{n}: {cited}{star}")
    assert not missing, "tests the documents cite that are not there:\n" + "\n".join(missing)
