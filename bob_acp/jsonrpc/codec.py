"""JSON in and out, safe for text that is not quite Unicode.

`"\\ud83d"` (a lone surrogate escape) is valid JSON grammar, but orjson refuses it and a Python
`str` holding one (or a file name decoded with surrogateescape) cannot be encoded as UTF-8.
Here such code points become U+FFFD, so a frame with one is still answered under its own id and
every text Bob writes is valid UTF-8. Domain-free: the wire, the session files and the model
streams all decode through it.
"""

from __future__ import annotations

import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

BOM = b"\xef\xbb\xbf"
JSONDecodeError = ValueError  # orjson's and json's decode errors are both ValueErrors
OPT_INDENT_2 = 1  # orjson.OPT_INDENT_2 (checked when orjson loads)


class _Stdlib:
    """The standard library's json with orjson's behaviour (compact, UTF-8, no NaN, no
    Infinity): what the first frames of a connection go through while orjson loads. Importing
    orjson (and the modules it imports: dataclasses, inspect, uuid, zoneinfo) takes longer than
    everything else Bob does before answering `initialize`."""

    JSONDecodeError = ValueError

    def __init__(self) -> None:
        import json

        self._json = json
        self._encoder = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)
        self._indented = json.JSONEncoder(ensure_ascii=False, indent=2, allow_nan=False)

    def loads(self, data: str | bytes | bytearray | memoryview) -> Any:
        if isinstance(data, (bytes, bytearray, memoryview)):
            data = bytes(data).decode("utf-8")  # invalid UTF-8: a ValueError, as orjson's
        if "\\ud" in data or "\\uD" in data:  # maybe a lone surrogate escape: orjson's message
            value = self._json.loads(data, parse_constant=_no_constant)
            if _has_lone_surrogate(value):
                raise ValueError("lone surrogate in string")
            return value
        return self._json.loads(data, parse_constant=_no_constant)

    def dumps(self, value: object, option: int | None = None) -> bytes:
        try:
            text = (self._indented if option else self._encoder).encode(value)
            return text.encode("utf-8")
        except UnicodeEncodeError:
            raise TypeError("str is not valid UTF-8: surrogates not allowed") from None
        except ValueError as exc:  # NaN or Infinity: orjson writes null; keep the frame valid JSON
            raise TypeError(str(exc)) from None


_backend: Any = None


def use_orjson() -> None:
    """Switch to orjson (from a background thread, once the first answer is out)."""
    global _backend
    import orjson

    assert orjson.OPT_INDENT_2 == OPT_INDENT_2
    _backend = orjson


def _impl() -> Any:
    global _backend
    if _backend is None:
        _backend = sys.modules.get("orjson") or _Stdlib()
    return _backend


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
        return _impl().loads(data)
    except ValueError as exc:
        if "surrogate" not in str(exc):
            raise
        original = exc
    import json

    try:
        text = data if isinstance(data, str) else bytes(data).decode("utf-8")
        value = json.loads(text, parse_constant=_no_constant)
    except (ValueError, RecursionError):
        raise original from None
    return value if keep_surrogates else clean_tree(value)


def dumps(value: object, option: int | None = None) -> bytes:
    """orjson.dumps; strings that are not valid Unicode are cleaned first instead of failing."""
    backend = _impl()
    try:
        return backend.dumps(value, option=option)
    except TypeError:
        pass
    return backend.dumps(clean_tree(value), option=option)  # a TypeError now is a real bug: raised


def clean(text: str) -> str:
    """`text` with every lone surrogate (and surrogateescape'd byte) replaced by U+FFFD."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


def clean_tree(value: object) -> Any:
    """`value` with every string cleaned (see clean) and every integer JSON encoders refuse
    (beyond 64 bits, as a parser without that limit reads one) made a float, as orjson reads it."""
    if isinstance(value, str):
        return clean(value)
    if isinstance(value, int) and not isinstance(value, bool) and not -(2 ** 63) <= value < 2 ** 64:
        try:
            return float(value)
        except OverflowError:
            return str(value)
    if isinstance(value, dict):
        return {clean(k) if isinstance(k, str) else k: clean_tree(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [clean_tree(v) for v in value]
    return value


def _has_lone_surrogate(value: object) -> bool:
    if isinstance(value, str):
        return clean(value) is not value
    if isinstance(value, dict):
        return any(_has_lone_surrogate(k) or _has_lone_surrogate(v) for k, v in value.items())
    if isinstance(value, list):
        return any(_has_lone_surrogate(v) for v in value)
    return False


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")
