"""The bob-acp the chat talks to: a child process spoken to through the JSON-RPC endpoint (the
one Bob serves ACP with), its frames turned into events on a queue, its log in a file."""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import tempfile
import threading
from typing import Any

from bob_acp.acp import protocol as p
from bob_acp.jsonrpc.endpoint import Endpoint, Route, Sent
from bob_acp.jsonrpc.streams import Writer

# The agent, started by this very interpreter with the current folder off the import path (a
# project's yaml.py must never run inside Bob, and a source checkout must not shadow the
# installed package), on every Python from 3.10 (-P is 3.11+).
BOOT = "import sys; del sys.path[0]; from bob_acp.cli import main; sys.exit(main())"

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import IO, TextIO


def agent_command(config: str | None = None, options: list[str] | None = None) -> list[str]:
    """The agent's command line: `options` are the global options given before `chat`
    (`--profile full`), then the chat's own `--config`."""
    command = [sys.executable, "-c", BOOT, *(options or []), "--acp"]
    return command + (["--config", config] if config else [])


class _Quiet:
    """The endpoint's log: the chat has none of its own (the agent's log is kept in a file)."""

    def debug(self, event: str, **fields: object) -> None:
        pass

    info = warning = error = debug


class _Tee:
    """The agent's output as the endpoint reads it, each piece also written to `raw` (--json)."""

    def __init__(self, stream: IO[bytes], raw: TextIO):
        self._stream = stream
        self._raw: TextIO | None = raw

    def readline(self, size: int = -1) -> bytes:
        chunk = self._stream.readline(size)
        if self._raw is not None and chunk:
            try:
                self._raw.write(chunk.decode("utf-8", errors="replace"))
                self._raw.flush()
            except (BrokenPipeError, ValueError):
                self._raw = None
        return chunk


class Agent:
    """The agent as a JSON-RPC peer, through the same endpoint Bob serves ACP with: updates,
    retries and permission questions arrive as events on a queue the chat's main thread takes
    them from (a question waits there for its answer); the chat's requests are Pending answers."""

    def __init__(self, command: list[str], env: dict[str, str], raw: TextIO | None):
        # The agent's log would drown the conversation: it goes to a file, kept when something failed.
        self.log_path = tempfile.NamedTemporaryFile(prefix="bob-chat-", suffix=".log", delete=False).name
        self._log_out = open(self.log_path, "ab")
        # Its own session: the terminal's Ctrl-C is ours to turn into session/cancel, not a SIGINT
        # for the agent. If this client dies, the agent sees EOF on stdin and exits.
        self.proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._log_out,
                                     env=env, start_new_session=True)
        assert self.proc.stdin is not None and self.proc.stdout is not None  # (PIPE: for the type checker)
        self._to_agent, self._from_agent = self.proc.stdin, self.proc.stdout
        self.env = env
        self.events: queue.Queue[Any] = queue.Queue()
        put = self.events.put
        # Updates and retries in order with the answers (handled on the reader, before a later
        # answer settles): a prompt's last update is shown before its stop reason.
        self.endpoint = Endpoint(Writer(self._to_agent.fileno()),
                                 {p.REQUEST_PERMISSION: Route(self._question, worker=True),
                                  p.ELICITATION_CREATE: Route(self._form, worker=True)},
                                 {p.SESSION_UPDATE: lambda params: put(("update", params)),
                                  p.RETRY_EVENT: lambda params: put(("retry", params))},
                                 _Quiet(), in_order=frozenset({p.SESSION_UPDATE, p.RETRY_EVENT}))
        stream: IO[bytes] = self._from_agent if raw is None else _Tee(self._from_agent, raw)  # type: ignore[assignment]
        threading.Thread(target=self._serve, args=(stream,), name="chat-endpoint", daemon=True).start()

    def _serve(self, stream: IO[bytes]) -> None:
        # Ctrl-C is the main thread's: were SIGINT delivered to the endpoint's threads (they
        # inherit this mask), the main thread blocked in readline's select() would not see it.
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
        self.endpoint.serve(stream, drain_timeout=0.1)
        self.events.put(("end", None))

    def _question(self, params: dict[str, Any]) -> dict[str, Any]:
        """A permission question: to the main thread, and its answer back (on a worker thread)."""
        answer: queue.Queue[Any] = queue.Queue(maxsize=1)
        self.events.put(("question", params, answer))
        return answer.get()

    def _form(self, params: dict[str, Any]) -> dict[str, Any]:
        """A question of the agent's (ask_user, "what instead?"): to the main thread, as a permission is."""
        answer: queue.Queue[Any] = queue.Queue(maxsize=1)
        self.events.put(("form", params, answer))
        return answer.get()

    def request(self, method: str, params: dict[str, Any]) -> Sent:
        """Send a request; ("answer", it) comes on the queue once it is settled."""
        sent = self.endpoint.request(method, params)
        sent.add_done_callback(lambda settled: self.events.put(("answer", settled)))
        return sent

    def ended(self, wait: float) -> bool:
        """Whether the agent's process has ended, given up to `wait` seconds (a request that
        could not even be written found its input closed: it is ending)."""
        try:
            self.proc.wait(wait)
        except subprocess.TimeoutExpired:
            return False
        return True

    def notify(self, method: str, params: dict[str, Any]) -> None:
        self.endpoint.notify(method, params)

    def last_words(self, count: int = 3) -> list[str]:
        """The last lines the agent wrote to its stderr: why it ended, when it ended early."""
        try:
            with open(self.log_path, "rb") as handle:
                handle.seek(max(0, os.path.getsize(self.log_path) - 8192))
                lines = handle.read().decode("utf-8", "replace").splitlines()
        except OSError:
            return []
        return [line.strip() for line in lines if line.strip()][-count:]

    def close(self, keep_log: bool, err: "TextIO") -> int:
        try:
            self._to_agent.close()
        except OSError:
            pass
        self.endpoint.stop()
        try:
            code = self.proc.wait(5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            code = self.proc.wait()
        self._log_out.close()
        if keep_log or code != 0:
            err.write(f"bob-acp's log: {self.log_path}\n")
        else:
            os.unlink(self.log_path)
        return code
