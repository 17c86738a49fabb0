"""The bash tool: `bash -c` in its own process group, watched by threads, killed as a group.

Output is kept in bounded memory: the first half of the limit, and a rolling tail of the last
half; everything in between is counted and cut, however much the command prints.
"""

from __future__ import annotations

import codecs
import collections
import os
import re
import signal
import subprocess
import threading
import time
from typing import Any, BinaryIO

from bob_acp import log as bob_log
from bob_acp import threads
from bob_acp.cancel import Cancel
from bob_acp.exceptions import Cancelled, ClientError
from bob_acp.files.workspace import Workspace
from bob_acp.processes import children
from bob_acp.sandbox import MiB, Sandbox, looks_denied, looks_offline
from bob_acp.tools import editor_terminal
from bob_acp.tools.base import LiveOutput, Tool, ToolContext, ToolResult

log = bob_log.get("bob.tools")
_live: threads.Live[int] = threads.Live()  # process group ids of running commands
PIPE_GRACE = 0.15  # after bash exits, how long a background child may keep the pipe open
# After that grace the rest of the group is killed; a process that left the group (setsid) may
# still hold the pipe, so once output has been quiet this long we stop listening.
PIPE_GIVE_UP = 0.5
READ_CHUNK = 65536
QUEUE_CHUNKS = 64


_BLANKS = re.compile(r"[ \t]+")
UNCONFINED = " (unconfined)"
SANDBOX_NOTE = ("\n[this command ran in the sandbox, which may have denied it: it can write only in the project's "
                "folders and its own /tmp; .git, .bob and AGENTS.md are read-only to it. If it needs more, call bash "
                "again with \"unconfined\": true; that asks the user.]")
TMP_NOTE = ("\n[this command ran in the sandbox, whose /tmp is its own: {paths} {are} in the machine's /tmp, which "
            "commands here cannot see. The user can move what is needed into the project; or call bash again with "
            "\"unconfined\": true, which asks the user.]")
# A path in /tmp that an error says is missing ("cat: /tmp/x: No such file or directory").
MISSING_TMP = re.compile(r"(/tmp/[^\s:'\"`]+)[^\n]*No such file or directory")
NETWORK_NOTE = ("\n[this command ran in the sandbox, which has no network (tools.sandboxNetwork: false): a connection "
                "fails there. If it needs the network, call bash again with \"unconfined\": true, which asks the "
                "user; or the user can allow the network with tools.sandboxNetwork: true.]")


def grantable(command: str) -> bool:
    """No character a person could misread in a command grant: only printable characters and
    ASCII spaces and tabs."""
    for char in command:
        if char in " \t":
            continue
        if not char.isprintable() or char.isspace():  # controls, format and separator characters
            return False
    return True


def kill_all() -> None:
    """Kill every running command's process group (shutdown)."""
    for pgid in _live.all():
        _kill_group(pgid)


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


class _Capture:
    """Head and rolling tail of a stream of text, in bounded memory."""

    def __init__(self, limit: int):
        self.head_limit = limit // 2
        self.tail_limit = limit - self.head_limit
        self.head: list[str] = []
        self.head_len = 0
        self.tail = ""
        self.cut = 0

    def add(self, text: str) -> None:
        if self.head_len < self.head_limit:
            take = text[: self.head_limit - self.head_len]
            self.head.append(take)
            self.head_len += len(take)
            text = text[len(take):]
            if not text:
                return
        self.tail += text
        if len(self.tail) > 2 * self.tail_limit:
            drop = len(self.tail) - self.tail_limit
            self.cut += drop
            self.tail = self.tail[drop:]

    def text(self) -> str:
        tail = self.tail
        cut = self.cut
        if len(tail) > self.tail_limit:
            cut += len(tail) - self.tail_limit
            tail = tail[len(tail) - self.tail_limit:]
        head = "".join(self.head)
        if cut:
            return f"{head}\n[… {cut} characters cut …]\n{tail}"
        return head + tail


class BashTool(Tool):
    name = "bash"
    kind = "execute"
    description = (
        "Run a bash command in the project's working directory and return its combined stdout and "
        "stderr and its exit code. This is your main tool: inspect files (ls, cat, grep, find), run "
        "tests and builds, use git. Commands run non-interactively with stdin at /dev/null and a time "
        "limit; start long-running processes (servers, watchers) as background jobs instead. Very long "
        "output is cut in the middle, keeping its beginning and end."
    )
    parameters = {
        "type": "object",
        "properties": {
            "command": {"type": "string", "description": "The bash command line to run."},
            "timeout": {"type": "number", "description": "Seconds before the command is killed (default 120)."},
        },
        "required": ["command"],
        "additionalProperties": False,
    }

    def title(self, args: dict[str, Any]) -> str:
        return f"bash{UNCONFINED if args.get('unconfined') is True else ''}: {args.get('command', '')}"

    def grant(self, args: dict[str, Any], ws: Workspace) -> str | None:
        """The command with runs of ASCII spaces and tabs made one space: what bash reads as the
        same words. A command holding any other control or space character (a newline runs a
        second command; a no-break or line-separator space is part of a word to bash but looks
        like a space) is never remembered: it asks every time."""
        command = args.get("command")
        if not isinstance(command, str) or not grantable(command):
            return None
        unconfined = UNCONFINED if args.get("unconfined") is True else ""
        return f"bash{unconfined}: " + _BLANKS.sub(" ", command).strip(" ")

    def run(self, args: dict[str, Any], ctx: ToolContext, cancel: Cancel) -> ToolResult:
        command = args.get("command")
        if not isinstance(command, str) or not command.strip():
            return ToolResult("error: argument 'command' must be a non-empty string", failed=True)
        if "\0" in command:
            return ToolResult("error: argument 'command' contains a NUL byte", failed=True)
        timeout = args.get("timeout", ctx.config.tools.bash.timeout)
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not 0 < timeout < 1e9:
            return ToolResult("error: argument 'timeout' must be a positive number of seconds", failed=True)
        argv, env, sandbox = ["bash", "-c", command], ctx.env, None
        if ctx.sandbox is not None and args.get("unconfined") is not True:
            refusal = ctx.sandbox.refusal()
            if refusal is not None:
                return ToolResult(refusal, failed=True)
            if ctx.sandbox.confines:  # (best-effort with nothing to confine: it runs as it is, said so)
                sandbox = ctx.sandbox
                try:
                    argv = sandbox.command(argv)
                except OSError as exc:
                    return ToolResult(f"error: the sandbox cannot run the command: {exc.strerror or exc}", failed=True)
                env = sandbox.environment(env)
        earlier, before = sandbox.before_command() if sandbox is not None else ([], {})  # (a job of an earlier one)
        kills = sandbox.memory_kills() if sandbox is not None else 0
        try:
            result = self._run(argv, env, float(timeout), ctx, cancel)
        finally:
            planted = sandbox.after_command(before) if sandbox is not None else []
        result = _confined(result, sandbox, planted, earlier)
        if sandbox is not None and sandbox.memory_kills() > kills:
            result.output += (f"\n[the session's commands reached their memory bound together "
                              f"({sandbox.memory // MiB} MiB, tools.limits.memory, /dev/shm included): "
                              f"the kernel killed {sandbox.memory_kills() - kills} of their processes]")
        return result

    def _run(self, argv: list[str], env: dict[str, Any] | None, timeout: float, ctx: ToolContext, cancel: Cancel) -> ToolResult:
        limit = ctx.config.tools.bash.outputLimit
        if ctx.client is not None and ctx.client.can_run:  # tools.clientTerminal
            try:
                terminal = ctx.client.terminal(argv, ctx.cwd, dict(os.environ if env is None else env), limit, cancel)
            except ClientError as exc:  # (no answer in time: said, not run elsewhere behind the user's back)
                return ToolResult(f"error: {exc}", failed=True)
            if terminal is not None:
                if ctx.show_terminal is not None:
                    ctx.show_terminal(terminal.id)
                return editor_terminal.run(terminal, timeout, limit, cancel)
        label = ctx.owner or children.new_label("bash")
        try:
            proc = children.spawn(argv, label, env=env, cwd=ctx.cwd, stdin=subprocess.DEVNULL,
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        except OSError as exc:
            return ToolResult(f"error: cannot start bash: {exc.strerror or exc}", failed=True)
        # Registered once started: kill_all() (shutdown) kills the groups it knows; one that
        # started in between is ended by the supervisor, which ends everything when Bob does.
        _live.add(proc.pid)
        try:
            if cancel.is_set():
                raise Cancelled()
            return _Watch(proc, limit, timeout, cancel, ctx.live).run()
        finally:
            _kill_group(proc.pid)  # whatever the command left running in its group dies with it
            _live.discard(proc.pid)
            children.settle(proc)
            children.ended(proc)
            if ctx.owner is None:  # a call of no session: what left its group ends with it
                children.end_orphans(label)


def _confined(result: ToolResult, sandbox: Sandbox | None, planted: list[str], earlier: list[str]) -> ToolResult:
    """A result of a command the sandbox ran, said so: what to do when it denied it, that the
    network is off when it looks like the network failed, and what it created that Bob protects."""
    if sandbox is None:
        return result
    result.sandboxed = True
    if result.failed and not sandbox.network and looks_offline(result.output):
        result.output += NETWORK_NOTE
    elif result.failed and looks_denied(result.output):
        result.output += SANDBOX_NOTE
    elif result.failed and sandbox.own_tmp and "No such file or directory" in result.output:
        result.output += _host_tmp_note(result.output)
    if planted:
        result.output += (f"\n[⚠️ this command made {', '.join(planted)}: a repository or an AGENTS.md runs code or "
                          "instructs Bob later, so what it created was taken out of the project (the user can look "
                          "at it there and put it back)]")
    if earlier:
        result.output += (f"\n[⚠️ since the previous command, while a job it left running ran: {', '.join(earlier)}]")
    return result


def _host_tmp_note(output: str) -> str:
    """The note for paths an error says are missing that are in the machine's /tmp ("" when none
    is). (Only whether the name exists is asked, without following a link at its end: nothing is
    opened or read.)"""
    found = [path for path in list(dict.fromkeys(MISSING_TMP.findall(output[-64 * 1024:])))[:8] if os.path.lexists(path)]
    if not found:
        return ""
    return TMP_NOTE.format(paths=", ".join(found), are="are" if len(found) > 1 else "is")


class _Channel:
    """A bounded queue between the watcher threads and the turn's thread. A full channel makes
    the output thread wait (so a command printing faster than we keep up waits on its pipe and
    memory stays flat); close() releases it; urgent items (exit, cancel) never wait."""

    def __init__(self, size: int):
        self._items: collections.deque[Any] = collections.deque()
        self._size = size
        self._cond = threading.Condition()
        self._closed = False

    def put(self, item: tuple[Any, ...]) -> bool:
        with self._cond:
            while len(self._items) >= self._size and not self._closed:
                self._cond.wait()
            if self._closed:
                return False
            self._items.append(item)
            self._cond.notify_all()
            return True

    def put_urgent(self, item: tuple[Any, ...]) -> None:
        with self._cond:
            self._items.append(item)
            self._cond.notify_all()

    def get(self, timeout: float | None) -> tuple[Any, ...] | None:
        """The next item, or None when `timeout` seconds pass first."""
        with self._cond:
            if not self._items and not self._cond.wait_for(lambda: self._items, timeout):
                return None
            item = self._items.popleft()
            self._cond.notify_all()
            return item

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()


class _Watch:
    """One running command: its output, its exit, the deadline, the cancel, all through one
    channel the turn's thread waits on; the next timed event bounds each wait."""

    def __init__(self, proc: subprocess.Popen[bytes], limit: int, timeout: float, cancel: Cancel, live: LiveOutput | None):
        self.proc = proc
        self.capture = _Capture(limit)
        self.timeout = timeout
        self.cancel = cancel
        self.live = live
        self.events = _Channel(QUEUE_CHUNKS)

    def run(self) -> ToolResult:
        threads.start(_pump, "bob-bash-output", self.proc.stdout, self.events)
        threads.start(lambda: self.events.put_urgent(("exit", self.proc.wait())), "bob-bash-exit")
        unsubscribe = self.cancel.subscribe(lambda: self.events.put_urgent(("cancel", None)))
        try:
            return self._collect()
        finally:
            unsubscribe()
            self.events.close()

    def _collect(self) -> ToolResult:
        deadline = time.monotonic() + self.timeout
        exit_code: int | None = None
        eof = False
        grace_until = give_up_at = None
        while not eof or exit_code is None:
            now = time.monotonic()
            if now >= deadline:
                _kill_group(self.proc.pid)
                return self._finish(f"\n[timed out after {self.timeout:g} s: process group killed]", None, "SIGKILL")
            if grace_until is not None and now >= grace_until:
                _kill_group(self.proc.pid)  # a background child still holds the pipe: end it
                grace_until, give_up_at = None, now + PIPE_GIVE_UP
            if give_up_at is not None and now >= give_up_at:
                log.info("bash: output pipe still held after the command ended; not waiting for it")
                break
            waits = [t - now for t in (deadline, grace_until, give_up_at) if t is not None]
            due = self.live.due() if self.live is not None else None
            if due is not None:
                waits.append(due)
            item = self.events.get(max(0.0, min(waits)))
            if item is None:
                if self.live is not None:
                    self.live.flush()
                continue
            kind, value = item
            if kind == "cancel":
                _kill_group(self.proc.pid)
                raise Cancelled()
            if kind == "data":
                self.capture.add(value)
                if self.live is not None:
                    self.live.add(value)
                if give_up_at is not None:
                    give_up_at = time.monotonic() + PIPE_GIVE_UP  # still draining: keep reading
            elif kind == "eof":
                eof = True
            else:
                exit_code = value
                if not eof:
                    grace_until = time.monotonic() + PIPE_GRACE
        if self.live is not None:
            self.live.flush(force=True)
        signal_name = None
        if exit_code is not None and exit_code < 0:
            try:
                signal_name = signal.Signals(-exit_code).name
            except ValueError:
                signal_name = f"signal {-exit_code}"
        output = self.capture.text()
        if output and not output.endswith("\n"):
            output += "\n"
        return ToolResult(f"{output}[exit code: {exit_code}]", failed=exit_code != 0, exit_code=exit_code,
                          signal=signal_name)

    def _finish(self, note: str, exit_code: int | None, signal_name: str | None) -> ToolResult:
        if self.live is not None:
            self.live.flush(force=True)
        return ToolResult(self.capture.text() + note, failed=True, exit_code=exit_code, signal=signal_name)


def _pump(stream: BinaryIO, events: _Channel) -> None:
    """Read the command's output until EOF; this thread alone closes the pipe."""
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    fd = stream.fileno()
    try:
        while True:
            data = os.read(fd, READ_CHUNK)
            if not data:
                break
            text = decoder.decode(data)
            if text and not events.put(("data", text)):
                return
        rest = decoder.decode(b"", final=True)
        if rest:
            events.put(("data", rest))
        events.put(("eof", None))
    except OSError:
        events.put(("eof", None))
    finally:
        stream.close()


class SandboxedBashTool(BashTool):
    """bash where commands run in the sandbox (tools.sandbox): the model may ask to run one
    unconfined, which always asks the user; "always" then covers that exact command alone."""

    def exact(self, args: dict[str, Any]) -> bool:
        return args.get("unconfined") is True

    description = BashTool.description + (
        " Commands run in a sandbox: they can write only inside the project's folders and a /tmp of their own"
        " (read_file and write_file see the real /tmp), .git, .bob and AGENTS.md are read-only to them, and"
        " they may have no network. When a command fails because the sandbox denied it, you may run it"
        " again with unconfined: true; the user is asked first.")
    parameters = {
        "type": "object",
        "properties": {
            **BashTool.parameters["properties"],
            "unconfined": {"type": "boolean", "description": "Run outside the sandbox (asks the user)."},
        },
        "required": ["command"],
        "additionalProperties": False,
    }
