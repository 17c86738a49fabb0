"""What a turn reports, and to whom: the Sink the ACP layer (or the chat) implements, the counts
of what a turn ran, and how a turn that failed says so."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from bob_acp.cancel import Cancel
    from bob_acp.engine.calls import Call
    from bob_acp.tools.base import Answer, ToolResult


class TurnStats:
    __slots__ = ("commands", "file_ops", "skills")

    def __init__(self) -> None:
        self.commands = self.file_ops = self.skills = 0

    def count(self, call: Call) -> None:
        if call.tool is None or not (call.tool.one_file or call.name == "read_skill"):
            self.commands += 1
        elif call.name == "read_skill":
            self.skills += 1
        else:
            self.file_ops += 1

    def line(self) -> str:
        return f"{self.commands} command(s) · {self.file_ops} file op(s) · {self.skills} skill(s)"


class Sink(Protocol):
    """What a turn reports, in order, from the turn's thread."""

    def text(self, chunk: str, message_id: str) -> None: ...
    def thought(self, chunk: str, message_id: str) -> None: ...
    def user_text(self, chunk: str, message_id: str) -> None: ...  # what the user added to the running turn
    def retrying(self, attempt: int, delay: float, why: str) -> None: ...
    def tool_pending(self, call: Call) -> None: ...
    # allow | allow_always | reject, or allow_project | reject_project (a rule kept: permissions.projectRules)
    def permission(self, call: Call, cancel: Cancel) -> str: ...
    def ask(self, call: Call, question: str, options: list[str], cancel: Cancel) -> Answer: ...  # (ask_user)
    def tool_running(self, call: Call) -> None: ...
    def tool_output(self, call: Call, tail: str, delta: str) -> None: ...
    def tool_terminal(self, call: Call) -> None: ...  # its output is in the editor's terminal call.terminal
    def tool_finished(self, call: Call, result: ToolResult) -> None: ...
    def plan(self, entries: list[dict[str, Any]]) -> None: ...
    def usage(self, used: int, size: int, cost: float | None) -> None: ...
    # A compression of the history: in_progress, then completed (with its summary), failed (with
    # why) or cancelled; `automatic`: started by Bob near the context window, not by /compact.
    def compaction(self, compaction_id: str, status: str, automatic: bool, summary: str = "",
                   error: str = "") -> None: ...
    def notice(self, title: str, description: str | None = None, severity: str = "warning") -> None: ...


class TurnFailed(Exception):
    """The turn failed; str(self) is the one-line error the client receives."""

    def __init__(self, line: str, stats: TurnStats):
        super().__init__(line)
        self.stats = stats
