"""What every tool is, and what it gives back.

A tool never fails the turn: bad arguments, a missing file or a non-zero exit are a ToolResult
with failed=True that the model reads. Only Cancelled escapes (the turn was cancelled while the
tool ran; the tool has already killed whatever it started).
"""

from __future__ import annotations

import collections
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Iterable, NamedTuple

from bob_acp import threads
from bob_acp.cancel import Cancel
from bob_acp.exceptions import Cancelled
from bob_acp.files.workspace import Workspace
from bob_acp.tools.client import Client

if TYPE_CHECKING:
    from bob_acp.config import Config
    from bob_acp.sandbox import Sandbox


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
    exit_code: int | None = None  # bash: the command's exit status
    signal: str | None = None  # bash: the signal that ended it (SIGKILL on timeout)
    sandboxed: bool = False  # bash: it ran inside the sandbox (tools.sandbox)
    plan: list[Any] | None = None  # update_plan: the whole plan, for the client (ACP PlanEntry objects)


@dataclass
class Location:
    path: str  # absolute, shown as is (already safe to encode)
    line: int | None = None


class Answer(NamedTuple):
    """What a question to the user came back with, in words for the model."""

    text: str
    failed: bool = False  # no answer could be had (no way to ask here, or the client failed)


@dataclass
class ToolContext:
    workspace: Workspace  # the session's folders (commands run in its cwd)
    config: Config
    skills: dict[str, Any] = field(default_factory=dict)  # name -> bob_acp.context.skills.Skill
    env: dict[str, Any] | None = None  # the environment children start with (None: Bob's own)
    live: "LiveOutput | None" = None  # where a running command reports its output so far
    owner: str | None = None  # the session's label on the processes its commands start (bob_acp.processes.children)
    sandbox: Sandbox | None = None  # where bash runs confined (None: tools.sandbox off)
    client: Client | None = None  # the editor's files and terminals (None: the disk and Bob's own processes)
    show_terminal: Callable[[str], None] | None = None  # tells the client a call's output is in its terminal
    confine: bool = False  # the call runs unasked because it stays in the project: its writes never leave it
    editor_texts: dict[str, Any] = field(default_factory=dict)  # path -> what the editor gave for it (one read a call)
    editor_written: dict[str, str] = field(default_factory=dict)  # path -> what was written through the editor
    ask: Callable[[str, list[str]], Answer] | None = None  # the user asked a question (ask_user), where a client can

    @property
    def cwd(self) -> str:
        return self.workspace.cwd


class Tool:
    name: str = ""
    kind: str = "execute"  # ACP ToolKind: execute | read | edit
    needs_permission: bool = True
    # What a call may do to files, declared here once (the checkpoints, the permission modes and
    # the turn's counts read it): whether it may change any (a checkpoint window is opened
    # around it), and whether it works on the one file its `path` names (permissions.mode
    # allow-edits runs it unasked inside the project; a checkpoint records that file alone).
    changes_files: bool = True
    one_file: bool = False
    description: str = ""
    parameters: dict[str, Any] = {}

    def spec(self) -> dict[str, Any]:
        return {"name": self.name, "description": self.description, "parameters": self.parameters}

    def title(self, args: dict[str, Any]) -> str:
        return self.name

    def title_in(self, args: dict[str, Any], ws: Workspace) -> str:
        """The title of a call in a session's folders (what the user is asked about)."""
        return self.title(args)

    def locations(self, args: dict[str, Any], ws: Workspace) -> list[Location]:
        """The files the call touches (ACP `locations`)."""
        return []

    @property
    def grant_key(self) -> str:
        """What an allow_always for the whole tool remembers (its name; an MCP tool's server and
        own name, so a grant never passes to another tool given the same display name)."""
        return self.name

    def grant(self, args: dict[str, Any], ws: Workspace) -> str | None:
        """What an allow_always scoped to the call (permissions.allowAlways: command) remembers;
        None: this call can never be remembered (it asks every time)."""
        return self.name

    def exact(self, args: dict[str, Any]) -> bool:
        """Whether an allow_always of this call covers this exact call alone, whatever
        permissions.allowAlways says (an unconfined command: never every bash call)."""
        return False

    def in_project(self, args: dict[str, Any], ws: Workspace) -> bool:
        """True when the call touches only this project's own files, under any of the workspace's
        roots (permissions.mode allow-edits runs such calls without asking)."""
        return False

    def preview(self, args: dict[str, Any], ctx: ToolContext) -> Diff | None:
        """The change the call would make, computed without making it (shown before approval)."""
        return None

    def run(self, args: dict[str, Any], ctx: ToolContext, cancel: Cancel) -> ToolResult:
        raise NotImplementedError


class ToolSet:
    """The tools one conversation offers, in the order the model sees them."""

    def __init__(self, tools: Iterable[Tool]):
        self.tools: tuple[Tool, ...] = tuple(tools)
        self._by_name = {tool.name: tool for tool in self.tools}
        self._specs = [tool.spec() for tool in self.tools]

    def get(self, name: str) -> Tool | None:
        return self._by_name.get(name)

    def specs(self) -> list[dict[str, Any]]:
        return self._specs

    def names(self) -> list[str]:
        return [tool.name for tool in self.tools]

    def plus(self, more: Iterable[Tool]) -> "ToolSet":
        return ToolSet(self.tools + tuple(more))

    def current(self, cancel: Cancel | None = None) -> "ToolSet":
        """The tools as they are now (a set whose members come and go returns a fresh one;
        finding out may be waited for, which `cancel` ends)."""
        return self


def run_in_worker(work: Callable[[Cancel], ToolResult], cancel: Cancel, time_limit: float | None = None,
                  settle_on_cancel: float = 0.0, what: str = "the call") -> ToolResult:
    """Run `work(cancel)` on a worker thread that reports through a callback queue; the turn's
    thread waits on that queue, woken at once by a cancel (no polling).

    `time_limit`: past it the call is a failed result (a read stuck on a dead file system).
    `settle_on_cancel`: how long a cancelled call still waits for the worker, so that a change
    the worker was committing lands before the turn answers (the worker itself checks the
    cancel before it commits).
    """
    results: collections.deque[Any] = collections.deque()
    ready = threading.Condition()

    def report(item: tuple[Any, ...]) -> None:
        with ready:
            results.append(item)
            ready.notify_all()

    def worker() -> None:
        try:
            report(("ok", work(cancel)))
        except BaseException as exc:  # reported to the turn's thread, which re-raises it
            report(("raised", exc))

    unsubscribe = cancel.subscribe(lambda: report(("cancelled", None)))
    try:
        threads.start(worker, "bob-tool-worker")
    except threads.ThreadLimit:
        unsubscribe()
        raise
    deadline = None if time_limit is None else time.monotonic() + time_limit
    try:
        with ready:
            while True:
                done = [item for item in results if item[0] != "cancelled"]
                if done:
                    kind, value = done[0]
                    break
                if results:  # cancelled: give the worker a moment to finish or abandon its commit
                    end = time.monotonic() + settle_on_cancel
                    while not any(item[0] != "cancelled" for item in results) and time.monotonic() < end:
                        ready.wait(end - time.monotonic())
                    raise Cancelled()
                timeout = None if deadline is None else deadline - time.monotonic()
                if timeout is not None and timeout <= 0:
                    return ToolResult(f"error: {what} took longer than {time_limit:g} s; given up", failed=True)
                ready.wait(timeout)
    finally:
        unsubscribe()
    if kind == "ok":
        return value
    raise value


class LiveOutput:
    """A running command's output as the client sees it while it runs: at most `per_second`
    reports, only when there is new output, each bounded: the latest tail (within `limit`
    characters) and the text new since the last report (within `delta_limit`, its start cut
    with a marker), so a command printing a gigabyte costs bounded bytes per report."""

    def __init__(self, report: Callable[[str, str], None], limit: int, per_second: float = 4.0,
                 delta_limit: int = 64 * 1024, clock: Callable[[], float] = time.monotonic):
        self._report = report
        self._limit = limit
        self._delta_limit = delta_limit
        self._period = 1.0 / per_second
        self._clock = clock
        self._tail = ""
        self._delta: list[str] = []
        self._delta_len = 0
        self._skipped = 0
        self._last = -self._period

    def add(self, text: str) -> None:
        if not text:
            return
        self._tail = (self._tail + text)[-self._limit:]
        self._delta.append(text)
        self._delta_len += len(text)
        if self._delta_len > 2 * self._delta_limit:
            joined = "".join(self._delta)
            self._skipped += len(joined) - self._delta_limit
            self._delta = [joined[-self._delta_limit:]]
            self._delta_len = self._delta_limit
        self.flush(force=False)

    def due(self) -> float | None:
        """Seconds until the pending output may be reported; None when nothing is pending."""
        if not self._delta:
            return None
        return max(0.0, self._last + self._period - self._clock())

    def flush(self, force: bool = False) -> None:
        if not self._delta:
            return
        now = self._clock()
        if not force and now - self._last < self._period:
            return
        delta = "".join(self._delta)
        if len(delta) > self._delta_limit:
            self._skipped += len(delta) - self._delta_limit
            delta = delta[-self._delta_limit:]
        if self._skipped:
            delta = f"[… {self._skipped} characters not shown …]\r\n" + delta
            self._skipped = 0
        self._delta, self._delta_len, self._last = [], 0, now
        self._report(self._tail, delta)
