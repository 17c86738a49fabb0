"""The one small interface every model provider implements.

A provider turns the provider-neutral history (see bob_acp.context.history) into one streamed model call:

    reply = provider.generate(messages, tools, stream, cancel, model=None)

- `messages`: the whole history, system prompt first (bob_acp.context.history format).
- `tools`: [{"name", "description", "parameters": <JSON schema>}]; may be empty.
- `stream`: told of each piece as it arrives (never buffered): `stream.text(chunk)` for the
  answer, `stream.thought(chunk)` for reasoning, `stream.retrying(attempt, delay, why)` before a
  retry. `Quiet()` ignores all of it (compression, --check).
- `cancel`: a bob_acp.cancel.Cancel; once set, the HTTP stream is closed at once (even when the
  server has gone silent mid-stream) and generate raises Cancelled.
- `model`: the model's name for this call (a session's choice), else the configured one.
- `reasoning`: the session's reasoning level (REASONING_LEVELS of the provider), None: as configured.

It returns a ModelReply, raises Cancelled when cancelled, or ModelError (one line naming the cause,
never the API key) for anything else: HTTP errors after retries, a truncated stream, invalid JSON
in tool arguments, a stream whose shapes are wrong, garbage.

Whatever a server sends, what leaves a provider keeps the history's own rules (a tool call has
string id and name and object arguments), so a session that is saved can always be loaded.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Protocol

from bob_acp.exceptions import ModelError
from bob_acp.jsontext import clean, clean_tree

if TYPE_CHECKING:
    from bob_acp.cancel import Cancel



class ToolCall:
    __slots__ = ("id", "name", "arguments")

    def __init__(self, id: object, name: object, arguments: object):
        if isinstance(id, bool) or not isinstance(id, (str, int)):
            raise ModelError(f"model returned a tool call whose id is not a string: {str(id)[:60]!r}")
        if not isinstance(name, str) or not name:
            raise ModelError(f"model returned a tool call without a name: {str(name)[:60]!r}")
        if not isinstance(arguments, dict):
            raise ModelError(f"model returned arguments of tool call '{clean(name)}' that are not a JSON object")
        self.id = clean(str(id))
        self.name = clean(name)
        self.arguments = clean_tree(arguments)  # what the history keeps must encode and load back

    def __repr__(self) -> str:
        return f"ToolCall({self.id!r}, {self.name!r}, {self.arguments!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ToolCall) and (self.id, self.name, self.arguments) == (other.id, other.name, other.arguments)


class Usage:
    """Token counts a provider reported for one call (None: not reported)."""

    __slots__ = ("input", "output", "cache_read", "cache_write")

    def __init__(self, input: int | None = None, output: int | None = None, cache_read: int = 0, cache_write: int = 0):
        self.input = input  # the whole prompt, cached parts included
        self.output = output
        self.cache_read = cache_read
        self.cache_write = cache_write


class ModelReply:
    __slots__ = ("text", "tool_calls", "input_tokens", "thinking", "usage", "truncated")

    def __init__(self, text: str = "", tool_calls: list[ToolCall] | None = None, input_tokens: int | None = None,
                 thinking: list[dict[str, Any]] | None = None, usage: Usage | None = None, truncated: bool = False):
        self.text = text
        self.tool_calls = tool_calls or []
        self.usage = usage or Usage(input_tokens)
        self.input_tokens = input_tokens if input_tokens is not None else self.usage.input
        self.thinking = thinking or []  # provider blocks to send back as they came (Anthropic's signed thinking)
        self.truncated = truncated  # the model stopped at its token limit (the reply is partial)


class Stream(Protocol):
    def text(self, chunk: str) -> None: ...
    def thought(self, chunk: str) -> None: ...
    def retrying(self, attempt: int, delay: float, why: str) -> None: ...


class Quiet:
    """A stream nobody watches."""

    def text(self, chunk: str) -> None:
        pass

    def thought(self, chunk: str) -> None:
        pass

    def retrying(self, attempt: int, delay: float, why: str) -> None:
        pass


class TextOnly(Quiet):
    """A stream that hands text to a callback (tests, simple callers)."""

    def __init__(self, on_text: Callable[[str], object]):
        self._on_text = on_text

    def text(self, chunk: str) -> None:
        self._on_text(chunk)


class Provider(Protocol):
    name: str

    def generate(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], stream: Stream, cancel: Cancel,
                 model: str | None = None, reasoning: str | None = None) -> ModelReply: ...


def end_of_stream(stream: Stream, answer: Joiner, thoughts: Joiner, text: list[str], finished: bool) -> None:
    """What the joiners still hold, streamed (the answer's also kept in `text`); a ModelError
    when the stream never said it was done."""
    thought = thoughts.end()
    if thought:
        stream.thought(thought)
    rest = answer.end()
    if rest:
        text.append(rest)
        stream.text(rest)
    if not finished:
        raise ModelError("model API stream ended early (truncated reply)")


class Joiner:
    """Text pieces to stream, with a surrogate pair split across two events joined again (a
    server that cuts its UTF-16 between events) and any lone surrogate shown as U+FFFD."""

    __slots__ = ("_held",)

    def __init__(self) -> None:
        self._held = ""

    def feed(self, piece: str) -> str:
        piece = self._held + piece
        self._held = ""
        if piece and "\ud800" <= piece[-1] <= "\udbff":
            piece, self._held = piece[:-1], piece[-1]
        return clean(piece)

    def end(self) -> str:
        held, self._held = self._held, ""
        return clean(held)
