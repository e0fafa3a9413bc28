"""The documents as a site (mkdocs.yml's hook): the pages are the files GitHub shows, and this
makes the two readings agree without a copy of anything.

- The home page is README.md itself, served as index.md; its links into docs/
  (`docs/AUDIT.md#alarms`, `docs/scoreboard-1920x1080.png`) become the site's
  (`AUDIT.md#alarms`).
- A link to a file of the repository outside docs/ (`../host_tools/sabot/cli/options.py` in a
  document, `Makefile` in README) points at that file where the repository is published
  (mkdocs.yml's `repo_url`), or becomes its path in plain code when no `repo_url` is set; a link to
  a file that does not exist is a warning, which the strict build turns into a failure.
- The generated pages (docs/CLI.md from the parsers, docs/FIGURES.md from `make bench`) are
  committed like the rest; their tests fail while they differ from what writes them.
"""

from __future__ import annotations

import logging
import posixpath
import re
from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
README = ROOT / "README.md"
HOME = "index.md"
BRANCH = "main"  # the branch a published repository's links name
# an inline link or image, [text](target): its text, target and optional title
LINK = re.compile(r"\[(?P<text>[^\]]*)\]\((?P<target>[^)\s]+)(?P<title>\s+\"[^\"]*\")?\)")
EXTERNAL = re.compile(r"^(?:[a-z][a-z0-9+.-]*:|#|/)", re.IGNORECASE)

log = logging.getLogger("mkdocs.hooks.sabot")


def on_files(files: Files, config: Any) -> Files:
    """README.md, unchanged on disk, is the site's home page."""
    files.append(File.generated(config, HOME, abs_src_path=str(README)))
    return files


def on_page_markdown(markdown: str, page: Any, config: Any, files: Files) -> str:
    if page.file.src_uri == HOME:
        return rewrite(markdown, "", config.get("repo_url"), "README.md")
    return rewrite(markdown, "docs", config.get("repo_url"), f"docs/{page.file.src_uri}")


def on_serve(server: Any, config: Any, builder: Any) -> Any:
    server.watch(str(README))  # `mkdocs serve` rebuilds when the home page changes
    return server


def rewrite(markdown: str, where: str, repo_url: str | None, name: str = "") -> str:
    """The page's links as the site needs them; `where` is the page's directory in the
    repository ("" for README, "docs" for a document), `name` its file, for a warning. Fenced
    code is left as it is; a link's text may run over lines."""
    out: list[str] = []
    prose: list[str] = []
    fence: str | None = None

    def flush() -> None:
        out.append(LINK.sub(lambda m: _link(m, where, repo_url, name), "".join(prose)))
        prose.clear()

    for line in markdown.splitlines(keepends=True):
        stripped = line.lstrip()
        if fence is None and stripped.startswith(("```", "~~~")):
            flush()
            fence = stripped[:3]
        elif fence is not None:
            fence = None if stripped.startswith(fence) else fence
        else:
            prose.append(line)
            continue
        out.append(line)
    flush()
    return "".join(out)


def _link(m: re.Match[str], where: str, repo_url: str | None, name: str) -> str:
    target = m["target"]
    if EXTERNAL.match(target):
        return m[0]
    path, _, fragment = target.partition("#")
    in_repo = posixpath.normpath(posixpath.join(where, path)) if path else where
    if in_repo == "README.md":  # the home page
        return _with_target(m, HOME + (f"#{fragment}" if fragment else ""))
    if (in_repo == "docs" or in_repo.startswith("docs/")) and not in_repo.endswith(".py"):
        if where == "docs":
            return m[0]  # a page or picture of the site, as written
        site = posixpath.relpath(in_repo, "docs")
        return _with_target(m, site + (f"#{fragment}" if fragment else ""))
    if in_repo.startswith("../") or not (ROOT / in_repo).exists():
        log.warning("%s links to %s, which is not a file of the repository", name, target)
        return m[0]
    if repo_url:
        kind = "tree" if (ROOT / in_repo).is_dir() else "blob"
        url = f"{repo_url.rstrip('/')}/{kind}/{BRANCH}/{in_repo}"
        return _with_target(m, url + (f"#{fragment}" if fragment else ""))
    text = m["text"]
    if text.strip("`") and in_repo.endswith(text.strip("`")):
        return text if text.startswith("`") else f"`{text}`"
    return f"{text} (`{in_repo}`)"


def _with_target(m: re.Match[str], target: str) -> str:
    return f"[{m['text']}]({target}{m['title'] or ''})"
