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

import functools
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


def _made(text: str) -> Html:
    h = Html.__new__(Html)
    h._text = text
    return h


def _escape(text: str) -> str:
    return html.escape(text, quote=True)


def _content(children: Iterable[Child]) -> str:
    out = []
    for c in children:
        if c is None:
            continue
        if isinstance(c, Html):
            out.append(c._text)
        elif isinstance(c, str):
            out.append(_escape(c))
        elif isinstance(c, (list, tuple, GeneratorType)):
            out.append(_content(c))
        else:
            out.append(_escape(str(c)))
    return "".join(out)


@functools.cache
def _attribute_name(key: str) -> str:
    """A keyword's attribute name, checked once per name."""
    name = key.rstrip("_").replace("_", "-")
    if not _NAME.fullmatch(name) or name.startswith("on") or name == "style":
        raise ValueError(f"attribute {name!r}: event handlers and inline style are not sent "
                         "(the Content-Security-Policy blocks them)")
    return name


def _render_attribute(key: str, value: Any) -> str:
    name = _attribute_name(key)
    if value is True:
        return f" {name}"
    text = value if isinstance(value, str) else str(value)
    if name in _URL_ATTRS and not _SAME_ORIGIN_PATH.fullmatch(text):
        raise ValueError(f"{name}={text!r}: a page links only to a path of this server")
    return f' {name}="{_escape(text)}"'


# A scoreboard sets a thousand attributes, most of them the same few (class "red", data-v "B"),
# and numbers: a short text value is rendered once (a bounded cache), a number needs no escaping.
_TEXT_ATTRIBUTES: dict[tuple[str, str], str] = {}
_NUMBER_NAMES: dict[str, str] = {}  # keyword -> name, for the names that are no URL


def _attributes(attrs: dict[str, Any]) -> str:
    out = []
    for key, value in attrs.items():
        kind = type(value)
        if kind is str:
            text = _TEXT_ATTRIBUTES.get((key, value))
            if text is None:
                text = _render_attribute(key, value)
                if len(value) <= 64 and len(_TEXT_ATTRIBUTES) < 20000:
                    _TEXT_ATTRIBUTES[key, value] = text
        elif kind is int and key in _NUMBER_NAMES:
            text = f' {_NUMBER_NAMES[key]}="{value}"'
        elif value is None or value is False:
            continue
        else:
            text = _render_attribute(key, value)
            if kind is int and _attribute_name(key) not in _URL_ATTRS:
                _NUMBER_NAMES[key] = _attribute_name(key)
        out.append(text)
    return "".join(out)


_TAGS: set[str] = set()


def el(tag: str, *children: Child, **attrs: Any) -> Html:
    """<tag attrs>children</tag>; a keyword's `_` is a `-` (`data_v` is `data-v`), a trailing
    one is dropped (`class_`); an attribute given None or False is left out."""
    if tag not in _TAGS:
        if not _NAME.fullmatch(tag) or tag == "style":
            raise ValueError(f"no <{tag}> element: styles come from the stylesheet file")
        _TAGS.add(tag)
    if tag == "script" and (children or set(attrs) != {"src"}):
        raise ValueError("a <script> only loads a file: <script src=...>, nothing inline")
    opening = f"<{tag}{_attributes(attrs)}>" if attrs else f"<{tag}>"
    if tag in _VOID:
        if children:
            raise ValueError(f"<{tag}> holds nothing")
        return _made(opening)
    return _made(f"{opening}{_content(children) if children else ''}</{tag}>")


def join(*children: Child) -> Html:
    """Children side by side, no element around them."""
    return _made(_content(children))


def document(head: Iterable[Child], body: Html, lang: str = "en") -> Html:
    """A whole page: the doctype, then <html> with its head and the given <body>."""
    return _made("<!doctype html>" + str(el("html", el("head", *head), body, lang=lang)))
