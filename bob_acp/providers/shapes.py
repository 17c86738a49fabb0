"""What the HTTP providers share about what model servers send: error bodies, tool-call ids
and arguments, the error for a stream of the wrong shape."""

from __future__ import annotations

import uuid
from typing import Any

from bob_acp import jsontext
from bob_acp.exceptions import ModelError


def error_message(body: object) -> str | None:
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict):
        detail = error.get("message") or error.get("type")
        return detail if isinstance(detail, str) else None
    if isinstance(error, str):
        return error
    if not isinstance(body, dict):
        return None
    detail = body.get("message") or body.get("detail")  # bare proxies, FastAPI-based servers
    return detail if isinstance(detail, str) else None


def new_call_id() -> str:
    """For servers that send a tool call without an id: unique across the whole history."""
    return f"call_{uuid.uuid4().hex[:24]}"


def parse_arguments(name: str, text: str) -> dict[str, Any]:
    if not text.strip():
        return {}
    try:
        value = jsontext.loads(jsontext.clean(text))
    except (jsontext.JSONDecodeError, RecursionError):
        raise ModelError(f"model returned invalid JSON in the arguments of tool call '{name}': "
                         f"{jsontext.clean(text[:120])!r}") from None
    if not isinstance(value, dict):
        raise ModelError(f"model returned arguments of tool call '{name}' that are not a JSON object")
    return value


def dropped_reasoning(what: str) -> None:
    """Reasoning is display-only: a piece of the wrong shape is dropped with a log line, never the
    turn failed for it."""
    from bob_acp import log

    log.get("bob.providers").warning(f"[acp] a reasoning piece was dropped: {what}")


MAX_KEPT_REASONING = 1024 * 1024  # characters of one reasoning item kept and sent back (a real one: kilobytes)


def too_large(size: int) -> bool:
    """Whether a reasoning item to keep is beyond reason: dropped, said in the log (it would be
    saved, and sent again with every later request)."""
    if size <= MAX_KEPT_REASONING:
        return False
    dropped_reasoning(f"an item of {size} characters, over {MAX_KEPT_REASONING}, is not kept")
    return True


def malformed(what: str) -> ModelError:
    return ModelError(f"model API sent a malformed stream event: {what}")
