"""Context compression: older turns folded into one summary message by the model.

A turn is a user message and everything after it up to the next user message, so cutting only
at turn boundaries never separates a tool call from its result. Token counts are estimated as
characters / 4 when the provider has not reported them.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import orjson

from bob_acp.context import history
from bob_acp.exceptions import ModelError
from bob_acp.providers.base import Quiet

if TYPE_CHECKING:
    from typing import Callable

    from bob_acp.cancel import Cancel
    from bob_acp.providers.base import Provider, Usage


MAX_OUTPUT_IN_TRANSCRIPT = 2000

SUMMARISER = """\
You summarise the earlier part of a conversation between a user and Bob, a coding agent, so that
Bob can continue the work without it. Keep: the user's goals and requests, decisions taken, files
read or changed (with paths), commands run and what they showed, errors met, and what is still open.
Be concise and factual; write in the third person; no preamble."""


@dataclass
class Compression:
    changed: bool
    messages: list[dict[str, Any]]
    line: str
    summarised: int = 0
    kept: int = 0
    tokens: int = 0
    seconds: float = 0.0
    usage: Usage | None = None  # what the summary's model call reported (its cost counts too)
    failed: bool = False  # the summary's model call failed (the history is kept as it was)
    summary: str = ""  # the summary that replaced the older messages


def estimate_tokens(messages: list[dict[str, Any]]) -> int:
    """Characters / 4: what a provider that reports no usage is taken to count."""
    chars = 0
    for message in messages:
        chars += len(history.text_of(message))
        for call in message.get("tool_calls", ()):
            chars += len(call["name"]) + len(orjson.dumps(call["arguments"]))
    return chars // 4


def should_compress(tokens: int | None, window: int, threshold: float) -> bool:
    return tokens is not None and tokens > threshold * window


def turn_starts(messages: list[dict[str, Any]]) -> list[int]:
    return [i for i, m in enumerate(messages) if i > 0 and m["role"] == "user"]


def plan(messages: list[dict[str, Any]], keep: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]]] | None:
    """(older messages to summarise, messages kept verbatim), or None when nothing is older."""
    starts = turn_starts(messages)
    if len(starts) <= keep:
        return None
    cut = starts[-keep] if keep > 0 else len(messages)
    return messages[starts[0]:cut], messages[cut:]


def transcript(messages: list[dict[str, Any]]) -> str:
    lines = []
    for message in messages:
        role = message["role"]
        if role == "user":
            label = "Earlier summary" if message.get("summary") else "User"
            lines.append(f"{label}: {history.summary_text(message) if message.get('summary') else history.text_of(message)}")
            lines += [history.image_line(image) for image in history.images_of(message)]  # described, not summarised
        elif role == "assistant":
            if message["content"]:
                lines.append(f"Bob: {message['content']}")
            for call in message.get("tool_calls", ()):
                lines.append(f"Bob called {call['name']} {call['arguments']}")
        elif role == "tool":
            output = message["content"]
            if len(output) > MAX_OUTPUT_IN_TRANSCRIPT:
                output = output[:MAX_OUTPUT_IN_TRANSCRIPT] + f"\n[… {len(output) - MAX_OUTPUT_IN_TRANSCRIPT} characters cut]"
            lines.append(f"Result of {message['name']}:\n{output}")
    return "\n\n".join(lines)


def compress(messages: list[dict[str, Any]], provider: Provider, keep: int, cancel: Cancel, model: str | None = None,
             on_start: Callable[[], None] | None = None) -> Compression:
    """Fold the turns older than the last `keep` into one summary. Cancelled propagates.
    `on_start()`: called once there is something to summarise, before the model is asked."""
    found = plan(messages, keep)
    if found is None:
        count = len(messages) - 1
        return Compression(False, messages, f"🗜️ nothing to compact: {count} message(s), no turn older than the last {keep}")
    old, kept = found
    if on_start is not None:
        on_start()
    started = time.monotonic()
    request = [history.system(SUMMARISER),
               history.user("Summarise this conversation so far:\n\n" + transcript(old))]
    try:
        reply = provider.generate(request, [], Quiet(), cancel, model=model)
    except ModelError as exc:
        return Compression(False, messages, f"[compact: failed, history kept: {exc}]", failed=True)
    text = reply.text.strip()
    if not text:
        return Compression(False, messages, "[compact: failed, history kept: the model returned an empty summary]",
                       failed=True, usage=reply.usage)
    new = [messages[0], history.summary(text)] + kept
    seconds = time.monotonic() - started
    tokens = estimate_tokens(new)
    line = f"🗜️ compressed {len(old)} messages → 1 summary + {len(kept)} kept ({tokens:,} tokens, {seconds:.1f}s)"
    return Compression(True, new, line, len(old), len(kept), tokens, seconds, reply.usage, summary=text)
