"""Validation of every frame Bob writes against the official ACP v1 JSON schema.

The schema is ../shared/acp-schema/schema.json beside the clone when present (the project's
shared folder), else the copy in tests/data (same file; tests/test_schema_copy.py checks they
match), so a newcomer's fresh clone validates too.
"""

from __future__ import annotations

import json
import os

import jsonschema
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

HERE = os.path.dirname(os.path.abspath(__file__))
SHARED = os.path.normpath(os.path.join(HERE, "..", "..", "shared", "acp-schema", "schema.json"))
VENDORED = os.path.join(HERE, "data", "acp-schema.json")
# The official SDKs' schema (npm @agentclientprotocol/sdk 2.4.0): what it has beyond the stable
# one (notices, compaction updates) is sent only to a client that advertised it, and checked here.
SDK_SHARED = os.path.normpath(os.path.join(HERE, "..", "..", "shared", "acp-schema", "npm-sdk-2.4.0", "schema.json"))
SDK_VENDORED = os.path.join(HERE, "data", "acp-schema-sdk-2.4.0.json")
SDK_UPDATES = {"notice": "notices", "compaction_update": "compaction", "compaction_summary_chunk": "compaction"}

RESPONSE_TYPES = {
    "initialize": "InitializeResponse",
    "authenticate": "AuthenticateResponse",
    "session/new": "NewSessionResponse",
    "session/load": "LoadSessionResponse",
    "session/prompt": "PromptResponse",
    "logout": "LogoutResponse",
    "session/set_config_option": "SetSessionConfigOptionResponse",
}
# Extension methods: the shape the peers (codex-acp, claude-agent-acp) answer with.
STEERING_OUTCOMES = ({"outcome": "injected"}, {"outcome": "startedNewTurn"},
                     {"outcome": "promptRequired", "reason": "noRunningTurn"})  # (codex-acp's and claude-agent-acp's)
REQUEST_TYPES = {"session/request_permission": "RequestPermissionRequest",
                 "fs/read_text_file": "ReadTextFileRequest", "fs/write_text_file": "WriteTextFileRequest",
                 "terminal/create": "CreateTerminalRequest", "terminal/output": "TerminalOutputRequest",
                 "terminal/release": "ReleaseTerminalRequest", "terminal/wait_for_exit": "WaitForTerminalExitRequest",
                 "terminal/kill": "KillTerminalRequest", "elicitation/create": "CreateElicitationRequest"}
NOTIFICATION_TYPES = {"session/update": "SessionNotification", "$/cancel_request": "CancelRequestNotification",
                      "_bob/retry": "ExtNotification"}  # (only to a client that asked for it: bob-acp chat)


def schema_path() -> str:
    return SHARED if os.path.exists(SHARED) else VENDORED


def sdk_schema_path() -> str:
    return SDK_SHARED if os.path.exists(SDK_SHARED) else SDK_VENDORED


class FrameValidator:
    """Validates agent → client frames. `method_of(id)` names the request a response answers."""

    def __init__(self, path: str | None = None):
        with open(path or schema_path(), encoding="utf-8") as handle:
            self.schema = json.load(handle)
        resource = Resource.from_contents(self.schema, default_specification=DRAFT202012)
        self._registry = Registry().with_resource("urn:acp", resource)
        self._validators: dict[str, jsonschema.Draft202012Validator] = {}
        agent = dict(self.schema["anyOf"][0])
        agent["$defs"] = self.schema["$defs"]
        self._agent_message = jsonschema.Draft202012Validator(agent)

    def _validator(self, name: str) -> jsonschema.Draft202012Validator:
        if name not in self._validators:
            self._validators[name] = jsonschema.Draft202012Validator(
                {"$ref": f"urn:acp#/$defs/{name}"}, registry=self._registry
            )
        return self._validators[name]

    def check(self, name: str, value: object) -> None:
        """Raise jsonschema.ValidationError unless `value` is a valid `name` ($defs entry)."""
        self._validator(name).validate(value)

    def validate(self, frame: dict, method_of=lambda _id: None, advertised: dict | None = None) -> None:
        """`advertised`: the client capabilities the client sent (an SDK-only update must have
        been asked for there)."""
        assert isinstance(frame, dict), f"a frame must be an object: {frame!r}"
        assert frame.get("jsonrpc") == "2.0", f"frame without jsonrpc 2.0: {frame!r}"
        kind = frame.get("params", {}).get("update", {}).get("sessionUpdate") if frame.get("method") else None
        if frame.get("method") == "session/update" and kind in SDK_UPDATES:
            session = (advertised or {}).get("session") or {}
            assert isinstance(session.get(SDK_UPDATES[kind]), dict), \
                f"a {kind} update to a client that did not advertise session.{SDK_UPDATES[kind]}: {frame!r}"
            sdk().check("SessionNotification", frame["params"])
            return
        self._agent_message.validate(frame)
        if "method" in frame:
            method = frame["method"]
            table = REQUEST_TYPES if "id" in frame else NOTIFICATION_TYPES
            assert method in table, f"Bob sent an unexpected method {method!r}: {frame!r}"
            if method == "elicitation/create":
                asked = (advertised or {}).get("elicitation") or {}
                assert isinstance(asked.get(frame["params"].get("mode")), dict), \
                    f"an elicitation to a client that did not advertise its mode: {frame!r}"
            self.check(table[method], frame["params"])
            return
        assert "id" in frame, f"response without id: {frame!r}"
        assert ("result" in frame) != ("error" in frame), f"response needs exactly one of result/error: {frame!r}"
        if "error" in frame:
            self.check("Error", frame["error"])
            assert isinstance(frame["error"]["code"], int)
            return
        method = method_of(frame["id"])
        if method in RESPONSE_TYPES:
            self.check(RESPONSE_TYPES[method], frame["result"])
        elif method == "_session/steering":
            assert frame["result"] in STEERING_OUTCOMES, f"a steering answer of no known shape: {frame!r}"


_SDK: FrameValidator | None = None


def sdk() -> FrameValidator:
    global _SDK
    if _SDK is None:
        _SDK = FrameValidator(sdk_schema_path())
    return _SDK
