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

RESPONSE_TYPES = {
    "initialize": "InitializeResponse",
    "authenticate": "AuthenticateResponse",
    "session/new": "NewSessionResponse",
    "session/load": "LoadSessionResponse",
    "session/prompt": "PromptResponse",
}
REQUEST_TYPES = {"session/request_permission": "RequestPermissionRequest"}
NOTIFICATION_TYPES = {"session/update": "SessionNotification", "$/cancel_request": "CancelRequestNotification",
                      "_bob/retry": "ExtNotification"}  # (only to a client that asked for it: bob-acp chat)


def schema_path() -> str:
    return SHARED if os.path.exists(SHARED) else VENDORED


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

    def validate(self, frame: dict, method_of=lambda _id: None) -> None:
        assert isinstance(frame, dict), f"a frame must be an object: {frame!r}"
        assert frame.get("jsonrpc") == "2.0", f"frame without jsonrpc 2.0: {frame!r}"
        self._agent_message.validate(frame)
        if "method" in frame:
            method = frame["method"]
            table = REQUEST_TYPES if "id" in frame else NOTIFICATION_TYPES
            assert method in table, f"Bob sent an unexpected method {method!r}: {frame!r}"
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
