"""A session's conversation state, and the per-process numbering of tool calls."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from bob_acp.engine import compress
from bob_acp.engine.steering import Steering
from bob_acp.files.workspace import Workspace
from bob_acp.tools.base import ToolSet
from bob_acp.tools.builtin import BUILTIN
from bob_acp.tools.client import Client

if TYPE_CHECKING:
    from bob_acp.checkpoints import Checkpoints
    from bob_acp.sandbox import Sandbox


@dataclass
class Conversation:
    """One session's conversation; the engine changes it during a turn, /new and /compact."""

    workspace: Workspace
    messages: list[dict[str, Any]]
    skills: dict[str, Any] = field(default_factory=dict)  # name -> bob_acp.context.skills.Skill
    tools: ToolSet = BUILTIN
    allow_always: set[str] = field(default_factory=set)  # tool names, or grants (permissions.allowAlways: command)
    last_input_tokens: int | None = None  # the prompt's size at the last model call
    counted: int = 0  # how many messages that count covered
    model: str | None = None  # the session's model choice; None: model.name
    mode: str = "ask"  # ask | sandboxed | allow-edits | allow-all (permissions.mode)
    reasoning: str | None = None  # the session's reasoning level (acp.configOptions); None: as configured
    cost: float = 0.0  # the session's cost so far, when model.price is configured
    owner: str = ""  # the label its commands' processes carry: what they leave running ends with the session
    sandbox: Sandbox | None = None  # of its commands (None: tools.sandbox off, or a folder too broad for one)
    client: Client | None = None  # the editor's files and terminals (tools.clientFs, tools.clientTerminal)
    unoffered: dict[str, str] = field(default_factory=dict)  # approval mode -> why this session cannot have it
    notices: list[str] = field(default_factory=list)  # what the user is told once the session is open
    checkpoints: Checkpoints | None = None  # its folders before and after each turn that changed them (/undo)
    steering: Steering = field(default_factory=Steering)  # what the user adds to the running turn
    told: set[str] = field(default_factory=set)  # lines said once a session (a rules file that is not applied)

    @property
    def cwd(self) -> str:
        return self.workspace.cwd

    def context_tokens(self) -> int:
        """The history's size as the next call will send it: the provider's last count plus an
        estimate of what was added since (characters / 4), or the estimate alone when the
        provider reports nothing."""
        if self.last_input_tokens is None:
            return compress.estimate_tokens(self.messages)
        return self.last_input_tokens + compress.estimate_tokens(self.messages[self.counted:])

    def count(self, tokens: int, covered: int) -> None:
        self.last_input_tokens = tokens
        self.counted = covered

    def forget_count(self) -> None:
        self.last_input_tokens = None
        self.counted = 0


class Refs:
    """ACP tool-call ids, `call_1`, `call_2`, …: one numbering per process (its server owns
    it), never reset, moved past the ids a loaded session replays."""

    def __init__(self) -> None:
        self._next = 1
        self._lock = threading.Lock()

    def next(self) -> str:
        with self._lock:
            ref = f"call_{self._next}"
            self._next += 1
            return ref

    def reserve(self, refs: list[str]) -> None:
        highest = 0
        for ref in refs:
            digits = ref[5:] if ref.startswith("call_") else ""
            if digits.isascii() and digits.isdigit() and len(digits) < 19:
                highest = max(highest, int(digits))
        with self._lock:
            self._next = max(self._next, highest + 1)
