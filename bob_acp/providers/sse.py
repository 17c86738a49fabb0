"""Server-sent events, parsed incrementally from lines."""

from __future__ import annotations

import time
from typing import Callable, Iterable, Iterator

from bob_acp.exceptions import ModelError
from bob_acp.jsonrpc import codec


def events(lines: Iterable[str], idle_timeout: float | None = None,
           clock: Callable[[], float] = time.monotonic) -> Iterator[tuple[str, str]]:
    """(event name, data) for each event; multi-line data joined with newlines; comments skipped.

    `idle_timeout`: seconds without an event before the stream is given up, however many
    keep-alive comments (`: ping`) a proxy sends meanwhile.
    """
    name, data = "", []
    last_event = clock()
    for line in lines:
        if not line:
            if data:
                yield name or "message", "\n".join(data)
                last_event = clock()
            name, data = "", []
            continue
        if idle_timeout is not None and clock() - last_event > idle_timeout:
            raise ModelError(f"model API timeout: no event for {idle_timeout:g} s")
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


def json_events(lines: Iterable[str], end: str | None = None, idle_timeout: float | None = None) -> Iterator[tuple[str, dict]]:
    """(event name, payload object) for each event; `end` (e.g. OpenAI's "[DONE]") is passed
    through as (end, {}). Anything that is not a JSON object is a ModelError naming it. Lone
    surrogates are kept in the strings, for the provider to join pairs split across events."""
    for name, data in events(lines, idle_timeout):
        if end is not None and data.strip() == end:
            yield end, {}
            continue
        try:
            payload = codec.loads(data, keep_surrogates=True)
        except (codec.JSONDecodeError, RecursionError):
            raise ModelError(f"model API sent invalid JSON in its stream: {codec.clean(data[:120])!r}") from None
        if not isinstance(payload, dict):
            raise ModelError(f"model API sent an unexpected stream event: {codec.clean(data[:120])!r}")
        yield name, payload
