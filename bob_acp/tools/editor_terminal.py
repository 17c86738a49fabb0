"""bash in the editor's own terminal (`tools.clientTerminal`): the command shows live where the
user works, and the model reads a result of the same shape as from Bob's own process (its exit
status, its output bounded, a note where it was cut).

The terminal is always released; a cancel or the time limit kills the command first.
"""

from __future__ import annotations

import signal

from bob_acp.cancel import Cancel
from bob_acp.exceptions import Cancelled, ClientError
from bob_acp.tools.base import ToolResult
from bob_acp.tools.client import Terminal, TerminalExit

CUT_BY_EDITOR = "[… the start of the output was cut by the editor's terminal (tools.bash.outputLimit) …]\n"


def run(terminal: Terminal, timeout: float, limit: int, cancel: Cancel) -> ToolResult:
    """Wait for the command in `terminal`, within `timeout` seconds, and read its result."""
    try:
        ended = terminal.wait_for_exit(timeout, cancel)
        if ended is None:
            terminal.kill()
        shown = terminal.output(cancel)
    except Cancelled:
        terminal.abandon()  # the turn answers now; the kill and the release follow
        raise
    except ClientError as exc:
        return ToolResult(f"error: the editor's terminal failed: {exc}", failed=True)
    finally:
        terminal.release()
    text = bounded(shown.output, limit)
    if shown.truncated:
        text = CUT_BY_EDITOR + text
    if ended is None:
        return ToolResult(f"{text}\n[timed out after {timeout:g} s: the command was killed]", failed=True,
                          signal="SIGKILL")
    code = exit_code(ended if ended.exit_code is not None or ended.signal else shown.exit or ended)
    if text and not text.endswith("\n"):
        text += "\n"
    return ToolResult(f"{text}[exit code: {code}]", failed=code != 0, exit_code=code, signal=ended.signal)


def exit_code(ended: TerminalExit) -> int | None:
    """The exit status as Bob's own runs give it: a signal as its negative number."""
    if ended.exit_code is not None:
        return ended.exit_code
    if ended.signal:
        name = ended.signal if ended.signal.startswith("SIG") else "SIG" + ended.signal
        try:
            return -int(signal.Signals[name])
        except KeyError:
            return None
    return None


def bounded(text: str, limit: int) -> str:
    """The client keeps outputByteLimit bytes; a client that keeps more is cut here, in the middle."""
    if len(text) <= limit:
        return text
    head = limit // 2
    tail = limit - head
    return f"{text[:head]}\n[… {len(text) - limit} characters cut …]\n{text[len(text) - tail:]}"
