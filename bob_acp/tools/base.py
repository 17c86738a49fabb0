"""What every tool is, and what it gives back.

A tool never fails the turn: bad arguments, a missing file or a non-zero exit are a ToolResult
with failed=True that the model reads. Only Cancelled escapes (the turn was cancelled while the
tool ran; the tool has already killed whatever it started).
"""

from __future__ import annotations

import queue
import threading
from dataclasses import dataclass, field
from typing import Any, Callable

from bob_acp.exceptions import Cancelled


@dataclass
class Diff:
    path: str  # absolute
    old_text: str | None  # None for a new file
    new_text: str


@dataclass
class ToolResult:
    output: str
    failed: bool = False
    diff: Diff | None = None


@dataclass
class ToolContext:
    cwd: str  # the session's absolute working directory
    config: Any  # bob_acp.config.Config
    skills: dict = field(default_factory=dict)  # name -> bob_acp.skills.Skill


class Tool:
    name: str = ""
    kind: str = "execute"  # ACP ToolKind: execute | read | edit
    needs_permission: bool = True
    description: str = ""
    parameters: dict = {}

    def spec(self) -> dict:
        return {"name": self.name, "description": self.description, "parameters": self.parameters}

    def title(self, args: dict) -> str:
        return self.name

    def locations(self, args: dict, cwd: str) -> list[str]:
        """Absolute paths the call touches (ACP `locations`)."""
        return []

    def run(self, args: dict, ctx: ToolContext, cancel: threading.Event) -> ToolResult:
        raise NotImplementedError


def run_in_worker(work: Callable[[], ToolResult], cancel: threading.Event, poll: float = 0.05) -> ToolResult:
    """Run `work` on a worker thread that reports through a callback queue; the calling (turn)
    thread waits on that queue and gives up with Cancelled as soon as `cancel` is set."""
    results: queue.SimpleQueue = queue.SimpleQueue()

    def worker() -> None:
        try:
            results.put((True, work()))
        except BaseException as exc:  # reported to the turn's thread, which re-raises it
            results.put((False, exc))

    threading.Thread(target=worker, name="bob-tool-worker", daemon=True).start()
    while True:
        try:
            ok, value = results.get(timeout=poll)
        except queue.Empty:
            if cancel.is_set():
                raise Cancelled() from None
            continue
        if ok:
            return value
        raise value
