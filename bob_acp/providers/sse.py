"""Server-sent events, parsed incrementally from lines."""

from __future__ import annotations

from typing import Any, Iterable, Iterator

from bob_acp import jsontext
from bob_acp.exceptions import ModelError
from bob_acp.providers import httpio


def events(lines: Iterable[str], idle_timeout: float | None = None) -> Iterator[tuple[str, str]]:
    """A model stream's events (bob_acp.providers.httpio.events); silent past idle_timeout: a ModelError."""
    return httpio.events(lines, idle_timeout, _idle)


def _idle(seconds: float) -> ModelError:
    return ModelError(f"model API timeout: no event for {seconds:g} s")


def json_events(lines: Iterable[str], end: str | None = None, idle_timeout: float | None = None) -> Iterator[tuple[str, dict[str, Any]]]:
    """(event name, payload object) for each event; `end` (e.g. OpenAI's "[DONE]") is passed
    through as (end, {}). Anything that is not a JSON object is a ModelError naming it. Lone
    surrogates are kept in the strings, for the provider to join pairs split across events."""
    for name, data in events(lines, idle_timeout):
        if end is not None and data.strip() == end:
            yield end, {}
            continue
        try:
            payload = jsontext.loads(data, keep_surrogates=True)
        except (jsontext.JSONDecodeError, RecursionError):
            payload = _lenient(data)
            if payload is None:
                raise ModelError(f"model API sent invalid JSON in its stream: {jsontext.clean(data[:120])!r}") from None
        if not isinstance(payload, dict):
            raise ModelError(f"model API sent an unexpected stream event: {jsontext.clean(data[:120])!r}")
        yield name, payload


def _lenient(data: str) -> object:
    """An event with a number no double can hold (`1e400`, as a server's usage may say): parsed
    with the number as infinity, which no count accepts (so it is ignored, not the turn failed).
    None when it is not JSON at all."""
    import json

    try:
        return json.loads(data)
    except (ValueError, RecursionError):
        return None
