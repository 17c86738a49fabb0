"""JSON in and out, safe for text that is not quite Unicode.

`"\\ud83d"` (a lone surrogate escape) is valid JSON grammar, but orjson refuses it and a Python
`str` holding one (or a file name decoded with surrogateescape) cannot be encoded as UTF-8.
Here such code points become U+FFFD, so a frame with one is still answered under its own id and
every text Bob writes is valid UTF-8. Domain-free: the wire, the session files and the model
streams all decode through it.
"""

from __future__ import annotations

import json
from typing import Any

import orjson

BOM = b"\xef\xbb\xbf"
JSONDecodeError = orjson.JSONDecodeError


def loads(data: bytes | str, keep_surrogates: bool = False) -> Any:
    """orjson.loads, except that a leading UTF-8 BOM is skipped (RFC 8259 lets a parser ignore
    it) and lone surrogate escapes decode to U+FFFD (or, with keep_surrogates, stay in the
    strings, for a caller that joins pairs split across documents). Raises JSONDecodeError."""
    if isinstance(data, (bytes, bytearray, memoryview)):
        if data[:3] == BOM:
            data = data[3:]
    elif data[:1] == "\ufeff":
        data = data[1:]
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        if "surrogate" not in str(exc):
            raise
        original = exc
    try:
        text = data if isinstance(data, str) else bytes(data).decode("utf-8")
        value = json.loads(text, parse_constant=_no_constant)
    except (ValueError, RecursionError):
        raise original from None
    return value if keep_surrogates else clean_tree(value)


def dumps(value: Any, option: int | None = None) -> bytes:
    """orjson.dumps; strings that are not valid Unicode are cleaned first instead of failing."""
    try:
        return orjson.dumps(value, option=option)
    except TypeError:
        pass
    return orjson.dumps(clean_tree(value), option=option)  # a TypeError now is a real bug: raised


def clean(text: str) -> str:
    """`text` with every lone surrogate (and surrogateescape'd byte) replaced by U+FFFD."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


def clean_tree(value: Any) -> Any:
    if isinstance(value, str):
        return clean(value)
    if isinstance(value, dict):
        return {clean(k) if isinstance(k, str) else k: clean_tree(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [clean_tree(v) for v in value]
    return value


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")
