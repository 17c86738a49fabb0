"""ACP v1 names and frame builders: every session/update Bob writes is built here."""

from __future__ import annotations

PROTOCOL_VERSION = 1

INITIALIZE = "initialize"
AUTHENTICATE = "authenticate"
SESSION_NEW = "session/new"
SESSION_LOAD = "session/load"
SESSION_PROMPT = "session/prompt"
SESSION_CANCEL = "session/cancel"
SESSION_UPDATE = "session/update"
REQUEST_PERMISSION = "session/request_permission"
# Answered "method not found" on purpose (the product document's list).
NOT_SUPPORTED = (
    "session/set_mode",
    "session/set_config_option",
    "session/list",
    "session/resume",
    "session/close",
    "logout",
)

END_TURN = "end_turn"
CANCELLED = "cancelled"
REFUSAL = "refusal"
MAX_TURN_REQUESTS = "max_turn_requests"

ALLOW, ALLOW_ALWAYS, REJECT = "allow", "allow_always", "reject"


def permission_options(tool_name: str) -> list[dict]:
    return [
        {"optionId": ALLOW, "name": "Allow", "kind": "allow_once"},
        {"optionId": ALLOW_ALWAYS, "name": f"Always allow {tool_name} in this session", "kind": "allow_always"},
        {"optionId": REJECT, "name": "Reject", "kind": "reject_once"},
    ]


def text_block(text: str) -> dict:
    return {"type": "text", "text": text}


def agent_chunk(text: str) -> dict:
    return {"sessionUpdate": "agent_message_chunk", "content": text_block(text)}


def user_chunk(text: str) -> dict:
    return {"sessionUpdate": "user_message_chunk", "content": text_block(text)}


def commands_update(commands: list[dict]) -> dict:
    return {"sessionUpdate": "available_commands_update", "availableCommands": commands}


def text_content(text: str) -> dict:
    return {"type": "content", "content": text_block(text)}


def diff_content(path: str, old_text: str | None, new_text: str) -> dict:
    return {"type": "diff", "path": path, "oldText": old_text, "newText": new_text}


def tool_call(ref: str, title: str, kind: str, raw_input: dict, locations: list[str], status: str = "pending") -> dict:
    frame = {
        "sessionUpdate": "tool_call",
        "toolCallId": ref,
        "title": title,
        "kind": kind,
        "status": status,
        "rawInput": raw_input,
    }
    if locations:
        frame["locations"] = [{"path": path} for path in locations]
    return frame


def tool_call_update(ref: str, status: str, content: list[dict] | None = None, raw_output: dict | None = None) -> dict:
    frame: dict = {"sessionUpdate": "tool_call_update", "toolCallId": ref, "status": status}
    if content is not None:
        frame["content"] = content
    if raw_output is not None:
        frame["rawOutput"] = raw_output
    return frame


def tool_request(ref: str, title: str, kind: str, raw_input: dict, locations: list[str]) -> dict:
    """The toolCall of a permission request (a ToolCallUpdate)."""
    frame = {"toolCallId": ref, "title": title, "kind": kind, "status": "pending", "rawInput": raw_input}
    if locations:
        frame["locations"] = [{"path": path} for path in locations]
    return frame
