"""An MCP server started as a child process: stdin and stdout for the protocol (through Bob's
own JSON-RPC endpoint), stderr to Bob's log at a bounded rate."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
from typing import TYPE_CHECKING, Any

from bob_acp import jsontext
from bob_acp.jsonrpc.streams import Writer
from bob_acp.mcp.connection import EndpointConnection, closed, opened
from bob_acp.processes import children

if TYPE_CHECKING:
    from bob_acp.log import Logger

STDERR_LINES, STDERR_WINDOW, STDERR_LINE = 100, 10.0, 2000  # a server's stderr in the log

class StdioConnection(EndpointConnection):
    """A server started as a child process in its own process group (so no process of it
    outlives its session), stdin and stdout for the protocol, stderr to Bob's log."""

    def __init__(self, name: str, command: str, args: list[str], env: dict[str, Any], cwd: str, log: Logger):
        self.name = name
        self._log = log
        self._closing = False
        self._label = children.new_label("mcp")
        self.proc = children.spawn([command, *args], self._label, env=env, stdin=subprocess.PIPE,
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=cwd)
        # (PIPE: each is there; named, so the type checker knows)
        assert self.proc.stdin is not None and self.proc.stdout is not None and self.proc.stderr is not None
        self._stdin, self._stdout, self._stderr = self.proc.stdin, self.proc.stdout, self.proc.stderr
        self._writer = Writer(self._stdin.fileno(), on_broken=self._gone)
        self._endpoint = self.endpoint_for(self._writer, log, self)
        self._served = threading.Thread(target=self._serve, name=f"bob-mcp-{name}", daemon=True)
        self._served.start()
        threading.Thread(target=self._drain_stderr, name=f"bob-mcp-{name}-stderr", daemon=True).start()
        opened(self)

    def _serve(self) -> None:
        self._endpoint.serve(self._stdout, drain_timeout=0.1)

    def _gone(self) -> None:
        self._endpoint.stop()

    def _drain_stderr(self) -> None:
        """The server's stderr, to the log at a bounded rate (a chatty server cannot fill the
        log or the disk): at most STDERR_LINES lines of STDERR_LINE characters per
        STDERR_WINDOW seconds, and a line saying how many were left out."""
        import time

        window_start, logged, dropped = time.monotonic(), 0, 0
        stream = self._stderr
        while True:
            raw = stream.readline(STDERR_LINE * 4)
            if not raw:
                break
            now = time.monotonic()
            if now - window_start >= STDERR_WINDOW:
                if dropped:
                    self._log.info(f"[mcp] {self.name}: {dropped} stderr line(s) not logged "
                                   f"(more than {STDERR_LINES} in {STDERR_WINDOW:g} s)")
                window_start, logged, dropped = now, 0, 0
            if logged >= STDERR_LINES:
                dropped += 1
                continue
            line = jsontext.clean(raw.decode("utf-8", "replace").rstrip("\n"))[:STDERR_LINE]
            if line:
                logged += 1
                self._log.info(f"[mcp] {self.name}: {line}")
        if dropped:
            self._log.info(f"[mcp] {self.name}: {dropped} stderr line(s) not logged")

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None and not self._endpoint.closed

    def close(self) -> None:
        """Close stdin, give the server a moment, then end its whole process group."""
        if self._closing:
            return
        self._closing = True
        try:
            self._stdin.close()
        except OSError:
            pass
        self._endpoint.stop()
        for sig, grace in ((None, 0.2), (signal.SIGTERM, 0.5), (signal.SIGKILL, 2.0)):
            if sig is not None:
                try:
                    os.killpg(self.proc.pid, sig)
                except (ProcessLookupError, PermissionError):
                    pass
            try:
                self.proc.wait(grace)
                break
            except subprocess.TimeoutExpired:
                continue
        try:  # children it left in its group go too
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        if self.proc.poll() is not None:
            children.ended(self.proc)
        children.end_orphans(self._label)  # and those that left its group
        self._writer.close(0.1)
        closed(self)
