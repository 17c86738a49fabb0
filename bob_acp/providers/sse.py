"""Server-sent events, parsed incrementally from lines."""

from __future__ import annotations

from typing import Iterable, Iterator


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
