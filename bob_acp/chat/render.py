"""What the person sees: the model's text, thoughts dimmed, tool lines with a rolling tail of
live output, coloured diffs with paths relative to the folder, usage, a spinner while the model
is thought to be working. Colour and in-place drawing only on a terminal (NO_COLOR honoured)."""

from __future__ import annotations

import difflib
import itertools
import os
import re
import time
from typing import Any

from bob_acp import visible
from bob_acp.jsontext import mapping

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import TextIO

TAIL_LINES = 5
OUTPUT_PREVIEW_LINES = 8
SPINNER = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"
_FENCE = re.compile(r"^(`{3,})[^\n`]*\n(.*?)\n?\1$", re.S)


def use_colour(stream: "TextIO", env: dict[str, Any]) -> bool:
    return stream.isatty() and "NO_COLOR" not in env and env.get("TERM") != "dumb"


def unfence(text: str) -> str:
    """Bob's tool text is a Markdown code block; the terminal shows what is inside."""
    match = _FENCE.match(text)
    return match.group(2) if match else text


class Screen:
    STYLES = {"dim": "2", "bold": "1", "red": "31", "green": "32", "yellow": "33", "blue": "34", "cyan": "36"}

    def __init__(self, out: "TextIO", colour: bool, cwd: str, quiet: bool = False):
        self.out = out
        self.colour = colour
        self.live = colour  # in-place drawing (spinner, rolling tail) where colour is: a terminal
        self.cwd = cwd
        self.quiet = quiet
        self.at_line_start = True
        self.calls: dict[str, dict[str, Any]] = {}
        self._spinner_on = False
        self._spin = itertools.cycle(SPINNER)
        self._tail_drawn = 0  # lines of rolling tail currently on screen
        self._tail_call = ""
        self._streaming: str | None = None  # "text" or "thought": what the current line holds
        self.shown_diffs: dict[str, tuple[Any, ...]] = {}  # toolCallId -> the proposed change already shown
        self._usage: dict[str, Any] | None = None  # the last usage_update, shown once the turn ends
        self._last_plan: list[tuple[str, str]] = []  # the plan as last shown

    def paint(self, text: str, *styles: str) -> str:
        if not self.colour or not styles:
            return text
        codes = ";".join(self.STYLES[s] for s in styles)
        return f"\x1b[{codes}m{text}\x1b[0m"

    def prompt(self, text: str, *styles: str) -> str:
        """A prompt for readline: its escapes between \\001 and \\002, which readline then does not
        count as columns (without them it redraws a recalled line off by their width)."""
        if not self.colour or not styles:
            return text
        codes = ";".join(self.STYLES[s] for s in styles)
        return f"\x01\x1b[{codes}m\x02{text}\x01\x1b[0m\x02"

    # ---- raw output -------------------------------------------------------------------------

    def write(self, text: str) -> None:
        if self.quiet or not text:
            return
        self.clear_spinner()
        self.out.write(text)
        self.out.flush()
        self.at_line_start = text.endswith("\n")

    def line(self, text: str, *styles: str) -> None:
        self.end_stream()
        self.write(("" if self.at_line_start else "\n") + self.paint(text, *styles) + "\n")

    def end_stream(self) -> None:
        if self._streaming and not self.at_line_start:
            self.write("\n")
        self._streaming = None

    # ---- the spinner ---------------------------------------------------------------------------

    def spin(self, since: float, label: str = "waiting for the model") -> None:
        if not self.live or self.quiet:
            return
        if not self.at_line_start:
            return  # text is streaming on this line: no spinner over it
        self.out.write(f"\r{self.paint(next(self._spin) + ' ' + label, 'dim')} {self.paint(f'{time.monotonic() - since:.0f}s', 'dim')}\x1b[K")
        self.out.flush()
        self._spinner_on = True

    def clear_spinner(self) -> None:
        if self._spinner_on:
            self.out.write("\r\x1b[K")
            self.out.flush()
            self._spinner_on = False

    # ---- updates -------------------------------------------------------------------------------

    def update(self, update: dict[str, Any]) -> None:
        kind = update.get("sessionUpdate")
        if kind == "agent_message_chunk":
            if self._streaming == "thought":
                self.end_stream()
            self._streaming = "text"
            self.write(visible.body(_text_of(update)))
        elif kind == "agent_thought_chunk":
            if self._streaming == "text":
                self.end_stream()
            if self._streaming != "thought" and not self.colour:
                self.write(("" if self.at_line_start else "\n") + "(thinking) ")  # dim alone says nothing here
            self._streaming = "thought"
            self.write(self.paint(visible.body(_text_of(update)), "dim"))
        elif kind == "user_message_chunk":
            self.line(self.paint("you> ", "bold") + visible.body(_text_of(update)))
        elif kind == "tool_call":
            self._tool_call(update)
        elif kind == "tool_call_update":
            self._tool_update(update)
        elif kind == "usage_update":
            self._usage = update
        elif kind == "plan":
            self._plan(update)

    def _plan(self, update: dict[str, Any]) -> None:
        """The plan as a checklist, each time it changes (an update holds the whole plan)."""
        entries = [e for e in update.get("entries") or [] if isinstance(e, dict)]
        shown = [(str(e.get("status", "pending")), visible.line(str(e.get("content", "")))) for e in entries]
        if shown == self._last_plan:
            return
        self._last_plan = shown
        self._end_tail()
        self.end_stream()
        self.line("plan:", "bold")
        for status, content in shown:
            mark, colour = {"completed": ("[x]", "dim"), "in_progress": ("[>]", "yellow")}.get(status, ("[ ]", None))
            self.line(f"  {mark} {content}", *((colour,) if colour else ()))

    def usage_line(self) -> None:
        usage = self._usage
        if not usage:
            return
        share = usage["used"] / usage["size"] * 100 if usage.get("size") else 0
        cost = f" · ${usage['cost']['amount']:.4f}" if usage.get("cost") else ""
        self.line(f"context: {usage['used']:,} of {usage['size']:,} tokens ({share:.0f}%){cost}", "dim")
        self._usage = None

    def _tool_call(self, update: dict[str, Any]) -> None:
        self.calls[update["toolCallId"]] = dict(update)
        status = update.get("status", "pending")
        self._end_tail()
        meta = mapping(update.get("_meta"))
        boxed = " [sandboxed]" if isinstance(meta.get("bob"), dict) and meta["bob"].get("sandboxed") else ""
        self.line(f"⏺ {visible.line(str(update.get('title', update['toolCallId'])))}{boxed}", "cyan")
        if status in ("completed", "failed"):  # a replayed call
            self._result(update, status)

    def _tool_update(self, update: dict[str, Any]) -> None:
        call = self.calls.setdefault(update["toolCallId"], {})
        status = update.get("status")
        bob = mapping(mapping(update.get("_meta")).get("bob"))
        if isinstance(bob.get("rule"), str):  # (run unasked by a rule the user keeps for the project)
            self._end_tail()
            self.line(f"  by a rule of this project: {visible.line(bob['rule'])}", "dim")
        if status == "in_progress" and update.get("content"):
            return self._live_tail(update)
        call.update({k: v for k, v in update.items() if v is not None})
        if status in ("completed", "failed"):
            self._end_tail()
            self._result(call, status)

    def _live_tail(self, update: dict[str, Any]) -> None:
        text = visible.body(unfence(_content_text(update)))
        lines = text.rstrip("\n").split("\n")[-TAIL_LINES:]
        if not self.live:
            return  # off a terminal the final output says it all
        self.end_stream()
        self.clear_spinner()
        if self._tail_drawn and self._tail_call == update["toolCallId"]:
            self.out.write(f"\x1b[{self._tail_drawn}F\x1b[J")  # back to the tail's first line, clear below
        self.out.write("".join(self.paint(f"  │ {line[:200]}", "dim") + "\n" for line in lines))
        self.out.flush()
        self.at_line_start = True
        self._tail_drawn = len(lines)
        self._tail_call = update["toolCallId"]

    def _end_tail(self) -> None:
        if self._tail_drawn and self.live:
            self.out.write(f"\x1b[{self._tail_drawn}F\x1b[J")
            self.out.flush()
        self._tail_drawn = 0

    def _result(self, call: dict[str, Any], status: str) -> None:
        mark = self.paint("✓", "green") if status == "completed" else self.paint("✗", "red")
        raw = (call.get("rawOutput") or {}).get("output")
        rejected = raw == "[command rejected by the user]" or str(raw).startswith("[rejected by the user: ")
        label = "rejected" if rejected else status
        self.line(f"  {mark} {visible.line(str(call.get('title', '')))}  {self.paint('[' + label + ']', 'dim')}")
        for item in call.get("content") or []:
            if item.get("type") == "diff":
                change = (item.get("oldText"), item.get("newText", ""), item.get("path", ""))
                if self.shown_diffs.get(str(call.get("toolCallId"))) != change:  # not again when it was proposed
                    self.write(self.diff(*change))
            elif item.get("type") == "content" and not rejected:
                text = visible.body(unfence(item.get("content", {}).get("text", "")))
                lines = text.rstrip("\n").split("\n") if text else []
                shown = lines[:OUTPUT_PREVIEW_LINES]
                more = len(lines) - len(shown)
                self.write("".join(f"    {line}\n" for line in shown))
                if more:
                    self.write(self.paint(f"    … {more} more line(s)\n", "dim"))

    def diff(self, old: str | None, new: str, path: str) -> str:
        shown = visible.line(os.path.relpath(path, self.cwd) if path.startswith(self.cwd + os.sep) else path)
        lines = difflib.unified_diff((old or "").splitlines(keepends=True), new.splitlines(keepends=True),
                                     fromfile="/dev/null" if old is None else f"a/{shown}", tofile=f"b/{shown}")
        out = []
        for line in lines:
            line = visible.line(line.rstrip("\n"))
            style = ("bold",) if line.startswith(("+++", "---")) else ("green",) if line.startswith("+") else \
                ("red",) if line.startswith("-") else ("cyan",) if line.startswith("@@") else ()
            out.append("    " + self.paint(line, *style) + "\n")
        return "".join(out)


def _text_of(update: dict[str, Any]) -> str:
    content = update.get("content") or {}
    return content.get("text", "") if isinstance(content, dict) else ""


def _content_text(update: dict[str, Any]) -> str:
    for item in update.get("content") or []:
        if item.get("type") == "content":
            return item.get("content", {}).get("text", "")
    return ""
