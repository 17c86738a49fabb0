"""The bob-acp the chat talks to: a child process, one reader thread turning its frames into
events on a queue, and its log in a file whose new lines the chat can look at (retries)."""

from __future__ import annotations

import itertools
import os
import queue
import signal
import subprocess
import sys
import tempfile
import threading

import orjson

# The agent, started by this very interpreter with the current folder off the import path (a
# project's yaml.py must never run inside Bob, and a source checkout must not shadow the
# installed package), on every Python from 3.10 (-P is 3.11+).
BOOT = "import sys; del sys.path[0]; from bob_acp.cli import main; sys.exit(main())"

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, TextIO


def agent_command(config: str | None = None, options: list[str] | None = None) -> list[str]:
    """The agent's command line: `options` are the global options given before `chat`
    (`--profile full`), then the chat's own `--config`."""
    command = [sys.executable, "-c", BOOT, *(options or []), "--acp"]
    return command + (["--config", config] if config else [])


class Agent:
    def __init__(self, command: list[str], env: dict[str, str], raw: "TextIO | None"):
        # The agent's log would drown the conversation: it goes to a file, kept when something failed.
        self.log_path = tempfile.NamedTemporaryFile(prefix="bob-chat-", suffix=".log", delete=False).name
        self._log_out = open(self.log_path, "ab")
        self._log_in = open(self.log_path, "rb")
        # Its own session: the terminal's Ctrl-C is ours to turn into session/cancel, not a SIGINT
        # for the agent. If this client dies, the agent sees EOF on stdin and exits.
        self.proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._log_out,
                                     env=env, start_new_session=True)
        assert self.proc.stdin is not None and self.proc.stdout is not None  # (PIPE: for the type checker)
        self._to_agent, self._from_agent = self.proc.stdin, self.proc.stdout
        self.env = env
        self.events: queue.Queue = queue.Queue()
        self.raw = raw
        self._ids = itertools.count(1)
        self._write_lock = threading.Lock()
        threading.Thread(target=self._read, name="chat-reader", daemon=True).start()

    def _read(self) -> None:
        # Ctrl-C is the main thread's: were SIGINT delivered here, the main thread blocked in
        # readline's select() would not see it until the next key.
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
        for line in self._from_agent:
            if self.raw is not None:
                try:
                    self.raw.write(line.decode("utf-8", errors="replace"))
                    self.raw.flush()
                except (BrokenPipeError, ValueError):
                    self.raw = None
            try:
                self.events.put(orjson.loads(line))
            except orjson.JSONDecodeError:
                self.events.put({"_bad_line": line[:200]})
        self.events.put(None)

    def send(self, frame: dict) -> None:
        with self._write_lock:
            try:
                self._to_agent.write(orjson.dumps(frame) + b"\n")
                self._to_agent.flush()
            except (BrokenPipeError, ValueError, OSError):
                pass

    def request(self, method: str, params: dict) -> int:
        msg_id = next(self._ids)
        self.send({"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params})
        return msg_id

    def answer(self, request_id: "Any", result: dict) -> None:
        self.send({"jsonrpc": "2.0", "id": request_id, "result": result})

    def last_words(self, count: int = 3) -> list[str]:
        """The last lines the agent wrote to its stderr: why it ended, when it ended early."""
        try:
            with open(self.log_path, "rb") as handle:
                handle.seek(max(0, os.path.getsize(self.log_path) - 8192))
                lines = handle.read().decode("utf-8", "replace").splitlines()
        except OSError:
            return []
        return [line.strip() for line in lines if line.strip()][-count:]

    def new_log_lines(self) -> list[str]:
        """Lines the agent logged since the last call (the chat shows retries from them)."""
        data = self._log_in.read()
        return data.decode("utf-8", "replace").splitlines() if data else []

    def close(self, keep_log: bool, err: "TextIO") -> int:
        try:
            self._to_agent.close()
        except OSError:
            pass
        try:
            code = self.proc.wait(5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            code = self.proc.wait()
        self._log_out.close()
        self._log_in.close()
        if keep_log or code != 0:
            err.write(f"bob-acp's log: {self.log_path}\n")
        else:
            os.unlink(self.log_path)
        return code
