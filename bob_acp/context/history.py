"""The conversation history: plain JSON-ready dicts, provider-neutral.

This is the one format the engine, the providers, compression and the session files share:

    {"role": "system", "content": str}
    {"role": "user", "content": [<part>], "typed": str?}     # typed: what the user wrote, when Bob
                                                              #   rewrote it
    {"role": "user", "content": [<part>], "summary": True}   # a compression summary
    {"role": "assistant", "content": str,
     "tool_calls": [{"id": str, "ref": "call_7", "name": str, "arguments": dict}],
     "thinking": [<provider reasoning blocks, sent back as they came>],
     "by": str?}                                              # by: the model (id) that reasoned
    {"role": "tool", "tool_call_id": str, "name": str, "content": str, "failed": True?,
     "unanswered": True?}                                     # unanswered: put there by repaired()

A user message's content is a list of parts, in order: {"type": "text", "text": str} and
{"type": "image", "mimeType": str, "data": base64} (acp.images); the next kinds (an embedded
resource) join them there. A session file written before 0.14 has a string and an `images` list
instead: `upgraded` turns it into parts when it loads. `text_of` and `images_of` read either.

`id` is the provider's own id for a tool call (sent back with its result); `ref` is the ACP
`toolCallId` Bob showed the client (`call_N`, per process), used again by session/load replay.
`tool_calls` is omitted when the assistant called no tool, `thinking` when there was none (only
Anthropic's signed thinking blocks are kept: the API wants them back while tools run). Every tool call is followed, before
the next user or assistant message, by exactly one tool message answering it.
"""

from __future__ import annotations

from typing import Any

SUMMARY_PREFIX = "[compression summary of the earlier conversation]\n"
# The results Bob itself gives a call (the engine writes them; the session file and its replay read them).
REJECTED = "[command rejected by the user]"
CANCELLED_RESULT = "[cancelled by the user]"
SHUT_DOWN_RESULT = "[stopped: Bob was shutting down (its input ended, or a signal)]"
NOT_RUN = "[not run: the turn ended before this call]"


def system(content: str) -> dict[str, Any]:
    return {"role": "system", "content": content}


def user(content: str, typed: str | None = None, images: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    parts: list[dict[str, Any]] = [text_part(content)]
    parts += [image_part(image) for image in images or ()]
    message: dict[str, Any] = {"role": "user", "content": parts}
    if typed is not None and typed != content:
        message["typed"] = typed
    return message


def text_part(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def image_part(image: dict[str, Any]) -> dict[str, Any]:
    return {"type": "image", "mimeType": image["mimeType"], "data": image["data"]}


def text_of(message: dict[str, Any]) -> str:
    """A message's text: its content, or the text of its parts, joined."""
    content = message.get("content", "")
    if isinstance(content, str):
        return content
    return "".join(part["text"] for part in content if part.get("type") == "text")


def images_of(message: dict[str, Any]) -> list[dict[str, Any]]:
    """A user message's images ({mimeType, data}), in order."""
    content = message.get("content")
    if isinstance(content, list):
        return [part for part in content if part.get("type") == "image"]
    return list(message.get("images", ()))


def upgraded(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A history with every user message's content as parts (files before 0.14 kept a string and
    an `images` list); `messages` itself when there is nothing to change."""
    if all(m["role"] != "user" or isinstance(m.get("content"), list) for m in messages):
        return messages
    out = []
    for message in messages:
        if message["role"] == "user" and isinstance(message.get("content"), str):
            images = images_of(message)
            message = {k: v for k, v in message.items() if k != "images"}
            message["content"] = [text_part(text_of(message))] + [image_part(image) for image in images]
        out.append(message)
    return out


def image_line(image: dict[str, Any]) -> str:
    """An image in a line, where its bytes are not wanted (a compression transcript)."""
    from bob_acp.jsontext import decoded_size

    return f"[image: {image.get('mimeType', '?')}, about {decoded_size(image.get('data', ''))} bytes]"


def summary(content: str) -> dict[str, Any]:
    return {"role": "user", "content": [text_part(SUMMARY_PREFIX + content)], "summary": True}


def summary_text(message: dict[str, Any]) -> str:
    """The summary itself, without the marker the model reads."""
    text = text_of(message)
    return text[len(SUMMARY_PREFIX):] if text.startswith(SUMMARY_PREFIX) else text


def assistant(content: str, tool_calls: list[dict[str, Any]] | None = None, thinking: list[dict[str, Any]] | None = None,
              by: str | None = None) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls:
        message["tool_calls"] = tool_calls
    if thinking:
        message["thinking"] = thinking
        if by:
            message["by"] = by
    return message


def without_others_thinking(messages: list[dict[str, Any]], model_id: str) -> list[dict[str, Any]]:
    """The history with the reasoning blocks of every model but `model_id` left out (a message
    without `by` predates the model list: it belongs to whichever model the session used)."""
    return [{k: v for k, v in m.items() if k not in ("thinking", "by")}
            if "thinking" in m and m.get("by") not in (None, model_id) else m for m in messages]


def tool_result(call: dict[str, Any], content: str, failed: bool = False) -> dict[str, Any]:
    message = {"role": "tool", "tool_call_id": call["id"], "name": call["name"], "content": content}
    if failed:
        message["failed"] = True
    return message


def repaired(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The history as a model API accepts it: each assistant message's tool calls answered by
    their results before the conversation goes on (a call without one is answered as not run),
    and no result that answers no call just made. Returns `messages` itself when nothing was
    wrong (the common case costs one pass and no copy)."""
    if _valid(messages):
        return messages
    out: list[dict[str, Any]] = []
    pending: list[dict[str, Any]] = []  # calls of the last assistant message not answered yet
    for message in messages:
        role = message["role"]
        if role == "tool":
            match = next((c for c in pending if c["id"] == message["tool_call_id"]), None)
            if match is not None:
                pending.remove(match)
                out.append(message)
            continue  # a result for no call just made: dropped
        out += [_unanswered(call) for call in pending]
        pending = list(message.get("tool_calls", ())) if role == "assistant" else []
        out.append(message)
    out += [_unanswered(call) for call in pending]
    return out


def _unanswered(call: dict[str, Any]) -> dict[str, Any]:
    """The result a call that never got one is given (a replay shows it as a call without one)."""
    return {**tool_result(call, NOT_RUN, failed=True), "unanswered": True}


def _valid(messages: list[dict[str, Any]]) -> bool:
    """(A model may give two calls one id: each result answers one call, as in repaired().)"""
    pending: list[str] = []
    for message in messages:
        if message["role"] == "tool":
            if message["tool_call_id"] not in pending:
                return False
            pending.remove(message["tool_call_id"])
            continue
        if pending:
            return False
        if message["role"] == "assistant":
            pending = [call["id"] for call in message.get("tool_calls", ())]
    return not pending


def unanswered_calls(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Tool calls of the last assistant message that have no result yet."""
    answered: list[str] = []  # (each result answers one call: a model may give two calls one id)
    for message in reversed(messages):
        if message["role"] == "tool":
            answered.append(message["tool_call_id"])
        elif message["role"] == "assistant":
            unanswered = []
            for call in message.get("tool_calls", ()):
                if call["id"] in answered:
                    answered.remove(call["id"])
                else:
                    unanswered.append(call)
            return unanswered
        else:
            return []
    return []
