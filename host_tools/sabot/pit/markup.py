"""HTML built so that nothing a store or registry holds can become markup. A page is made of
`Html`, which only this module's builders make (an element, a join, a document); every other
value given to them is text and is escaped, in an element's content and in its attributes alike.
A string put together by hand (an f-string) is a plain `str`, so it is escaped too: markup cannot
be smuggled in by formatting, only built.

The builders also refuse what the pages' Content-Security-Policy would block, so a page that
renders is one the browser runs as written: no inline script or style (a `script` element only
loads a file, no `style` element or attribute), no event-handler attribute, and links only to
paths of this server (no `javascript:` URL, no other origin)."""

from __future__ import annotations

import html
import re
from collections.abc import Iterable
from types import GeneratorType
from typing import Any

_MADE_HERE = object()
_NAME = re.compile(r"[a-z][a-z0-9]*(-[a-z0-9]+)*")
_VOID = frozenset({"br", "link", "meta", "img", "hr", "input", "wbr"})
_URL_ATTRS = frozenset({"href", "src", "action", "formaction", "poster", "cite", "data"})
_SAME_ORIGIN_PATH = re.compile(r"/(?![/\\])[^\s\x00-\x1f\\]*")


class Html:
    """Markup safe to send: made only by el(), join() and document()."""

    __slots__ = ("_text",)

    def __init__(self, text: str, made: object = None) -> None:
        if made is not _MADE_HERE:
            raise TypeError("Html is built with el(), join() or document(), never from a string")
        self._text = text

    def __str__(self) -> str:
        return self._text

    def __repr__(self) -> str:
        return f"Html({self._text[:60]!r})"


Child = Any  # Html, None (nothing), a list, tuple or generator of children, or any value (text)


def _content(children: Iterable[Child]) -> str:
    out = []
    for c in children:
        if c is None:
            continue
        if isinstance(c, Html):
            out.append(c._text)
        elif isinstance(c, (list, tuple, GeneratorType)):
            out.append(_content(c))
        else:
            out.append(html.escape(c if isinstance(c, str) else str(c), quote=True))
    return "".join(out)


def _attribute(key: str, value: Any) -> str:
    name = key.rstrip("_").replace("_", "-")
    if not _NAME.fullmatch(name) or name.startswith("on") or name == "style":
        raise ValueError(f"attribute {name!r}: event handlers and inline style are not sent "
                         "(the Content-Security-Policy blocks them)")
    if value is True:
        return f" {name}"
    text = value if isinstance(value, str) else str(value)
    if name in _URL_ATTRS and not _SAME_ORIGIN_PATH.fullmatch(text):
        raise ValueError(f"{name}={text!r}: a page links only to a path of this server")
    return f' {name}="{html.escape(text, quote=True)}"'


def el(tag: str, *children: Child, **attrs: Any) -> Html:
    """<tag attrs>children</tag>; a keyword's `_` is a `-` (`data_v` is `data-v`), a trailing
    one is dropped (`class_`); an attribute given None or False is left out."""
    if not _NAME.fullmatch(tag) or tag == "style":
        raise ValueError(f"no <{tag}> element: styles come from the stylesheet file")
    if tag == "script" and (children or set(attrs) != {"src"}):
        raise ValueError("a <script> only loads a file: <script src=...>, nothing inline")
    opening = "<" + tag + "".join(_attribute(k, v) for k, v in attrs.items()
                                  if v is not None and v is not False) + ">"
    if tag in _VOID:
        if children:
            raise ValueError(f"<{tag}> holds nothing")
        return Html(opening, _MADE_HERE)
    return Html(f"{opening}{_content(children)}</{tag}>", _MADE_HERE)


def join(*children: Child) -> Html:
    """Children side by side, no element around them."""
    return Html(_content(children), _MADE_HERE)


def document(head: Iterable[Child], body: Html, lang: str = "en") -> Html:
    """A whole page: the doctype, then <html> with its head and the given <body>."""
    return Html("<!doctype html>" + str(el("html", el("head", *head), body, lang=lang)),
                _MADE_HERE)
