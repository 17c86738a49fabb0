"""OpenAI Chat Completions, streamed (SSE), with tool calls. Serves OpenAI, OpenRouter, Ollama,
vLLM, llama.cpp's server and LM Studio by `model.baseUrl` alone."""

from __future__ import annotations

import threading
import uuid
from typing import Any, Callable

import orjson

from bob_acp.exceptions import ModelError
from bob_acp.providers import sse
from bob_acp.providers.base import Reply, ToolCall
from bob_acp.providers.http import stream_lines

DEFAULT_BASE_URL = "https://api.openai.com/v1"


def error_message(body: Any) -> str | None:
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict):
        return error.get("message") or error.get("type")
    if isinstance(error, str):
        return error
    if not isinstance(body, dict):
        return None
    detail = body.get("message") or body.get("detail")  # bare proxies, FastAPI-based servers
    return detail if isinstance(detail, str) else None


def to_wire(messages: list[dict]) -> list[dict]:
    out = []
    for message in messages:
        role = message["role"]
        if role == "assistant":
            wire: dict = {"role": "assistant", "content": message["content"]}
            if message.get("tool_calls"):
                wire["content"] = message["content"] or ""  # some local servers reject null
                wire["tool_calls"] = [
                    {"id": c["id"], "type": "function",
                     "function": {"name": c["name"], "arguments": orjson.dumps(c["arguments"]).decode()}}
                    for c in message["tool_calls"]]
            out.append(wire)
        elif role == "tool":
            out.append({"role": "tool", "tool_call_id": message["tool_call_id"], "content": message["content"]})
        else:
            out.append({"role": role, "content": message["content"]})
    return out


def new_call_id() -> str:
    """For servers that send a tool call without an id: unique across the whole history."""
    return f"call_{uuid.uuid4().hex[:24]}"


def parse_arguments(name: str, text: str) -> dict:
    if not text.strip():
        return {}
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError:
        raise ModelError(f"model returned invalid JSON in the arguments of tool call '{name}': {text[:120]!r}") from None
    if not isinstance(value, dict):
        raise ModelError(f"model returned arguments of tool call '{name}' that are not a JSON object")
    return value


class OpenAIProvider:
    name = "openai"

    def __init__(self, cfg: Any, api_key: str | None):
        self.cfg = cfg
        self._key = api_key
        self.url = (cfg.model.baseUrl or DEFAULT_BASE_URL).rstrip("/") + "/chat/completions"

    def generate(self, messages: list[dict], tools: list[dict], on_text: Callable[[str], None],
                 cancel: threading.Event) -> Reply:
        body: dict = {"model": self.cfg.model.name, "messages": to_wire(messages), "stream": True,
                      "stream_options": {"include_usage": True}}
        if tools:
            body["tools"] = [{"type": "function", "function": t} for t in tools]
        if self.cfg.model.maxTokens is not None:
            body["max_tokens"] = self.cfg.model.maxTokens
        if self.cfg.model.temperature is not None:
            body["temperature"] = self.cfg.model.temperature
        headers = {"Content-Type": "application/json", "Accept": "text/event-stream"}
        if self._key:
            headers["Authorization"] = f"Bearer {self._key}"
        with stream_lines(self.url, headers, body, self.cfg, cancel, error_message, self._key) as lines:
            return self._read(lines, on_text)

    def _read(self, lines: Any, on_text: Callable[[str], None]) -> Reply:
        text: list[str] = []
        calls: dict[int, dict] = {}
        input_tokens = None
        finished = False
        for event, chunk in sse.json_events(lines, end="[DONE]"):
            if event == "[DONE]":
                finished = True
                break
            if chunk.get("error"):
                raise ModelError(f"model API error: {error_message(chunk)}")
            usage = chunk.get("usage")
            if isinstance(usage, dict) and isinstance(usage.get("prompt_tokens"), int):
                input_tokens = usage["prompt_tokens"]
            for choice in chunk.get("choices") or []:
                delta = choice.get("delta") or {}
                if delta.get("content"):
                    text.append(delta["content"])
                    on_text(delta["content"])
                for part in delta.get("tool_calls") or []:
                    _merge_call(calls, part)
                if choice.get("finish_reason"):
                    finished = True
        if not finished:
            raise ModelError("model API stream ended early (truncated reply)")
        tool_calls = []
        for index in sorted(calls):
            call = calls[index]
            name = call["name"]
            if not name:
                raise ModelError("model returned a tool call without a name")
            tool_calls.append(ToolCall(call["id"] or new_call_id(), name, parse_arguments(name, "".join(call["args"]))))
        return Reply("".join(text), tool_calls, input_tokens)


def _merge_call(calls: dict[int, dict], part: dict) -> None:
    """Assemble tool-call deltas by index: id and name are taken once (some servers repeat them
    in every chunk), argument pieces are appended."""
    index = part.get("index", len(calls))
    call = calls.setdefault(index, {"id": "", "name": "", "args": []})
    if part.get("id") and not call["id"]:
        call["id"] = part["id"]
    function = part.get("function") or {}
    if function.get("name") and not call["name"]:
        call["name"] = function["name"]
    if function.get("arguments"):
        call["args"].append(function["arguments"])
