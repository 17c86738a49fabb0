"""Server-sent events, parsed incrementally from lines."""

from __future__ import annotations

from typing import Iterable, Iterator

import orjson

from bob_acp.exceptions import ModelError


def events(lines: Iterable[str]) -> Iterator[tuple[str, str]]:
    """(event name, data) for each event; multi-line data joined with newlines; comments skipped."""
    name, data = "", []
    for line in lines:
        line = line.rstrip("\r")
        if not line:
            if data:
                yield name or "message", "\n".join(data)
            name, data = "", []
            continue
        if line.startswith(":"):
            continue
        field, _, value = line.partition(":")
        if value.startswith(" "):
            value = value[1:]
        if field == "data":
            data.append(value)
        elif field == "event":
            name = value
    if data:
        yield name or "message", "\n".join(data)


def json_events(lines: Iterable[str], end: str | None = None) -> Iterator[tuple[str, dict]]:
    """(event name, payload object) for each event; `end` (e.g. OpenAI's "[DONE]") is passed
    through as (end, {}). Anything that is not a JSON object is a ModelError naming it."""
    for name, data in events(lines):
        if end is not None and data.strip() == end:
            yield end, {}
            continue
        try:
            payload = orjson.loads(data)
        except orjson.JSONDecodeError:
            raise ModelError(f"model API sent invalid JSON in its stream: {data[:120]!r}") from None
        if not isinstance(payload, dict):
            raise ModelError(f"model API sent an unexpected stream event: {data[:120]!r}")
        yield name, payload
