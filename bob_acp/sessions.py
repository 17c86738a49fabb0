"""Sessions on disk: ids, the session file (atomic writes), validation on load, replay items.

File format (version 1), `<cwd>/<sessions.dir>/<id>.json`:

    {"version": 1, "id": "20261203-101530-4f2a9c1e", "cwd": "/abs/project",
     "createdAt": "2026-12-03T10:15:30Z", "updatedAt": "…", "messages": [<bob_acp.history messages>]}

Only the conversation is stored: nothing from the config or the environment (no API key).
"""

from __future__ import annotations

import datetime
import os
import re
from dataclasses import dataclass
from typing import Any

import orjson

from bob_acp import history
from bob_acp.atomic import atomic_write

VERSION = 1
SESSION_ID_RE = re.compile(r"\d{8}-\d{6}-[0-9a-f]{8}")
MAX_FILE_BYTES = 512 * 1024 * 1024


def new_id(now: datetime.datetime | None = None) -> str:
    now = now or datetime.datetime.now(datetime.timezone.utc)
    return now.strftime("%Y%m%d-%H%M%S") + "-" + os.urandom(4).hex()


def valid_id(value: Any) -> bool:
    return isinstance(value, str) and SESSION_ID_RE.fullmatch(value) is not None


class SessionLoadError(Exception):
    def __init__(self, sid: str, reason: str):
        super().__init__(f"session {sid}: {reason}")
        self.sid = sid
        self.reason = reason


@dataclass
class StoredSession:
    id: str
    cwd: str
    messages: list[dict]
    created_at: str
    updated_at: str


@dataclass
class ReplayItem:
    kind: str  # user | agent | tool
    text: str = ""
    ref: str = ""
    name: str = ""
    arguments: dict | None = None
    output: str | None = None  # None: no result was recorded


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class SessionStore:
    """The session files of one working directory."""

    def __init__(self, cwd: str, folder: str):
        self.cwd = cwd
        self.folder = os.path.normpath(os.path.join(cwd, os.path.expanduser(folder)))

    def path_for(self, sid: str) -> str:
        if not valid_id(sid):  # checked before any path is built from it
            raise ValueError(f"not a valid session id: {sid!r}")
        return os.path.join(self.folder, sid + ".json")

    def save(self, sid: str, messages: list[dict], meta: dict | None = None) -> None:
        path = self.path_for(sid)
        created = _now()
        try:
            with open(path, "rb") as handle:
                created = orjson.loads(handle.read()).get("createdAt", created)
        except (OSError, orjson.JSONDecodeError, AttributeError):
            pass
        document = {"version": VERSION, "id": sid, "cwd": self.cwd, "createdAt": created, "updatedAt": _now(),
                    "messages": messages}
        if meta:
            document.update({k: v for k, v in meta.items() if k not in document})
        atomic_write(path, orjson.dumps(document, option=orjson.OPT_INDENT_2) + b"\n")

    def load(self, sid: str) -> StoredSession:
        try:
            path = self.path_for(sid)
        except ValueError:
            raise SessionLoadError(str(sid), "not a valid session id") from None
        try:
            if os.path.getsize(path) > MAX_FILE_BYTES:
                raise SessionLoadError(sid, f"file larger than {MAX_FILE_BYTES} bytes")
            with open(path, "rb") as handle:
                data = handle.read()
        except FileNotFoundError:
            raise SessionLoadError(sid, f"not found in {self.folder}") from None
        except OSError as exc:
            raise SessionLoadError(sid, f"cannot read {path}: {exc.strerror}") from None
        try:
            document = orjson.loads(data)
        except orjson.JSONDecodeError:
            raise SessionLoadError(sid, f"{path} is not valid JSON") from None
        if not isinstance(document, dict):
            raise SessionLoadError(sid, f"{path} is not a session file")
        if document.get("version") != VERSION:
            raise SessionLoadError(sid, f"unsupported session file version {document.get('version')!r}")
        messages = document.get("messages")
        if not isinstance(messages, list):
            raise SessionLoadError(sid, "messages: must be a list")
        for index, message in enumerate(messages):
            problem = message_problem(message)
            if problem:
                raise SessionLoadError(sid, f"malformed message {index}: {problem}")
        return StoredSession(sid, str(document.get("cwd", self.cwd)), messages,
                             str(document.get("createdAt", "")), str(document.get("updatedAt", "")))


def message_problem(message: Any) -> str | None:
    """Why `message` is not a bob_acp.history message, or None."""
    if not isinstance(message, dict):
        return "not an object"
    role = message.get("role")
    if role not in ("system", "user", "assistant", "tool"):
        return f"unknown role {role!r}"
    if not isinstance(message.get("content"), str):
        return "content must be a string"
    if role == "tool":
        if not isinstance(message.get("tool_call_id"), str) or not isinstance(message.get("name"), str):
            return "a tool message needs tool_call_id and name strings"
    if role == "assistant" and "tool_calls" in message:
        calls = message["tool_calls"]
        if not isinstance(calls, list):
            return "tool_calls must be a list"
        for call in calls:
            if not isinstance(call, dict) or not isinstance(call.get("id"), str) or not isinstance(call.get("name"), str):
                return "a tool call needs id and name strings"
            if not isinstance(call.get("arguments"), dict):
                return "tool call arguments must be an object"
            if "ref" in call and not isinstance(call["ref"], str):
                return "a tool call ref must be a string"
    return None


def replay_items(messages: list[dict]) -> list[ReplayItem]:
    """What session/load sends, in order (the product document's replay table)."""
    outputs = {m["tool_call_id"]: m["content"] for m in messages if m["role"] == "tool"}
    items: list[ReplayItem] = []
    for message in messages:
        role = message["role"]
        if role == "user":
            if message.get("summary"):
                items.append(ReplayItem("agent", "🗜️ " + history.summary_text(message)))
            else:
                items.append(ReplayItem("user", message["content"]))
        elif role == "assistant":
            if message["content"]:
                items.append(ReplayItem("agent", message["content"]))
            for call in message.get("tool_calls", ()):
                items.append(ReplayItem("tool", ref=call.get("ref") or call["id"], name=call["name"],
                                        arguments=call["arguments"], output=outputs.get(call["id"])))
    return items
