"""The client port: what the tools may ask of the editor that drives Bob (its files, its
terminals), without knowing how it is asked. The ACP layer implements it (bob_acp.acp.client);
a session whose client offers nothing has none, and the tools use the disk and Bob's own
processes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from bob_acp.cancel import Cancel


@dataclass
class TerminalExit:
    exit_code: int | None
    signal: str | None


@dataclass
class TerminalOutput:
    output: str
    truncated: bool  # the client cut its start (outputByteLimit)
    exit: TerminalExit | None


class Terminal(Protocol):
    """A command running in the editor's terminal. Every terminal is released exactly once."""

    id: str

    def wait_for_exit(self, timeout: float, cancel: Cancel) -> TerminalExit | None:
        """Its exit; None when `timeout` seconds pass first. Cancelled when the turn is."""

    def output(self, cancel: Cancel) -> TerminalOutput:
        """What it printed (the client keeps at most outputByteLimit bytes, the end)."""

    def kill(self) -> None:
        """End the command, keep the terminal (its output stays readable)."""

    def release(self) -> None:
        """End the command if it still runs and free the terminal (the editor keeps showing it);
        once released, nothing more is sent for it."""

    def abandon(self) -> None:
        """Kill and release without waiting for either (a cancelled turn answers at once)."""


class Client(Protocol):
    can_read: bool  # fs/read_text_file
    can_write: bool  # fs/write_text_file
    can_run: bool  # terminal/*

    def read(self, path: str, cancel: Cancel, line: int | None = None, limit: int | None = None) -> str | None:
        """The editor's text of `path` (from `line`, at most `limit` lines), or None: read the disk."""

    def write(self, path: str, content: str, cancel: Cancel) -> None:
        """Have the editor write `path`; ClientError when it refuses."""

    def terminal(self, argv: list[str], cwd: str, env: dict[str, str], output_limit: int,
                 cancel: Cancel) -> Terminal | None:
        """Start `argv` in an editor terminal; None when the client could not (run it in Bob)."""
