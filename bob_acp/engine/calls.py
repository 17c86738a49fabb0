"""A tool call as the client sees it, the loop detector, and the results that answer calls."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import orjson

from bob_acp.context import history
from bob_acp.context.history import CANCELLED_RESULT, NOT_RUN, REJECTED

__all__ = ["CANCELLED_RESULT", "NOT_RUN", "REJECTED"]  # (the engine's words, re-exported; the rest is its own)
from bob_acp.files.workspace import Workspace
from bob_acp.jsontext import clean
from bob_acp.rules import Rule
from bob_acp.tools.base import Diff, Location, Tool, ToolResult


@dataclass
class Call:
    ref: str
    name: str
    arguments: dict[str, Any]
    tool: Tool | None
    title: str
    kind: str
    locations: list[Location] = field(default_factory=list)
    grant: str | None = ""  # what allow_always remembers for this call; None: it cannot be remembered
    preview: Diff | None = None  # the change it would make, shown before approval
    sandboxed: bool = False  # bash that will run in the sandbox (said to the client in _meta)
    partial: str | None = None  # what that sandbox lacks on this machine (said too), None: nothing
    confine: bool = False  # runs unasked because it stays in the project (its writes must: bob_acp.files.atomic)
    reason: str = ""  # what the user said to do instead, with a rejection
    terminal: str | None = None  # the editor's terminal it runs in (tools.clientTerminal)
    rule: str = ""  # the project rule(s) that answered its question, as the user reads them
    proposal: Rule | None = None  # the rule "always/never in this project" would keep (permissions.projectRules)


class NotRun(Exception):
    """A call that does not run, or does not finish: an unknown tool, a repeat, refused by the
    user or by a rule, cancelled, or a tool that could not start. str(self) is its result for the
    model; after it, the turn goes on, stops (`then`: the loop's stop) or ends cancelled (`then`:
    Cancelled)."""

    def __init__(self, output: str, then: Exception | None = None):
        super().__init__(output)
        self.then = then


def make_call(ref: str, name: str, arguments: dict[str, Any], tool: Tool | None, ws: Workspace, per_command: bool) -> Call:
    if tool is None:
        return Call(ref, name, arguments, None, clean(f"{name}: unknown tool"), "execute", [], name)
    grant: str | None
    try:
        title, locations = tool.title_in(arguments, ws), tool.locations(arguments, ws)
        # (a grant of an unconfined command covers that command alone, whatever allowAlways says)
        grant = tool.grant(arguments, ws) if per_command or tool.exact(arguments) else tool.grant_key
    except Exception:  # arguments of the wrong shape: the tool's own run() will say so
        title, locations, grant = name, [], None if per_command or tool.exact(arguments) else tool.grant_key
    return Call(ref, name, arguments, tool, clean(title), tool.kind, locations, grant)


def result_message(messages: list[dict[str, Any]], call: Call, output: str, failed: bool = False) -> dict[str, Any]:
    for message in reversed(messages):
        if message["role"] == "assistant":
            for recorded in message.get("tool_calls", ()):
                if recorded.get("ref") == call.ref:
                    return history.tool_result(recorded, output, failed)
            break
    raise RuntimeError(f"tool call {call.ref} is not in the last assistant message")


class Repeats:
    """Counts how many times in a row the same call (name and arguments) was made."""

    def __init__(self) -> None:
        self._last: bytes | None = None
        self._times = 0

    def see(self, call: Call) -> int:
        key = call.name.encode("utf-8", "surrogatepass") + b"\0" + orjson.dumps(call.arguments, option=orjson.OPT_SORT_KEYS)
        self._times = self._times + 1 if key == self._last else 1
        self._last = key
        return self._times


def failed(output: str) -> ToolResult:
    return ToolResult(output, failed=True)
