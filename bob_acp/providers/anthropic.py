"""Anthropic Messages API, streamed, with tool use, prompt caching and extended thinking.

Caching: `cache_control` breakpoints (ephemeral) on the last tool, the system prompt and the
latest message, so each model call of a turn reads the previous call's prefix from the cache.
Thinking (`model.thinking`: a token budget): thinking blocks stream as thoughts and are sent
back, signature and all, with the assistant turn they came with, as the API requires while
tool use goes on.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, Iterable

from bob_acp import jsontext
from bob_acp.cancel import Cancel
from bob_acp.context import history
from bob_acp.exceptions import ModelError
from bob_acp.providers import sse
from bob_acp.providers.base import Joiner, ModelReply, Stream, ToolCall, Usage
from bob_acp.providers.http import SessionPool, Wire, stream_lines
from bob_acp.providers.shapes import (
    dropped_reasoning,
    error_message,
    malformed,
    new_call_id,
    parse_arguments,
    too_large,
)

if TYPE_CHECKING:
    from bob_acp.config import ModelSettings


DEFAULT_BASE_URL = "https://api.anthropic.com"
DEFAULT_MAX_TOKENS = 8192
VERSION = "2023-06-01"
CACHE = {"type": "ephemeral"}
EMPTY_MESSAGE = "(an empty message)"
REASONING_LEVELS = ("default", "off", "low", "medium", "high")  # extended thinking: model.thinking, none, budgets
THINKING_BUDGETS = {"off": None, "low": 4096, "medium": 16384, "high": 32768}


_NOT_IN_ID = re.compile(r"[^a-zA-Z0-9_-]")


def tool_id(call_id: str) -> str:
    """A tool call's id as this API takes it (letters, digits, _ and -): a call another API made
    (a session that switched models) keeps a stable id, the same in its call and its result."""
    return _NOT_IN_ID.sub("_", call_id) or "call"


def to_wire(messages: list[dict[str, Any]], cache: bool = True) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(system blocks, messages with strictly alternating roles); with `cache`, a breakpoint on
    the system prompt and on the latest message's last block."""
    system = [{"type": "text", "text": m["content"]} for m in messages if m["role"] == "system" and m["content"]]
    out: list[dict[str, Any]] = []

    def add(role: str, blocks: list[dict[str, Any]]) -> None:
        if out and out[-1]["role"] == role:
            out[-1]["content"].extend(blocks)
        else:
            out.append({"role": role, "content": blocks})

    for message in messages:
        role = message["role"]
        if role == "user":
            pictures = [{"type": "image", "source": {"type": "base64", "media_type": i["mimeType"], "data": i["data"]}}
                        for i in history.images_of(message)]
            text = history.text_of(message)
            # (the API refuses an empty or blank text block: a message of images alone has none,
            # an empty one says so in words)
            words = [{"type": "text", "text": text}] if text.strip() else [] if pictures else [
                {"type": "text", "text": EMPTY_MESSAGE}]
            add("user", pictures + words)
        elif role == "assistant":
            blocks = [dict(b) for b in message.get("thinking", ()) if returnable(b)]
            blocks += [{"type": "text", "text": message["content"]}] if message["content"].strip() else []
            blocks += [{"type": "tool_use", "id": tool_id(c["id"]), "name": c["name"], "input": c["arguments"]}
                       for c in message.get("tool_calls", ())]
            if blocks:  # (a turn with nothing in it, cut at max_tokens before a word: left out)
                add("assistant", blocks)
        elif role == "tool":
            add("user", [{"type": "tool_result", "tool_use_id": tool_id(message["tool_call_id"]),
                          "content": message["content"]}])
    if cache:
        if system:
            system[-1]["cache_control"] = CACHE
        if out:
            out[-1]["content"][-1] = {**out[-1]["content"][-1], "cache_control": CACHE}
    return system, out


class AnthropicProvider:
    name = "anthropic"

    def __init__(self, settings: ModelSettings, api_key: str | None, secrets: tuple[str, ...] = (),
                 env: dict[str, str] | None = None):
        self.settings = settings  # the model's config: `model:` or an entry of `models:`
        self._secrets = tuple(s for s in (api_key, *secrets) if s)
        self._pool = SessionPool()
        self.wire = Wire(settings, DEFAULT_BASE_URL, "/v1/messages", api_key, "x-api-key", "",
                         {"Content-Type": "application/json", "anthropic-version": VERSION,
                          "Accept": "text/event-stream"}, env, models_path="/v1/models")
        self.url = self.wire.url

    def generate(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], stream: Stream, cancel: Cancel,
                 model: str | None = None, reasoning: str | None = None) -> ModelReply:
        system, wire = to_wire(messages)
        settings = self.settings
        thinking = THINKING_BUDGETS.get(reasoning or settings.reasoning or "default", settings.thinking)
        max_tokens = settings.maxTokens or DEFAULT_MAX_TOKENS
        if thinking:
            max_tokens = max(max_tokens, thinking + 1024)  # the budget is part of max_tokens
        body: dict[str, Any] = {"model": model or settings.name, "max_tokens": max_tokens, "messages": wire,
                      "stream": True}
        if system:
            body["system"] = system
        if tools:
            body["tools"] = [{"name": t["name"], "description": t["description"], "input_schema": t["parameters"]}
                             for t in tools]
            body["tools"][-1]["cache_control"] = CACHE
        if thinking:
            body["thinking"] = {"type": "enabled", "budget_tokens": thinking}
        elif settings.temperature is not None:  # the API refuses a temperature with thinking
            body["temperature"] = min(settings.temperature, 1.0)
        with stream_lines(self._pool, self.url, self.wire.headers, self.wire.body(body), settings, cancel,
                          error_message, self._secrets, stream) as lines:
            return read_stream(lines, stream, settings.timeout)


def read_stream(lines: Iterable[str], stream: Stream, idle_timeout: float | None = None) -> ModelReply:
    """A Messages event stream into a ModelReply; every shape is checked as it arrives."""
    text: list[str] = []
    blocks: dict[int, dict[str, Any]] = {}
    usage = Usage()
    stopped = truncated = False
    answer, reasoning = Joiner(), Joiner()
    for event, payload in sse.json_events(lines, idle_timeout=idle_timeout):
        kind = payload.get("type", event)
        if kind == "error":
            raise ModelError(f"model API error: {jsontext.clean(error_message(payload) or str(payload)[:200])}")
        if kind == "message_start":
            message = payload.get("message")
            _take_usage(message.get("usage") if isinstance(message, dict) else None, usage)
        elif kind == "message_delta":
            _take_usage(payload.get("usage"), usage)
            delta = payload.get("delta")
            if isinstance(delta, dict) and delta.get("stop_reason") == "max_tokens":
                truncated = True
        elif kind == "content_block_start":
            block = payload.get("content_block")
            if not isinstance(block, dict):
                raise malformed("content_block is not an object")
            blocks[_index(payload, len(blocks))] = _new_block(block)
        elif kind == "content_block_delta":
            _delta(payload, blocks, text, answer, reasoning, stream)
        elif kind == "message_stop":
            stopped = True
            break
    for joiner, emit in ((reasoning, stream.thought), (answer, stream.text)):
        rest = joiner.end()
        if rest:
            emit(rest)
            if joiner is answer:
                text.append(rest)
    if not stopped:
        raise ModelError("model API stream ended early (truncated reply)")
    ordered = [b for _, b in sorted(blocks.items())]
    calls = []
    for block in ordered:
        if block["type"] == "tool_use":
            try:
                calls.append(_tool_call(block))
            except ModelError:
                if not truncated:
                    raise
                # cut by max_tokens in the middle of its input: not a call that can run
    thinking = [_thinking_block(b) for b in ordered if b["type"] in ("thinking", "redacted_thinking")]
    thinking = [b for b in thinking if returnable(b) and not too_large(sum(len(v) for v in b.values()))]
    return ModelReply("".join(text), calls, thinking=thinking, usage=usage,
                 truncated=truncated)


def returnable(block: dict[str, Any]) -> bool:
    """Whether a thinking block may be sent back: the API wants signed thinking (and redacted
    thinking with its data) exactly as it came, and refuses an unsigned one (a proxy that drops
    signatures); those were shown as thoughts and stay out of every later request."""
    if block.get("type") == "thinking":
        return isinstance(block.get("signature"), str) and bool(block["signature"])
    if block.get("type") == "redacted_thinking":
        return isinstance(block.get("data"), str) and bool(block["data"])
    return False


def _index(payload: dict[str, Any], default: int) -> int:
    index = payload.get("index", default)
    if isinstance(index, bool) or not isinstance(index, int):
        raise malformed("a content block index is not a number")
    return index


def _new_block(block: dict[str, Any]) -> dict[str, Any]:
    kind = block.get("type")
    name, block_id = block.get("name", ""), block.get("id", "")
    return {"type": kind, "id": block_id, "name": name, "json": [], "input": block.get("input"),
            "thinking": [block["thinking"]] if isinstance(block.get("thinking"), str) else [],
            "signature": block.get("signature") if isinstance(block.get("signature"), str) else "",
            "data": block.get("data")}


def _delta(payload: dict[str, Any], blocks: dict[int, dict[str, Any]], text: list[str], answer: Joiner, reasoning: Joiner,
           stream: Stream) -> None:
    delta = payload.get("delta")
    if not isinstance(delta, dict):
        raise malformed("delta is not an object")
    kind = delta.get("type")
    index = _index(payload, 0)
    if kind == "text_delta":
        piece = delta.get("text")
        if not isinstance(piece, str):
            raise malformed("text_delta.text is not text")
        shown = answer.feed(piece)
        if shown:
            text.append(shown)
            stream.text(shown)
    elif kind == "input_json_delta":
        piece = delta.get("partial_json", "")
        if not isinstance(piece, str):
            raise malformed("input_json_delta.partial_json is not text")
        blocks.setdefault(index, _new_block({"type": "tool_use"}))["json"].append(piece)
    elif kind == "thinking_delta":
        piece = delta.get("thinking")
        if not isinstance(piece, str):  # display-only: dropped, never the turn failed for it
            dropped_reasoning("thinking_delta.thinking is not text")
            return
        blocks.setdefault(index, _new_block({"type": "thinking"}))["thinking"].append(piece)
        shown = reasoning.feed(piece)
        if shown:
            stream.thought(shown)
    elif kind == "signature_delta":
        piece = delta.get("signature")
        if not isinstance(piece, str):  # the block stays unsigned: shown, never sent back
            dropped_reasoning("signature_delta.signature is not text")
            return
        blocks.setdefault(index, _new_block({"type": "thinking"}))["signature"] += piece


def _take_usage(value: object, usage: Usage) -> None:
    if not isinstance(value, dict):
        return
    counts = {k: v for k, v in value.items() if isinstance(v, int) and not isinstance(v, bool) and v >= 0}
    if "input_tokens" in counts:
        usage.cache_read = counts.get("cache_read_input_tokens", usage.cache_read)
        usage.cache_write = counts.get("cache_creation_input_tokens", usage.cache_write)
        usage.input = counts["input_tokens"] + usage.cache_read + usage.cache_write
    if "output_tokens" in counts:
        usage.output = counts["output_tokens"]


def _tool_call(block: dict[str, Any]) -> ToolCall:
    name = block["name"]
    if not isinstance(name, str) or not name:
        raise ModelError("model returned a tool call without a name")
    arguments = "".join(block["json"])
    # Some proxies put the whole input in content_block_start and stream no deltas.
    if not arguments.strip() and isinstance(block.get("input"), dict):
        return ToolCall(block["id"] or new_call_id(), name, block["input"])
    return ToolCall(block["id"] or new_call_id(), name, parse_arguments(jsontext.clean(name), arguments))


def _thinking_block(block: dict[str, Any]) -> dict[str, Any]:
    if block["type"] == "redacted_thinking":
        return {"type": "redacted_thinking", "data": block["data"] if isinstance(block["data"], str) else ""}
    return {"type": "thinking", "thinking": jsontext.clean("".join(block["thinking"])), "signature": block["signature"]}
