"""The one small interface every model provider implements.

A provider turns the provider-neutral history (see bob_acp.history) into one streamed model call:

    reply = provider.generate(messages, tools, on_text, cancel)

- `messages`: the whole history, system prompt first (bob_acp.history format).
- `tools`: [{"name", "description", "parameters": <JSON schema>}]; may be empty.
- `on_text(chunk)`: called with each piece of assistant text as it arrives (never buffered).
- `cancel`: a threading.Event; once set, the HTTP stream is closed at once (even when the server
  has gone silent mid-stream) and generate raises Cancelled.

It returns a Reply, raises Cancelled when cancelled, or ModelError (one line naming the cause,
never the API key) for anything else: HTTP errors after retries, a truncated stream, invalid JSON
in tool arguments, garbage.
"""

from __future__ import annotations

import threading
from typing import Callable, Protocol


class ToolCall:
    __slots__ = ("id", "name", "arguments")

    def __init__(self, id: str, name: str, arguments: dict):
        self.id = id
        self.name = name
        self.arguments = arguments

    def __repr__(self) -> str:
        return f"ToolCall({self.id!r}, {self.name!r}, {self.arguments!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ToolCall) and (self.id, self.name, self.arguments) == (other.id, other.name, other.arguments)


class Reply:
    __slots__ = ("text", "tool_calls", "input_tokens")

    def __init__(self, text: str = "", tool_calls: list[ToolCall] | None = None, input_tokens: int | None = None):
        self.text = text
        self.tool_calls = tool_calls or []
        self.input_tokens = input_tokens  # the prompt's size as the provider counted it, when it said


class Provider(Protocol):
    name: str

    def generate(
        self,
        messages: list[dict],
        tools: list[dict],
        on_text: Callable[[str], None],
        cancel: threading.Event,
    ) -> Reply: ...
