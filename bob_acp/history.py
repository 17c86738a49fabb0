"""The conversation history: plain JSON-ready dicts, provider-neutral.

This is the one format the engine, the providers, compression and the session files share:

    {"role": "system", "content": str}
    {"role": "user", "content": str}
    {"role": "user", "content": str, "summary": True}        # a compression summary
    {"role": "assistant", "content": str,
     "tool_calls": [{"id": str, "ref": "call_7", "name": str, "arguments": dict}],
     "thinking": [<provider reasoning blocks, sent back as they came>]}
    {"role": "tool", "tool_call_id": str, "name": str, "content": str}

`id` is the provider's own id for a tool call (sent back with its result); `ref` is the ACP
`toolCallId` Bob showed the client (`call_N`, per process), used again by session/load replay.
`tool_calls` is omitted when the assistant called no tool, `thinking` when there was none (only
Anthropic's signed thinking blocks are kept: the API wants them back while tools run). Every tool call is followed, before
the next user or assistant message, by exactly one tool message answering it.
"""

from __future__ import annotations

SUMMARY_PREFIX = "[compression summary of the earlier conversation]\n"


def system(content: str) -> dict:
    return {"role": "system", "content": content}


def user(content: str) -> dict:
    return {"role": "user", "content": content}


def summary(content: str) -> dict:
    return {"role": "user", "content": SUMMARY_PREFIX + content, "summary": True}


def summary_text(message: dict) -> str:
    """The summary itself, without the marker the model reads."""
    text = message.get("content", "")
    return text[len(SUMMARY_PREFIX):] if text.startswith(SUMMARY_PREFIX) else text


def assistant(content: str, tool_calls: list[dict] | None = None, thinking: list[dict] | None = None) -> dict:
    message: dict = {"role": "assistant", "content": content}
    if tool_calls:
        message["tool_calls"] = tool_calls
    if thinking:
        message["thinking"] = thinking
    return message


def tool_result(call: dict, content: str) -> dict:
    return {"role": "tool", "tool_call_id": call["id"], "name": call["name"], "content": content}


def unanswered_calls(messages: list[dict]) -> list[dict]:
    """Tool calls of the last assistant message that have no result yet."""
    answered = set()
    for message in reversed(messages):
        if message["role"] == "tool":
            answered.add(message["tool_call_id"])
        elif message["role"] == "assistant":
            return [c for c in message.get("tool_calls", ()) if c["id"] not in answered]
        else:
            return []
    return []
