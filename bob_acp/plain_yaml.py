"""The configuration file read without PyYAML when it is written the plain way.

Importing PyYAML costs about 25 ms (its regular expressions are compiled at import), a third of
Bob's start-up with a config file. Most config files are a few nested `key: value` lines, lists
of `- item`, comments, quoted strings, or JSON. `load` reads exactly those and returns what
PyYAML's safe_load returns for them; anything else (anchors, tags, block scalars, escapes, a
number PyYAML reads its own way, a tab, a character past ASCII, ...) raises NotPlain, and the
caller reads the file with PyYAML as before, errors and all. Being right matters more than
being fast here: when in doubt, NotPlain (a test compares both on thousands of documents).
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


class NotPlain(Exception):
    """The document is not in the plain subset: read it with PyYAML."""


# YAML 1.1 as PyYAML resolves plain scalars.
_BOOLS = {"yes": True, "Yes": True, "YES": True, "no": False, "No": False, "NO": False,
          "true": True, "True": True, "TRUE": True, "false": False, "False": False, "FALSE": False,
          "on": True, "On": True, "ON": True, "off": False, "Off": False, "OFF": False}
_NULLS = {"", "~", "null", "Null", "NULL"}
_DIGITS = frozenset("0123456789")
_PLAIN_FIRST = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_/$+-")
_PLAIN_REST = _PLAIN_FIRST | frozenset(" .:~=(){}[],;^")
_KEY = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.")


def load(text: str) -> Any:
    """What yaml.safe_load(text) returns, or NotPlain."""
    if not text.isascii() or "\t" in text or "\r" in text or "\\" in text or not text.replace("\n", "").isprintable():
        raise NotPlain("characters PyYAML reads its own way")
    stripped = text.strip()
    if stripped.startswith("{"):
        return _json(stripped)
    lines = []
    for raw in text.split("\n"):
        content = raw.rstrip(" ")
        body = content.lstrip(" ")
        if not body or body.startswith("#"):
            continue
        lines.append((len(content) - len(body), body))
    if not lines:
        return None
    if lines[0][1].startswith(("---", "...", "%")):
        raise NotPlain("a document marker or a directive")
    if lines[0][0] != 0:
        raise NotPlain("an indented first line")
    value, end = _block(lines, 0, 0)
    if end != len(lines):
        raise NotPlain("lines left over")
    if not isinstance(value, dict):
        raise NotPlain("not a mapping at the top")
    return value


def _block(lines: list[tuple[int, str]], i: int, indent: int) -> tuple[Any, int]:
    if _is_item(lines[i][1]):
        return _sequence(lines, i, indent)
    return _mapping(lines, i, indent)


def _is_item(body: str) -> bool:
    return body == "-" or body.startswith("- ")


def _mapping(lines: list[tuple[int, str]], i: int, indent: int) -> tuple[dict, int]:
    out: dict = {}
    while i < len(lines):
        column, body = lines[i]
        if column < indent:
            break
        if column > indent or _is_item(body):
            raise NotPlain("an unexpected indentation")
        key, rest = _split_key(body)
        i += 1
        if rest:
            out[key] = _scalar(rest)
            continue
        if i < len(lines) and (lines[i][0] > indent or (lines[i][0] == indent and _is_item(lines[i][1]))):
            out[key], i = _block(lines, i, lines[i][0])  # (a list may sit at its key's indentation)
        else:
            out[key] = None
    return out, i


def _sequence(lines: list[tuple[int, str]], i: int, indent: int) -> tuple[list, int]:
    out: list = []
    while i < len(lines):
        column, body = lines[i]
        if column < indent or (column == indent and not _is_item(body)):
            break
        if column > indent:
            raise NotPlain("an unexpected indentation")
        item = body[1:].lstrip(" ")
        if not item:  # "-" alone: the item is the block below
            i += 1
            if i < len(lines) and lines[i][0] > indent:
                value, i = _block(lines, i, lines[i][0])
                out.append(value)
            else:
                out.append(None)
            continue
        at = column + len(body) - len(item)
        if _is_item(item) or _key_colon(item) is not None:  # "- key: value" or "- - x": a block from here
            lines[i] = (at, item)
            value, i = _block(lines, i, at)
            out.append(value)
            continue
        out.append(_scalar(item))
        i += 1
    return out, i


def _key_colon(body: str) -> int | None:
    """Where the `: ` (or final `:`) of a `key: value` line is; None when it has none."""
    colon = body.find(": ")
    if colon < 0 and body.endswith(":"):
        colon = len(body) - 1
    return colon if colon > 0 else None


def _split_key(body: str) -> tuple[str, str]:
    colon = _key_colon(body)
    if colon is None:
        raise NotPlain("not a key: value line")
    key = body[:colon]
    if not set(key) <= _KEY or not isinstance(_resolve(key), str) or key.startswith("-"):
        raise NotPlain("a key PyYAML reads its own way")
    rest = body[colon + 1:].strip(" ")
    if rest.startswith("#"):
        rest = ""
    return key, rest


def _scalar(text: str) -> Any:
    first = text[0]
    if first in "\"'":
        close = _closing_quote(text)
        inner, tail = text[1:close], text[close + 1:]
        if tail and not tail.lstrip(" ").startswith("#") or (tail and not tail.startswith(" ")):
            raise NotPlain("text after a quoted string")
        return inner.replace("''", "'") if first == "'" else inner
    if first == "[":
        return _flow_list(text)
    if text == "{}" or text.startswith("{}"):
        if text == "{}" or text[2:].lstrip(" ").startswith("#") and text[2] == " ":
            return {}
        raise NotPlain("text after {}")
    comment = text.find(" #")
    if comment >= 0:
        text = text[:comment].rstrip(" ")
    if "#" in text or ": " in text or text.endswith(":") or first not in _PLAIN_FIRST or not set(text) <= _PLAIN_REST:
        raise NotPlain("a plain scalar PyYAML reads its own way")
    if first == "-" and text[1:2] in ("", " "):
        raise NotPlain("a list item where a value goes")
    return _resolve(text)


def _closing_quote(text: str) -> int:
    quote = text[0]
    at = 1
    while True:
        at = text.find(quote, at)
        if at < 0:
            raise NotPlain("a quoted string that goes on past its line")
        if quote == "'" and text[at + 1:at + 2] == "'":
            at += 2
            continue
        return at


def _resolve(text: str) -> Any:
    if text in _BOOLS:
        return _BOOLS[text]
    if text in _NULLS:
        return None
    sign = text[:1] in ("-", "+")
    digits = text[1:] if sign else text
    if digits and digits[0] in _DIGITS:
        whole, dot, fraction = digits.partition(".")
        if set(whole) <= _DIGITS and (whole == "0" or whole[0] != "0") and not dot:
            return int(text)
        if dot and whole and fraction and set(whole) <= _DIGITS and set(fraction) <= _DIGITS:
            return float(text)
        raise NotPlain("a number PyYAML reads its own way")
    if text[:1] == "." or (sign and digits[:1] == "."):
        raise NotPlain("a number PyYAML reads its own way")
    return text


def _flow_list(text: str) -> list:
    close = text.find("]")
    tail = text[close + 1:] if close >= 0 else ""
    if close < 0 or (tail and not (tail.startswith(" ") and tail.lstrip(" ").startswith("#"))):
        raise NotPlain("a flow list that is not simple")
    inner = text[1:close]
    if any(c in inner for c in "[]{}\"'#:"):
        raise NotPlain("a flow list that is not simple")
    if not inner.strip(" "):
        return []
    items = [item.strip(" ") for item in inner.split(",")]
    if any(not item for item in items):
        raise NotPlain("an empty item in a flow list")
    return [_scalar(item) for item in items]


def _json(text: str) -> Any:
    """A JSON document, as PyYAML reads it (flow style): numbers only as both read them alike."""
    import json

    def plain_float(number: str) -> float:
        whole, _, fraction = number.lstrip("-").partition(".")
        if not whole or not fraction or not set(whole + fraction) <= _DIGITS:
            raise NotPlain("a number PyYAML reads its own way")  # (1e5: a string to PyYAML)
        return float(number)

    def no_constant(_name: str) -> Any:
        raise NotPlain("NaN or Infinity")

    try:
        value = json.loads(text, parse_float=plain_float, parse_constant=no_constant)
    except ValueError:
        raise NotPlain("not JSON") from None
    if not isinstance(value, dict):
        raise NotPlain("not a mapping at the top")
    return value
