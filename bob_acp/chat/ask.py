"""What the person types: prompts with line editing and history (readline), a pasted block as
one prompt, and permission answers, asked on the terminal even when stdin or stdout is a pipe."""

from __future__ import annotations

import contextlib
import os
import select
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from typing import Any, TextIO

PASTE_WINDOW = 0.03  # seconds: lines arriving this close behind a line are one pasted block
HISTORY_LINES = 1000


def history_file(env: dict[str, Any]) -> str:
    from bob_acp.files import bobdir

    return os.path.join(bobdir.user_state(env), "chat-history")


class Prompter:
    """Reads prompts from stdin. On a terminal: readline's editing and history (kept between
    runs), and the lines of a paste joined into one prompt."""

    def __init__(self, env: dict[str, Any]):
        self.interactive = sys.stdin.isatty()
        self._history = history_file(env)
        self._readline: Any = None
        if self.interactive:
            try:
                import readline as line_editing
            except ImportError:  # a Python without readline: plain input still works
                line_editing = None  # type: ignore[assignment]
            self._readline = readline = line_editing
            if readline is not None:
                for entry in load_history(self._history):
                    readline.add_history(entry)
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
            self._readline.add_history(text)  # newlines and all: recalled, it is the prompt that was sent
        return text

    def save(self) -> None:
        if self._readline is None:
            return
        readline = self._readline
        entries = [readline.get_history_item(i) for i in range(1, readline.get_current_history_length() + 1)]
        save_history(self._history, [e for e in entries if e][-HISTORY_LINES:])


def _wrapped(text: str, width: int, indent: str, keep_end: bool = False) -> str:
    """`text` wrapped between words to `width` columns, each line indented."""
    import textwrap

    lines = textwrap.wrap(text, width=width - 1, initial_indent=indent, subsequent_indent=indent,
                          break_long_words=False, break_on_hyphens=False) or [indent]
    joined = "\n".join(lines)
    return joined + " " if keep_end and text.endswith(" ") else joined


def load_history(path: str) -> list[str]:
    """The chat's history: one JSON string a line (a multi-line prompt stays one entry); a line
    that is not JSON (a history from before 0.13, readline's own format) is taken as it is."""
    import json

    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            lines = handle.read().splitlines()
    except OSError:
        return []
    entries = []
    for line in lines[-HISTORY_LINES:]:
        try:
            entry = json.loads(line)
        except ValueError:
            entry = line
        if isinstance(entry, str) and entry:
            entries.append(entry)
    return entries


def save_history(path: str, entries: list[str]) -> None:
    """The prompts, readable by their owner alone (they can hold what was pasted: tokens, logs)."""
    import json

    temp = f"{path}.{os.getpid()}.tmp"
    try:
        os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0), 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            os.fchmod(handle.fileno(), 0o600)  # (a temp file left by a crash had other bits: these, now)
            handle.write("".join(json.dumps(entry, ensure_ascii=False) + "\n" for entry in entries))
        os.replace(temp, path)
    except OSError:
        try:
            os.unlink(temp)
        except OSError:
            pass


# What a terminal sends that is no text: an escape sequence (an arrow key, a function key), or a
# control character other than a tab or a newline (Ctrl-L typed during a turn is 0x0c).
NOT_TEXT = r"\x1b(\[[0-9;?]*[ -/]*[@-~]|O.|.)?|[\x00-\x08\x0b-\x1f\x7f]"


def typed_text(text: str) -> str:
    """What the person typed, without the keys that are no text (never sent to the model)."""
    import re  # (its own cache keeps the pattern compiled)

    return re.sub(NOT_TEXT, "", text)


class Typing:
    """While a turn runs, the terminal does not echo what the person types into the agent's
    output: the chat shows each line itself once it is whole, marked as the person's. (Line
    mode stays on: the line is still edited and ended as usual; a question asked meanwhile is
    echoed again while it is answered.)"""

    def __init__(self, stream: TextIO | None):
        self._fd: int | None = None
        self._saved: Any = None
        try:
            if stream is not None and stream.isatty():
                self._fd = stream.fileno()
        except (OSError, ValueError):
            self._fd = None

    def hide(self) -> None:
        if self._fd is None or self._saved is not None:
            return
        try:
            import termios
        except ImportError:
            return
        try:
            saved = termios.tcgetattr(self._fd)
            quiet = list(saved)
            quiet[3] &= ~termios.ECHO
            termios.tcsetattr(self._fd, termios.TCSANOW, quiet)  # (NOW: what was typed ahead stays)
            self._saved = saved
        except (OSError, ValueError, termios.error):
            self._saved = None

    def show(self) -> None:
        if self._fd is None or self._saved is None:
            return
        saved, self._saved = self._saved, None
        import termios

        try:
            termios.tcsetattr(self._fd, termios.TCSANOW, saved)
        except (OSError, ValueError, termios.error):  # (the terminal is gone: nothing to restore)
            pass

    @property
    def hidden(self) -> bool:
        return self._saved is not None

    @contextlib.contextmanager
    def shown(self) -> Iterator[None]:
        """Echo back on while a question is answered; off again after it if it was off."""
        hidden = self.hidden
        self.show()
        try:
            yield
        finally:
            if hidden:
                self.hide()


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
        self.tty_in: TextIO | None = None
        self.tty_out: TextIO = screen_out  # the terminal when there is one (questions go there)
        if not (yes or no):
            try:
                self.tty_in = open("/dev/tty", "r")
                self.tty_out = open("/dev/tty", "w")
            except OSError:
                self.tty_in = None

    @property
    def can_ask(self) -> bool:
        return self.yes or self.no or self.tty_in is not None

    def ask(self, title: str, scope: str | None, paint: Callable[[str, str], str],
            project: str | None = None) -> tuple[str, str]:
        """(allow | allow_always | allow_project | reject | reject_project | cancelled, the
        reason given with a "no"). Ctrl-C: the turn is to be cancelled. `scope`: what "always"
        would cover; None when the agent offers no "always". `project`: what a rule for the
        project would cover, when the agent offers one ([p]roject: always; ne[v]er). The question
        names the tool, the command or path goes on its own line, and both wrap between words at
        the terminal's width."""
        if self.yes:
            return "allow", ""
        if self.no or self.tty_in is None:
            return "reject", ""
        tool, _, target = title.partition(": ")
        width = self._width()
        always = "" if scope is None else f" / [a]lways ({scope})"
        here = "" if project is None else f" / always in this [p]roject ({project})"
        never = "" if project is None else " / ne[v]er in this project"
        choices = f"[y]es once{always}{here}{never} / [n]o, and what to do instead: "
        question = paint(f"? Allow {tool}?", "yellow") + "\n"
        if target:
            question += _wrapped(target, width, "    ") + "\n"
        try:
            while True:
                self.tty_out.write(question + _wrapped(choices, width, "  ", keep_end=True))
                self.tty_out.flush()
                line = self._read_line()  # the terminal itself, in its plain line mode
                if not line:
                    return "reject", ""  # Ctrl-D
                answer = line.strip()
                word, _, rest = answer.partition(" ")
                if word.lower() in ("y", "yes") and not rest:
                    return "allow", ""
                if word.lower() in ("a", "always") and not rest and scope is not None:
                    return "allow_always", ""
                if word.lower() in ("p", "project") and not rest and project is not None:
                    return "allow_project", ""
                if word.lower() in ("v", "never") and not rest and project is not None:
                    return "reject_project", ""
                if word.lower().rstrip(",:") in ("n", "no"):
                    return "reject", rest.strip()
        except KeyboardInterrupt:  # wherever it lands, a Ctrl-C here cancels the turn
            self.tty_out.write("\n")
            return "cancelled", ""

    def line(self, question: str, interrupt: bool = False) -> str:
        """One answer typed on the terminal ("" without one; a Ctrl-C: "", or with `interrupt`,
        KeyboardInterrupt)."""
        if self.tty_in is None:
            return ""
        self.tty_out.write(question)
        self.tty_out.flush()
        try:
            return self._read_line().strip()
        except KeyboardInterrupt:
            self.tty_out.write("\n")
            if interrupt:
                raise
            return ""

    def _width(self) -> int:
        try:
            return max(20, os.get_terminal_size(self.tty_out.fileno()).columns)
        except (OSError, ValueError, AttributeError):
            return 80

    def _read_line(self) -> str:
        """A line from the terminal; a Ctrl-C raises KeyboardInterrupt even when it came just
        before the read began (the signal's wake-up byte ends the wait)."""
        import signal

        tty = self.tty_in
        if tty is None:
            return ""
        wake_r, wake_w = os.pipe()
        os.set_blocking(wake_w, False)
        try:
            previous = signal.set_wakeup_fd(wake_w)
        except ValueError:  # not the main thread: no wake-up byte, a plain read
            os.close(wake_r)
            os.close(wake_w)
            return tty.readline()
        try:
            while True:
                ready = select.select([tty.fileno(), wake_r], [], [])[0]
                if wake_r in ready:
                    os.read(wake_r, 64)  # the handler runs at the next bytecode: KeyboardInterrupt
                    continue
                return tty.readline()
        finally:
            signal.set_wakeup_fd(previous)
            os.close(wake_r)
            os.close(wake_w)

    def close(self) -> None:
        for handle in (self.tty_in, self.tty_out):
            if handle is not None:
                handle.close()
