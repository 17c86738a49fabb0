"""Anthropic Messages API, streamed, with tool use."""

from __future__ import annotations

import threading
from typing import Any, Callable

from bob_acp.exceptions import ModelError
from bob_acp.providers import sse
from bob_acp.providers.base import Reply, ToolCall
from bob_acp.providers.http import stream_lines
from bob_acp.providers.openai import error_message, new_call_id, parse_arguments

DEFAULT_BASE_URL = "https://api.anthropic.com"
DEFAULT_MAX_TOKENS = 8192
VERSION = "2023-06-01"


def to_wire(messages: list[dict]) -> tuple[str, list[dict]]:
    """(system text, messages with strictly alternating roles)."""
    system = "\n\n".join(m["content"] for m in messages if m["role"] == "system")
    out: list[dict] = []

    def add(role: str, blocks: list[dict]) -> None:
        if out and out[-1]["role"] == role:
            out[-1]["content"].extend(blocks)
        else:
            out.append({"role": role, "content": blocks})

    for message in messages:
        role = message["role"]
        if role == "user":
            add("user", [{"type": "text", "text": message["content"] or " "}])
        elif role == "assistant":
            blocks = [{"type": "text", "text": message["content"]}] if message["content"] else []
            blocks += [{"type": "tool_use", "id": c["id"], "name": c["name"], "input": c["arguments"]}
                       for c in message.get("tool_calls", ())]
            add("assistant", blocks or [{"type": "text", "text": " "}])
        elif role == "tool":
            add("user", [{"type": "tool_result", "tool_use_id": message["tool_call_id"], "content": message["content"]}])
    return system, out

class AnthropicProvider:
    name = "anthropic"

    def __init__(self, cfg: Any, api_key: str | None):
        self.cfg = cfg
        self._key = api_key
        self.url = (cfg.model.baseUrl or DEFAULT_BASE_URL).rstrip("/") + "/v1/messages"

    def generate(self, messages: list[dict], tools: list[dict], on_text: Callable[[str], None],
                 cancel: threading.Event) -> Reply:
        system, wire = to_wire(messages)
        body: dict = {"model": self.cfg.model.name, "max_tokens": self.cfg.model.maxTokens or DEFAULT_MAX_TOKENS,
                      "messages": wire, "stream": True}
        if system:
            body["system"] = system
        if tools:
            body["tools"] = [{"name": t["name"], "description": t["description"], "input_schema": t["parameters"]}
                             for t in tools]
        if self.cfg.model.temperature is not None:
            body["temperature"] = min(self.cfg.model.temperature, 1.0)
        headers = {"Content-Type": "application/json", "anthropic-version": VERSION, "Accept": "text/event-stream"}
        if self._key:
            headers["x-api-key"] = self._key
        with stream_lines(self.url, headers, body, self.cfg, cancel, error_message, self._key) as lines:
            return self._read(lines, on_text)

    def _read(self, lines: Any, on_text: Callable[[str], None]) -> Reply:
        text: list[str] = []
        blocks: dict[int, dict] = {}
        input_tokens = None
        stopped = False
        for event, payload in sse.json_events(lines):
            kind = payload.get("type", event)
            if kind == "error":
                raise ModelError(f"model API error: {error_message(payload) or str(payload)[:200]}")
            if kind == "message_start":
                usage = (payload.get("message") or {}).get("usage") or {}
                counted = [usage.get(k) for k in ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")]
                if isinstance(counted[0], int):
                    input_tokens = sum(v for v in counted if isinstance(v, int))
            elif kind == "content_block_start":
                block = payload.get("content_block") or {}
                blocks[payload.get("index", len(blocks))] = {"type": block.get("type"), "id": block.get("id", ""),
                                                             "name": block.get("name", ""), "json": [],
                                                             "input": block.get("input")}
            elif kind == "content_block_delta":
                delta = payload.get("delta") or {}
                if delta.get("type") == "text_delta" and delta.get("text"):
                    text.append(delta["text"])
                    on_text(delta["text"])
                elif delta.get("type") == "input_json_delta":
                    blocks.setdefault(payload.get("index", 0), {"type": "tool_use", "id": "", "name": "", "json": []})[
                        "json"].append(delta.get("partial_json", ""))
            elif kind == "message_stop":
                stopped = True
                break
        if not stopped:
            raise ModelError("model API stream ended early (truncated reply)")
        calls = [_tool_call(b) for _, b in sorted(blocks.items()) if b["type"] == "tool_use"]
        return Reply("".join(text), calls, input_tokens)


def _tool_call(block: dict) -> ToolCall:
    if not block["name"]:
        raise ModelError("model returned a tool call without a name")
    arguments = "".join(block["json"])
    # Some proxies put the whole input in content_block_start and stream no deltas.
    if not arguments.strip() and isinstance(block.get("input"), dict):
        return ToolCall(block["id"] or new_call_id(), block["name"], block["input"])
    return ToolCall(block["id"] or new_call_id(), block["name"], parse_arguments(block["name"], arguments))
