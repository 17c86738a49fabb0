"""What the person types: prompts with line editing and history (readline), a pasted block as
one prompt, and permission answers, asked on the terminal even when stdin or stdout is a pipe."""

from __future__ import annotations

import os
import select
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import TextIO

PASTE_WINDOW = 0.03  # seconds: lines arriving this close behind a line are one pasted block
HISTORY_LINES = 1000


def history_file(env: dict) -> str:
    base = env.get("XDG_STATE_HOME") or os.path.join(env.get("HOME") or os.path.expanduser("~"), ".local", "state")
    return os.path.join(base, "bob", "chat-history")


class Prompter:
    """Reads prompts from stdin. On a terminal: readline's editing and history (kept between
    runs), and the lines of a paste joined into one prompt."""

    def __init__(self, env: dict):
        self.interactive = sys.stdin.isatty()
        self._history = history_file(env)
        self._readline = None
        if self.interactive:
            try:
                import readline
            except ImportError:  # a Python without readline: plain input still works
                readline = None
            self._readline = readline
            if readline is not None:
                try:
                    readline.read_history_file(self._history)
                except OSError:
                    pass
                readline.set_history_length(HISTORY_LINES)

    def read(self, prompt: str) -> str:
        """One prompt (several lines when pasted); EOFError at the end, KeyboardInterrupt on Ctrl-C."""
        first = input(prompt)
        lines = [first]
        while self.interactive and _more_waiting():
            lines.append(input())
        text = "\n".join(lines)
        if self._readline is not None and len(lines) > 1:  # the history keeps the prompt, not its pieces
            for _ in range(len(lines)):
                self._readline.remove_history_item(self._readline.get_current_history_length() - 1)
            self._readline.add_history(text.replace("\n", " "))
        return text

    def save(self) -> None:
        if self._readline is None:
            return
        try:
            os.makedirs(os.path.dirname(self._history), exist_ok=True)
            self._readline.write_history_file(self._history)
        except OSError:
            pass


def _more_waiting() -> bool:
    try:
        return bool(select.select([sys.stdin], [], [], PASTE_WINDOW)[0])
    except (OSError, ValueError):
        return False


class Asker:
    """Permission questions. On the terminal the chat runs in (/dev/tty), so they stay off a
    piped stdout (--json) and work with a piped stdin; with no terminal at all, a rejection
    that says why."""

    def __init__(self, yes: bool, no: bool, screen_out: "TextIO"):
        self.yes, self.no = yes, no
        self._out = screen_out
        self.tty_in = self.tty_out = None
        if not (yes or no):
            try:
                self.tty_in = open("/dev/tty", "r")
                self.tty_out = open("/dev/tty", "w")
            except OSError:
                pass

    @property
    def can_ask(self) -> bool:
        return self.yes or self.no or self.tty_in is not None

    def ask(self, title: str, scope: str | None, paint) -> str:
        """allow | allow_always | reject | cancelled (Ctrl-C: the turn is to be cancelled).
        `scope`: what "always" would cover; None when the agent offers no "always"."""
        if self.yes:
            return "allow"
        if self.no or self.tty_in is None:
            return "reject"
        try:
            while True:
                always = "" if scope is None else f" / [a]lways ({scope})"
                self.tty_out.write(paint(f"? Allow {title}?", "yellow") + f"  [y]es once{always} / [n]o: ")
                self.tty_out.flush()
                line = self._read_line()  # the terminal itself, in its plain line mode
                if not line:
                    return "reject"  # Ctrl-D
                answer = line.strip().lower()
                if answer in ("y", "yes"):
                    return "allow"
                if answer in ("a", "always") and scope is not None:
                    return "allow_always"
                if answer in ("n", "no"):
                    return "reject"
        except KeyboardInterrupt:  # wherever it lands, a Ctrl-C here cancels the turn
            self.tty_out.write("\n")
            return "cancelled"

    def _read_line(self) -> str:
        """A line from the terminal; a Ctrl-C raises KeyboardInterrupt even when it came just
        before the read began (the signal's wake-up byte ends the wait)."""
        import signal

        wake_r, wake_w = os.pipe()
        os.set_blocking(wake_w, False)
        try:
            previous = signal.set_wakeup_fd(wake_w)
        except ValueError:  # not the main thread: no wake-up byte, a plain read
            os.close(wake_r)
            os.close(wake_w)
            return self.tty_in.readline()
        try:
            while True:
                ready = select.select([self.tty_in, wake_r], [], [])[0]
                if wake_r in ready:
                    os.read(wake_r, 64)  # the handler runs at the next bytecode: KeyboardInterrupt
                    continue
                return self.tty_in.readline()
        finally:
            signal.set_wakeup_fd(previous)
            os.close(wake_r)
            os.close(wake_w)

    def close(self) -> None:
        for handle in (self.tty_in, self.tty_out):
            if handle is not None:
                handle.close()
