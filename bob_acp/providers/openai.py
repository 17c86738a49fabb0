"""OpenAI Chat Completions, streamed (SSE), with tool calls. Serves OpenAI, OpenRouter, Ollama,
vLLM, llama.cpp's server and LM Studio by `model.baseUrl` alone.

OpenAI-compatible servers cache prompts by prefix, so every request of a session is a byte-exact
extension of the one before it: nothing per call (no timestamps) and a stable order of fields.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterable

from bob_acp import jsontext
from bob_acp.cancel import Cancel
from bob_acp.context import history
from bob_acp.exceptions import ModelError
from bob_acp.providers import sse
from bob_acp.providers.base import Joiner, ModelReply, Stream, ToolCall, Usage, end_of_stream
from bob_acp.providers.http import SessionPool, Wire, stream_lines
from bob_acp.providers.shapes import dropped_reasoning, error_message, malformed, new_call_id, parse_arguments

if TYPE_CHECKING:
    from bob_acp.config import ModelSettings


DEFAULT_BASE_URL = "https://api.openai.com/v1"
REASONING_LEVELS = ("default", "low", "medium", "high")  # reasoning_effort ("default": not sent)



def to_wire(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for message in messages:
        role = message["role"]
        if role == "assistant":
            wire: dict[str, Any] = {"role": "assistant", "content": message["content"]}
            if message.get("tool_calls"):
                wire["content"] = message["content"] or ""  # some local servers reject null
                wire["tool_calls"] = [
                    {"id": c["id"], "type": "function",
                     "function": {"name": c["name"], "arguments": jsontext.dumps(c["arguments"]).decode()}}
                    for c in message["tool_calls"]]
            out.append(wire)
        elif role == "tool":
            out.append({"role": "tool", "tool_call_id": message["tool_call_id"], "content": message["content"]})
        elif role == "user" and history.images_of(message):
            parts: list[dict[str, Any]] = [{"type": "text", "text": history.text_of(message)}]
            parts += [{"type": "image_url", "image_url": {"url": f"data:{i['mimeType']};base64,{i['data']}"}}
                      for i in history.images_of(message)]
            out.append({"role": role, "content": parts})
        else:
            out.append({"role": role, "content": history.text_of(message)})
    return out





class OpenAIProvider:
    name = "openai"

    def __init__(self, settings: ModelSettings, api_key: str | None, secrets: tuple[str, ...] = (),
                 env: dict[str, str] | None = None):
        self.settings = settings  # the model's config: `model:` or an entry of `models:`
        self._secrets = tuple(s for s in (api_key, *secrets) if s)
        self._pool = SessionPool()
        self.wire = Wire(settings, DEFAULT_BASE_URL, "/chat/completions", api_key, "Authorization", "Bearer ",
                         {"Content-Type": "application/json", "Accept": "text/event-stream"}, env)
        self.url = self.wire.url

    def generate(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], stream: Stream, cancel: Cancel,
                 model: str | None = None, reasoning: str | None = None) -> ModelReply:
        settings = self.settings
        body: dict[str, Any] = {"model": model or settings.name, "messages": to_wire(messages), "stream": True,
                      "stream_options": {"include_usage": True}}
        if tools:
            body["tools"] = [{"type": "function", "function": t} for t in tools]
        if settings.maxTokens is not None:
            body["max_tokens"] = settings.maxTokens
        if settings.temperature is not None:
            body["temperature"] = settings.temperature
        reasoning = reasoning or settings.reasoning
        if reasoning in REASONING_LEVELS[1:]:
            body["reasoning_effort"] = reasoning
        with stream_lines(self._pool, self.url, self.wire.headers, self.wire.body(body), settings, cancel,
                          error_message, self._secrets, stream) as lines:
            return read_stream(lines, stream, settings.timeout)


def read_stream(lines: Iterable[str], stream: Stream, idle_timeout: float | None = None) -> ModelReply:
    """A Chat Completions event stream into a ModelReply; every shape is checked as it arrives."""
    text: list[str] = []
    calls: dict[int, dict[str, Any]] = {}
    usage = Usage()
    finished = truncated = False
    answer, reasoning = Joiner(), Joiner()
    for event, chunk in sse.json_events(lines, end="[DONE]", idle_timeout=idle_timeout):
        if event == "[DONE]":
            finished = True
            break
        if chunk.get("error"):
            raise ModelError(f"model API error: {jsontext.clean(error_message(chunk) or str(chunk['error'])[:200])}")
        _take_usage(chunk.get("usage"), usage)
        choices = chunk.get("choices") or []
        if not isinstance(choices, list):
            raise malformed("choices is not a list")
        for choice in choices:
            if not isinstance(choice, dict):
                raise malformed("a choice is not an object")
            delta = choice.get("delta") or {}
            if not isinstance(delta, dict):
                raise malformed("delta is not an object")
            for key in ("reasoning_content", "reasoning"):  # DeepSeek, vLLM, llama.cpp / OpenRouter
                piece = _reasoning_of(delta.get(key), key)
                if piece:
                    shown = reasoning.feed(piece)
                    if shown:
                        stream.thought(shown)
            piece = _text_of(delta.get("content"), "content")
            if piece:
                shown = answer.feed(piece)
                if shown:
                    text.append(shown)
                    stream.text(shown)
            parts = delta.get("tool_calls") or []
            if not isinstance(parts, list):
                raise malformed("tool_calls is not a list")
            for part in parts:
                _merge_call(calls, part)
            if choice.get("finish_reason"):
                finished = True
                truncated = truncated or choice.get("finish_reason") == "length"
    end_of_stream(stream, answer, reasoning, text, finished)
    tool_calls = []
    for index in sorted(calls):
        call = calls[index]
        name = call["name"]
        try:
            if not name:
                raise ModelError("model returned a tool call without a name")
            arguments = call["object"] if call["object"] is not None else parse_arguments(name, "".join(call["args"]))
            tool_calls.append(ToolCall(call["id"] or new_call_id(), name, arguments))
        except ModelError:
            if not truncated:
                raise
            # cut by the token limit in the middle of its arguments: not a call that can run
    return ModelReply("".join(text), tool_calls, usage=usage, truncated=truncated)


def _text_of(value: object, key: str) -> str:
    """A delta's text: a string, or a list of content parts (some servers send parts)."""
    if value is None or value == "":
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        pieces = []
        for part in value:
            if isinstance(part, str):
                pieces.append(part)
            elif isinstance(part, dict) and isinstance(part.get("text"), str):
                pieces.append(part["text"])
            elif not (isinstance(part, dict) and part.get("type") not in (None, "text")):
                raise malformed(f"delta.{key} holds a part that is not text")
        return "".join(pieces)
    raise malformed(f"delta.{key} is a {type(value).__name__}, not text")


def _reasoning_of(value: object, key: str) -> str:
    """A reasoning piece: display-only, so one of the wrong shape is dropped (and logged), never
    the turn failed for it."""
    try:
        return _text_of(value, key)
    except ModelError as exc:
        dropped_reasoning(str(exc))
        return ""


def _take_usage(value: object, usage: Usage) -> None:
    if not isinstance(value, dict):
        return
    if _count(value.get("prompt_tokens")) is not None:
        usage.input = value["prompt_tokens"]
    if _count(value.get("completion_tokens")) is not None:
        usage.output = value["completion_tokens"]
    details = value.get("prompt_tokens_details")
    if isinstance(details, dict) and _count(details.get("cached_tokens")) is not None:
        usage.cache_read = details["cached_tokens"]


def _count(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _merge_call(calls: dict[int, dict[str, Any]], part: object) -> None:
    """Assemble tool-call deltas by index: id and name are taken once (some servers repeat them
    in every chunk), argument pieces are appended; arguments sent whole as an object are taken."""
    if not isinstance(part, dict):
        raise malformed("a tool call delta is not an object")
    index = part.get("index", len(calls))
    if isinstance(index, str) and index.isdigit():
        index = int(index)
    if isinstance(index, bool) or not isinstance(index, int):
        raise malformed("a tool call index is not a number")
    call = calls.setdefault(index, {"id": "", "name": "", "args": [], "object": None})
    call_id = part.get("id")
    if call_id is not None and call_id != "" and not call["id"]:
        if isinstance(call_id, bool) or not isinstance(call_id, (str, int)):
            raise malformed("a tool call id is not a string")
        call["id"] = str(call_id)
    function = part.get("function") or {}
    if not isinstance(function, dict):
        raise malformed("a tool call's function is not an object")
    name = function.get("name")
    if name and not call["name"]:
        if not isinstance(name, str):
            raise malformed("a tool call name is not a string")
        call["name"] = name
    arguments = function.get("arguments")
    if isinstance(arguments, dict):
        call["object"] = arguments
    elif isinstance(arguments, str):
        if arguments:
            call["args"].append(arguments)
    elif arguments is not None:
        raise malformed("a tool call's arguments are neither text nor an object")
