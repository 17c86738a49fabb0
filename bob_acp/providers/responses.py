"""OpenAI Responses API (`provider: openai-responses`), streamed (SSE), with function calls and
reasoning. OpenAI's newest models are served here, and gateways (LiteLLM, OpenRouter, Azure) speak it.

Bob keeps the conversation itself, so every request is stateless (`store: false`, the whole
history as `input` items) and asks for `reasoning.encrypted_content`: a reasoning model's
reasoning items come back encrypted and are sent back as they came, before the calls they led
to, so the model keeps its chain of thought across tool calls. Reasoning summaries stream as
thoughts. The stream's end is `response.completed` (or `response.incomplete`, cut at the token
limit); `response.failed` and `error` events are one-line errors.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterable

from bob_acp import jsontext
from bob_acp.cancel import Cancel
from bob_acp.context import history
from bob_acp.exceptions import ModelError
from bob_acp.jsontext import mapping
from bob_acp.providers import sse
from bob_acp.providers.base import Joiner, ModelReply, Stream, ToolCall, Usage, end_of_stream
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


DEFAULT_BASE_URL = "https://api.openai.com/v1"
REASONING_LEVELS = ("default", "low", "medium", "high")  # reasoning.effort ("default": not sent)
REASONING = "reasoning"  # the type of the items kept in the history's `thinking` and sent back


def to_input(messages: list[dict[str, Any]]) -> tuple[str, list[dict[str, Any]]]:
    """(instructions, input items) for a history."""
    instructions = "\n\n".join(m["content"] for m in messages if m["role"] == "system" and m["content"])
    items: list[dict[str, Any]] = []
    for message in messages:
        role = message["role"]
        if role == "user":
            images = history.images_of(message)
            if images:
                parts: list[dict[str, Any]] = [{"type": "input_text", "text": history.text_of(message)}]
                parts += [{"type": "input_image", "image_url": f"data:{i['mimeType']};base64,{i['data']}"}
                          for i in images]
                items.append({"role": "user", "content": parts})
            else:
                items.append({"role": "user", "content": history.text_of(message)})
        elif role == "assistant":
            items += [dict(item) for item in message.get("thinking", ()) if returnable(item)]
            if message["content"]:
                items.append({"role": "assistant", "content": message["content"]})
            items += [{"type": "function_call", "call_id": c["id"], "name": c["name"],
                       "arguments": jsontext.dumps(c["arguments"]).decode()} for c in message.get("tool_calls", ())]
        elif role == "tool":
            items.append({"type": "function_call_output", "call_id": message["tool_call_id"],
                          "output": message["content"]})
    return instructions, items


def returnable(item: object) -> bool:
    """A reasoning item this API can take back: its encrypted content (never another API's thinking)."""
    return (isinstance(item, dict) and item.get("type") == REASONING
            and isinstance(item.get("encrypted_content"), str) and bool(item["encrypted_content"]))


class ResponsesProvider:
    name = "openai-responses"

    def __init__(self, settings: ModelSettings, api_key: str | None, secrets: tuple[str, ...] = (),
                 env: dict[str, str] | None = None):
        self.settings = settings
        self._secrets = tuple(s for s in (api_key, *secrets) if s)
        self._pool = SessionPool()
        self.wire = Wire(settings, DEFAULT_BASE_URL, "/responses", api_key, "Authorization", "Bearer ",
                         {"Content-Type": "application/json", "Accept": "text/event-stream"}, env)
        self.url = self.wire.url

    def generate(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], stream: Stream, cancel: Cancel,
                 model: str | None = None, reasoning: str | None = None) -> ModelReply:
        settings = self.settings
        instructions, items = to_input(messages)
        body: dict[str, Any] = {"model": model or settings.name}
        if instructions:
            body["instructions"] = instructions
        body.update({"input": items, "stream": True, "store": False, "include": ["reasoning.encrypted_content"]})
        if tools:
            body["tools"] = [{"type": "function", "name": t["name"], "description": t["description"],
                              "parameters": t["parameters"]} for t in tools]
        if settings.maxTokens is not None:
            body["max_output_tokens"] = settings.maxTokens
        if settings.temperature is not None:
            body["temperature"] = settings.temperature
        effort = reasoning or settings.reasoning
        if effort in REASONING_LEVELS[1:]:
            body["reasoning"] = {"effort": effort, "summary": "auto"}
        with stream_lines(self._pool, self.url, self.wire.headers, self.wire.body(body), settings, cancel,
                          error_message, self._secrets, stream) as lines:
            return read_stream(lines, stream, settings.timeout)


def read_stream(lines: Iterable[str], stream: Stream, idle_timeout: float | None = None) -> ModelReply:
    """A Responses event stream into a ModelReply; every shape is checked as it arrives."""
    text: list[str] = []
    calls: dict[Any, dict[str, Any]] = {}  # by output_index (item_id when a server leaves the index out)
    kept: list[dict[str, Any]] = []  # reasoning items to send back
    usage = Usage()
    finished = truncated = False
    answer, thoughts = Joiner(), Joiner()
    for _name, event in sse.json_events(lines, idle_timeout=idle_timeout):
        kind = event.get("type")
        if kind in ("response.output_text.delta", "response.refusal.delta"):
            shown = answer.feed(_delta(event))
            if shown:
                text.append(shown)
                stream.text(shown)
        elif kind in ("response.reasoning_summary_text.delta", "response.reasoning_text.delta"):
            piece = _reasoning_delta(event)
            shown = thoughts.feed(piece) if piece else ""
            if shown:
                stream.thought(shown)
        elif kind == "response.reasoning_summary_part.added" and event.get("summary_index"):
            stream.thought("\n\n")  # a new summary part: a paragraph of its own
        elif kind == "response.output_item.added":
            _start_item(calls, event)
        elif kind == "response.function_call_arguments.delta":
            _call_of(calls, event)["args"].append(_delta(event))
        elif kind == "response.function_call_arguments.done":
            arguments = event.get("arguments")
            if isinstance(arguments, str):
                _call_of(calls, event)["whole"] = arguments
        elif kind == "response.output_item.done":
            _finish_item(calls, kept, event)
        elif kind in ("response.completed", "response.incomplete"):
            response = mapping(event.get("response"))
            _take_usage(response.get("usage"), usage)
            details = response.get("incomplete_details")
            truncated = kind == "response.incomplete" and (
                not isinstance(details, dict) or details.get("reason") in (None, "max_output_tokens"))
            finished = True
            break
        elif kind == "response.failed":
            response = mapping(event.get("response"))
            raise ModelError(f"model API error: {_failure(response.get('error'))}")
        elif kind == "error":
            raise ModelError(f"model API error: {_failure(event)}")
    end_of_stream(stream, answer, thoughts, text, finished)
    tool_calls = []
    for call in {id(call): call for call in calls.values()}.values():  # (a call is found by index and by item id)
        try:
            whole = call["whole"] if call["whole"] is not None else "".join(call["args"])
            tool_calls.append(ToolCall(call["call_id"] or new_call_id(), call["name"], parse_arguments(call["name"], whole)))
        except ModelError:
            if not truncated:
                raise
            # cut by the token limit in the middle of its arguments: not a call that can run
    return ModelReply("".join(text), tool_calls, thinking=kept, usage=usage, truncated=truncated)


def _delta(event: dict[str, Any]) -> str:
    delta = event.get("delta")
    if not isinstance(delta, str):
        raise malformed(f"{event.get('type')}: delta is not text")
    return delta


def _reasoning_delta(event: dict[str, Any]) -> str:
    """Reasoning is display-only: a piece of the wrong shape is dropped (and logged), never the turn failed."""
    delta = event.get("delta")
    if isinstance(delta, str):
        return delta
    dropped_reasoning(f"{event.get('type')}: delta is not text")
    return ""


def _key(event: dict[str, Any]) -> Any:
    index = event.get("output_index")
    if isinstance(index, int) and not isinstance(index, bool):
        return index
    item_id = event.get("item_id")
    if isinstance(item_id, str) and item_id:
        return item_id
    item = event.get("item")
    if isinstance(item, dict) and isinstance(item.get("id"), str):
        return item["id"]
    raise malformed(f"{event.get('type')}: neither output_index nor item_id")


def _item(event: dict[str, Any]) -> dict[str, Any]:
    item = event.get("item")
    if not isinstance(item, dict):
        raise malformed(f"{event.get('type')}: item is not an object")
    return item


def _start_item(calls: dict[Any, dict[str, Any]], event: dict[str, Any]) -> None:
    item = _item(event)
    if item.get("type") != "function_call":
        return
    name, call_id = item.get("name"), item.get("call_id")
    if not isinstance(name, str) or not name:
        raise malformed("a function_call item without a name")
    if call_id is not None and (isinstance(call_id, bool) or not isinstance(call_id, (str, int))):
        raise malformed("a function_call's call_id is not a string")
    call: dict[str, Any] = {"name": name, "call_id": str(call_id) if call_id else "", "args": [], "whole": None}
    calls[_key(event)] = call
    if isinstance(item.get("id"), str):
        calls.setdefault(item["id"], call)  # deltas that name the item instead of its index


def _call_of(calls: dict[Any, dict[str, Any]], event: dict[str, Any]) -> dict[str, Any]:
    for key in (event.get("output_index"), event.get("item_id")):
        if key is not None and not isinstance(key, bool) and key in calls:
            return calls[key]
    raise malformed(f"{event.get('type')} for a function call that was never started")


def _finish_item(calls: dict[Any, dict[str, Any]], kept: list[dict[str, Any]], event: dict[str, Any]) -> None:
    item = _item(event)
    kind = item.get("type")
    if kind == REASONING:
        encrypted = item.get("encrypted_content")
        if isinstance(encrypted, str) and encrypted and not too_large(len(encrypted)):
            summary = item["summary"] if isinstance(item.get("summary"), list) else []
            kept.append({"type": REASONING, "summary": [s for s in summary if isinstance(s, dict)],
                         "encrypted_content": encrypted})
    elif kind == "function_call":
        known = [calls[k] for k in (event.get("output_index"), item.get("id"))
                 if k is not None and not isinstance(k, bool) and k in calls]
        if not known:  # a server that sends the whole call at its end only
            _start_item(calls, event)
            known = [calls[_key(event)]]
        call = known[0]
        if isinstance(item.get("arguments"), str):
            call["whole"] = item["arguments"]
        if isinstance(item.get("call_id"), str) and item["call_id"]:
            call["call_id"] = item["call_id"]


def _take_usage(value: object, usage: Usage) -> None:
    if not isinstance(value, dict):
        return
    for key, attribute in (("input_tokens", "input"), ("output_tokens", "output")):
        count = value.get(key)
        if isinstance(count, int) and not isinstance(count, bool) and count >= 0:
            setattr(usage, attribute, count)
    details = value.get("input_tokens_details")
    cached = details.get("cached_tokens") if isinstance(details, dict) else None
    if isinstance(cached, int) and not isinstance(cached, bool) and cached >= 0:
        usage.cache_read = cached


def _failure(error: object) -> str:
    if isinstance(error, dict):
        message = error.get("message")
        code = error.get("code")
        words = message if isinstance(message, str) and message else str(code or "the request failed")
        if isinstance(code, str) and code and code not in words:
            words = f"{words} ({code})"
        return " ".join(jsontext.clean(words).split())[:300]
    return "the request failed"
