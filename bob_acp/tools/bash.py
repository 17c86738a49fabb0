"""The bash tool: `bash -c` in its own process group, watched by threads, killed as a group.

Output is kept in bounded memory: the first half of the limit, and a rolling tail of the last
half; everything in between is counted and cut, however much the command prints.
"""

from __future__ import annotations

import codecs
import os
import queue
import signal
import subprocess
import threading
import time

import structlog

from bob_acp.exceptions import Cancelled
from bob_acp.tools.base import Tool, ToolContext, ToolResult

log = structlog.get_logger("bob.tools")
_live: set[int] = set()  # process group ids of running commands
_live_lock = threading.Lock()
PIPE_GRACE = 0.15  # after bash exits, how long a background child may keep the pipe open
# After that grace the rest of the group is killed; a process that left the group (setsid) may
# still hold the pipe, so once output has been quiet this long we stop listening.
PIPE_GIVE_UP = 0.5
READ_CHUNK = 65536
QUEUE_CHUNKS = 64


def kill_all() -> None:
    """Kill every running command's process group (shutdown)."""
    with _live_lock:
        groups = list(_live)
    for pgid in groups:
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

    def title(self, args: dict) -> str:
        return f"bash: {args.get('command', '')}"

    def run(self, args: dict, ctx: ToolContext, cancel: threading.Event) -> ToolResult:
        command = args.get("command")
        if not isinstance(command, str) or not command.strip():
            return ToolResult("error: argument 'command' must be a non-empty string", failed=True)
        timeout = args.get("timeout", ctx.config.tools.bash.timeout)
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0:
            return ToolResult("error: argument 'timeout' must be a positive number of seconds", failed=True)
        try:
            proc = subprocess.Popen(
                ["bash", "-c", command], cwd=ctx.cwd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT, start_new_session=True, close_fds=True,
            )
        except OSError as exc:
            return ToolResult(f"error: cannot start bash: {exc}", failed=True)
        with _live_lock:
            _live.add(proc.pid)
        try:
            return self._watch(proc, ctx.config.tools.bash.outputLimit, float(timeout), cancel)
        finally:
            _kill_group(proc.pid)  # whatever the command left running in its group dies with it
            with _live_lock:
                _live.discard(proc.pid)
            proc.wait()

    def _watch(self, proc: subprocess.Popen, limit: int, timeout: float, cancel: threading.Event) -> ToolResult:
        # Bounded: a command printing faster than we keep up waits on its pipe, memory stays flat.
        events: queue.Queue = queue.Queue(maxsize=QUEUE_CHUNKS)
        stopped = threading.Event()
        threading.Thread(target=_pump, args=(proc.stdout, events, stopped), name="bob-bash-output", daemon=True).start()
        threading.Thread(target=lambda: _put(events, ("exit", proc.wait()), stopped), name="bob-bash-exit",
                         daemon=True).start()
        try:
            return self._collect(proc, events, limit, timeout, cancel)
        finally:
            stopped.set()

    def _collect(self, proc, events: queue.Queue, limit: int, timeout: float, cancel: threading.Event) -> ToolResult:
        capture = _Capture(limit)
        deadline = time.monotonic() + timeout
        exit_code: int | None = None
        eof = False
        grace_until = give_up_at = None
        while not eof or exit_code is None:
            if cancel.is_set():
                _kill_group(proc.pid)
                raise Cancelled()
            now = time.monotonic()
            if now >= deadline:
                _kill_group(proc.pid)
                return ToolResult(capture.text() + f"\n[timed out after {timeout:g} s: process group killed]", failed=True)
            if grace_until is not None and now >= grace_until:
                _kill_group(proc.pid)  # a background child still holds the pipe: end it
                grace_until, give_up_at = None, now + PIPE_GIVE_UP
            if give_up_at is not None and now >= give_up_at:
                log.info("bash: output pipe still held after the command ended; not waiting for it")
                break
            try:
                kind, value = events.get(timeout=0.05)
            except queue.Empty:
                continue
            if kind == "data":
                capture.add(value)
                if give_up_at is not None:
                    give_up_at = time.monotonic() + PIPE_GIVE_UP  # still draining: keep reading
            elif kind == "eof":
                eof = True
            else:
                exit_code = value
                if not eof:
                    grace_until = time.monotonic() + PIPE_GRACE
        output = capture.text()
        if output and not output.endswith("\n"):
            output += "\n"
        return ToolResult(f"{output}[exit code: {exit_code}]", failed=exit_code != 0)


def _put(events: queue.Queue, item: tuple, stopped: threading.Event) -> bool:
    """Queue an item unless the turn stopped listening; False once it has."""
    while not stopped.is_set():
        try:
            events.put(item, timeout=0.1)
            return True
        except queue.Full:
            continue
    return False


def _pump(stream, events: queue.Queue, stopped: threading.Event) -> None:
    """Read the command's output until EOF; this thread alone closes the pipe."""
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    fd = stream.fileno()
    try:
        while True:
            data = os.read(fd, READ_CHUNK)
            if not data:
                break
            text = decoder.decode(data)
            if text and not _put(events, ("data", text), stopped):
                return
        rest = decoder.decode(b"", final=True)
        if rest:
            _put(events, ("data", rest), stopped)
        _put(events, ("eof", None), stopped)
    except OSError:
        _put(events, ("eof", None), stopped)
    finally:
        stream.close()
