"""The client port (bob_acp.tools.client) over ACP: the editor's files (`tools.clientFs`, with
the client's `fs` capabilities) and its terminals (`tools.clientTerminal`, with `terminal`).

Reads go through `fs/read_text_file`, so the model sees an unsaved buffer; writes through
`fs/write_text_file`, so Bob's edits land in the editor (its review, its undo). A read the editor
cannot give falls back to the disk (the reason in the log); a write it refuses is a failed
result. Commands run with `terminal/create` and show live in the tool call; a terminal the editor
cannot create makes the call run in Bob's own process instead. A cancel stops every wait at once;
the request is then withdrawn (`$/cancel_request`, with `acp.cancelRequest`).
"""

from __future__ import annotations

import threading
from typing import Any, Callable

from bob_acp import threads
from bob_acp.cancel import Cancel
from bob_acp.exceptions import Cancelled, ClientError, ClientTimeout
from bob_acp.jsonrpc.endpoint import PeerError, Sent
from bob_acp.jsontext import mapping
from bob_acp.tools.client import TerminalExit, TerminalOutput

READ, WRITE = "fs/read_text_file", "fs/write_text_file"
CREATE, OUTPUT, WAIT, KILL, RELEASE = ("terminal/create", "terminal/output", "terminal/wait_for_exit",
                                       "terminal/kill", "terminal/release")
CLEANUP_WAIT = 5.0  # seconds a kill or release (sent after a cancel) is waited for, off the turn's thread

Ask = Callable[[str, dict[str, Any], Cancel, "float | None"], Sent]


class EditorClient:
    """One session's way to the editor's files and terminals."""

    def __init__(self, ask: Ask, log: object, session_id: str, can_read: bool, can_write: bool, can_run: bool,
                 hidden: tuple[str, ...] = (), within: float = 60.0):
        self._ask_client = ask
        self._within = within  # seconds the editor has to answer (acp.clientTimeout)
        self._log = log
        self._sid = session_id
        self.can_read = can_read
        self.can_write = can_write
        self.can_run = can_run
        self._hidden = hidden  # variables a terminal must not inherit from the editor (keys)

    # ---- files ---------------------------------------------------------------------------------

    def read(self, path: str, cancel: Cancel, line: int | None = None, limit: int | None = None) -> str | None:
        if not self.can_read:
            return None
        params: dict[str, Any] = {"sessionId": self._sid, "path": path}
        if line is not None:
            params["line"] = line
        if limit is not None:
            params["limit"] = limit
        return self._answered(READ, params, cancel, "content", f"{READ} {path}", "reading the disk instead")

    def write(self, path: str, content: str, cancel: Cancel) -> None:
        self.ask(WRITE, {"sessionId": self._sid, "path": path, "content": content}, cancel)

    # ---- terminals -----------------------------------------------------------------------------

    def terminal(self, argv: list[str], cwd: str, env: dict[str, str], output_limit: int,
                 cancel: Cancel) -> EditorTerminal | None:
        if not self.can_run:
            return None
        variables = [{"name": name, "value": value} for name, value in env.items() if name not in self._hidden]
        # The editor's own environment may hold the model's key: blank it, as Bob's tools never see it.
        variables += [{"name": name, "value": ""} for name in self._hidden]
        params = {"sessionId": self._sid, "command": argv[0], "args": argv[1:], "env": variables, "cwd": cwd,
                  "outputByteLimit": output_limit}
        terminal_id = self._answered(CREATE, params, cancel, "terminalId", CREATE, "running the command in Bob instead")
        if terminal_id == "":
            self._info(f"{CREATE}: an empty terminalId; running the command in Bob instead")
        return EditorTerminal(self, terminal_id) if terminal_id else None

    # ---- asking --------------------------------------------------------------------------------

    def _answered(self, method: str, params: dict[str, Any], cancel: Cancel, field: str, what: str, instead: str) -> str | None:
        """A string field of the client's answer; None, said in the log with what Bob does
        `instead`, when the client failed or its answer has no such field."""
        try:
            result = self.ask(method, params, cancel)
        except ClientTimeout:
            raise  # (no answer at all: the call fails in words, nothing is done instead)
        except ClientError as exc:
            self._info(f"{what}: {exc}; {instead}")
            return None
        value = mapping(result).get(field)
        if not isinstance(value, str):
            self._info(f"{what}: no {field} in the answer; {instead}")
            return None
        return value

    def ask(self, method: str, params: dict[str, Any], cancel: Cancel, within: float | None = -1.0) -> object:
        """The result of one request; Cancelled when the turn is, ClientError for an error,
        ClientTimeout when the editor has not answered within `within` seconds (-1: the
        configured acp.clientTimeout; None: no limit but the cancel's)."""
        limit = self._within if within == -1.0 else within
        sent = self._ask_client(method, params, cancel, limit)  # (the answer's Future waits as long)
        if sent.timed_out and not cancel.is_set():
            if within != -1.0:  # (a time of the caller's own: a command's)
                raise ClientTimeout(f"no answer to {method} within {limit:g} s")
            self._info(f"{method}: no answer within {limit:g} s (acp.clientTimeout)")
            raise ClientTimeout(f"the editor did not answer {method} within {limit:g} s (acp.clientTimeout)")
        if cancel.is_set():
            raise Cancelled()
        if sent.cancelled():
            raise ClientError("the connection ended")
        try:
            return sent.result()
        except PeerError as exc:
            message = exc.error.get("message") if isinstance(exc.error, dict) else exc.error
            raise ClientError(" ".join(str(message).split())[:300] or "an error") from None

    def _info(self, line: str) -> None:
        self._log.info(f"[acp] session {self._sid}: {line}")  # type: ignore[attr-defined]


class EditorTerminal:
    def __init__(self, client: EditorClient, terminal_id: str):
        self._client = client
        self.id = terminal_id
        self._params = {"sessionId": client._sid, "terminalId": terminal_id}
        self._released = False
        self._lock = threading.Lock()

    def wait_for_exit(self, timeout: float, cancel: Cancel) -> TerminalExit | None:
        """The command's exit, or None when it runs past `timeout` (the command's own time)."""
        try:
            result = self._client.ask(WAIT, dict(self._params), cancel, within=timeout)
        except ClientTimeout:
            return None
        return _exit(result)

    def output(self, cancel: Cancel) -> TerminalOutput:
        result = self._client.ask(OUTPUT, dict(self._params), cancel)
        result = mapping(result)
        output = result.get("output")
        status = result.get("exitStatus")
        return TerminalOutput(output if isinstance(output, str) else "", result.get("truncated") is True,
                              _exit(status) if isinstance(status, dict) else None)

    def kill(self) -> None:
        self._quietly(KILL)

    def release(self) -> None:
        if self._claim():
            self._quietly(RELEASE)

    def abandon(self) -> None:
        if not self._claim():
            return

        def end() -> None:
            self._quietly(KILL)
            self._quietly(RELEASE)

        try:
            threads.start(end, "bob-terminal-end")
        except threads.ThreadLimit:
            end()  # (no thread to spare: done now, each request within its own time limit)

    def _claim(self) -> bool:
        """True once: the caller releases the terminal (nothing is sent for it after that)."""
        with self._lock:
            released, self._released = self._released, True
        return not released

    def _quietly(self, method: str) -> None:
        """A request whose failure changes nothing (the terminal is gone either way): logged."""
        try:
            self._client.ask(method, dict(self._params), Cancel(), within=CLEANUP_WAIT)
        except (ClientError, Cancelled) as exc:
            self._client._info(f"{method} {self.id}: {exc or 'no answer'}")


def _exit(result: object) -> TerminalExit:
    result = mapping(result)
    code, name = result.get("exitCode"), result.get("signal")
    return TerminalExit(code if isinstance(code, int) and not isinstance(code, bool) else None,
                        name if isinstance(name, str) and name else None)

