"""One turn of the agent: generate, stream, run the tool calls in order, repeat.

The engine knows no JSON-RPC: it reports through a Sink the ACP layer implements, and it keeps
the conversation (bob_acp.history format) valid whatever happens: after a cancel, a failure or a
stopped loop every tool call the model made has a result.
"""

from __future__ import annotations

import itertools
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Protocol

import orjson

from bob_acp import compress, history, tools
from bob_acp.exceptions import Cancelled, ModelError
from bob_acp.tools.base import Tool, ToolContext, ToolResult

END_TURN, CANCELLED, REFUSAL, MAX_TURN_REQUESTS = "end_turn", "cancelled", "refusal", "max_turn_requests"
REJECTED = "[command rejected by the user]"
CANCELLED_RESULT = "[cancelled by the user]"
NOT_RUN = "[not run: the turn ended before this call]"

_refs = itertools.count(1)  # ACP tool call ids: call_1, call_2, … per process, never reset


_refs_lock = threading.Lock()


def next_ref() -> str:
    with _refs_lock:
        return f"call_{next(_refs)}"


def reserve_refs(refs: list[str]) -> None:
    """Move the counter past refs replayed from a saved session, so a new call never reuses one."""
    global _refs
    highest = max((int(r[5:]) for r in refs if r.startswith("call_") and r[5:].isdigit()), default=0)
    with _refs_lock:
        current = next(_refs)
        _refs = itertools.count(max(current, highest + 1))


@dataclass
class Conversation:
    """One session's conversation state; the engine changes it during a turn."""

    cwd: str
    messages: list[dict]
    skills: dict = field(default_factory=dict)  # name -> bob_acp.skills.Skill
    allow_always: set[str] = field(default_factory=set)
    last_input_tokens: int | None = None


@dataclass
class Call:
    """A tool call as the client sees it."""

    ref: str
    name: str
    arguments: dict
    tool: Tool | None
    title: str
    kind: str
    locations: list[str]


@dataclass
class TurnStats:
    commands: int = 0
    file_ops: int = 0
    skills: int = 0

    def count(self, name: str) -> None:
        if name == "bash":
            self.commands += 1
        elif name == "read_skill":
            self.skills += 1
        else:
            self.file_ops += 1

    def line(self) -> str:
        return f"{self.commands} command(s) · {self.file_ops} file op(s) · {self.skills} skill(s)"


class Sink(Protocol):
    def text(self, chunk: str) -> None: ...
    def tool_pending(self, call: Call) -> None: ...
    def permission(self, call: Call, cancel: threading.Event) -> str: ...  # allow | allow_always | reject
    def tool_running(self, call: Call) -> None: ...
    def tool_finished(self, call: Call, result: ToolResult) -> None: ...


class TurnFailed(Exception):
    """The turn failed; str(self) is the one-line error the client receives."""

    def __init__(self, line: str, stats: TurnStats):
        super().__init__(line)
        self.stats = stats


class _LoopStop(Exception):
    def __init__(self, call: Call, times: int):
        super().__init__(f"the same tool call was repeated {times} times in a row ({call.title})")


class Engine:
    def __init__(self, cfg: Any, provider: Any, no_model_message: str = "", log: Any = None):
        self.cfg = cfg
        self.provider = provider
        self.no_model_message = no_model_message
        self.log = log

    def run_turn(self, conv: Conversation, text: str, sink: Sink, cancel: threading.Event) -> tuple[str, TurnStats]:
        """Run one prompt turn; returns (stop reason, stats) or raises TurnFailed."""
        stats = TurnStats()
        if self.provider is None:
            sink.text(self.no_model_message)
            return REFUSAL, stats
        question = history.user(text)
        conv.messages.append(question)
        try:
            return self._loop(conv, sink, cancel, stats), stats
        except Cancelled:
            return CANCELLED, stats
        except _LoopStop as stop:
            sink.text(f"\n\n[turn stopped: {stop}]")
            return END_TURN, stats
        except ModelError as exc:
            if cancel.is_set():  # a cancel is never an error, whatever the provider raised
                return CANCELLED, stats
            raise TurnFailed(str(exc), stats) from None
        finally:
            self._settle(conv, question, cancel)

    def _loop(self, conv: Conversation, sink: Sink, cancel: threading.Event, stats: TurnStats) -> str:
        repeats = _Repeats()
        for _ in range(self.cfg.limits.maxModelCalls):
            self._maybe_compress(conv, cancel)
            calls = self._generate(conv, sink, cancel)
            if not calls:
                return END_TURN
            for call in calls:
                self._run_call(conv, call, sink, cancel, stats, repeats.see(call))
        return MAX_TURN_REQUESTS

    def _generate(self, conv: Conversation, sink: Sink, cancel: threading.Event) -> list[Call]:
        parts: list[str] = []

        def on_text(chunk: str) -> None:
            if chunk:
                parts.append(chunk)
                sink.text(chunk)

        try:
            reply = self.provider.generate(conv.messages, tools.specs(), on_text, cancel)
        except (Cancelled, ModelError):
            if parts:  # what the user already saw stays in the history
                conv.messages.append(history.assistant("".join(parts)))
            raise
        if reply.input_tokens is not None:
            conv.last_input_tokens = reply.input_tokens
        text = "".join(parts) or reply.text
        calls = [self._call(conv, tc.name, tc.arguments) for tc in reply.tool_calls]
        recorded = [{"id": tc.id, "ref": c.ref, "name": c.name, "arguments": c.arguments} for tc, c in zip(reply.tool_calls, calls)]
        conv.messages.append(history.assistant(text, recorded))
        return calls

    def _call(self, conv: Conversation, name: str, arguments: dict) -> Call:
        tool = tools.get(name)
        ref = next_ref()
        if tool is None:
            return Call(ref, name, arguments, None, f"{name}: unknown tool", "execute", [])
        try:
            title, locations = tool.title(arguments), tool.locations(arguments, conv.cwd)
        except Exception:  # arguments of the wrong shape: the tool's own run() will say so
            title, locations = name, []
        return Call(ref, name, arguments, tool, title, tool.kind, locations)

    def _run_call(self, conv: Conversation, call: Call, sink: Sink, cancel: threading.Event, stats: TurnStats,
                  times: int) -> None:
        if cancel.is_set():  # nothing more runs once the turn is cancelled; _settle answers the rest
            raise Cancelled()
        sink.tool_pending(call)
        if call.tool is None:
            known = ", ".join(t.name for t in tools.TOOLS)
            return self._finish(conv, call, sink, ToolResult(f"error: unknown tool '{call.name}'; the tools are: {known}", failed=True))
        if times >= self.cfg.loop.stopAt:
            self._finish(conv, call, sink, ToolResult(f"[not run: this exact call was made {times} times in a row]", failed=True))
            raise _LoopStop(call, times)
        if times >= self.cfg.loop.warnAt:
            note = f"[not run: this exact call was made {times} times in a row; it would give the same result. Try a different approach.]"
            return self._finish(conv, call, sink, ToolResult(note, failed=True))
        if not self._permitted(conv, call, sink, cancel):
            return self._finish(conv, call, sink, ToolResult(REJECTED, failed=True))
        sink.tool_running(call)
        ctx = ToolContext(cwd=conv.cwd, config=self.cfg, skills=conv.skills)
        try:
            result = call.tool.run(call.arguments, ctx, cancel)
        except Cancelled:
            self._finish(conv, call, sink, ToolResult(CANCELLED_RESULT, failed=True))
            raise
        stats.count(call.name)
        self._finish(conv, call, sink, result)

    def _permitted(self, conv: Conversation, call: Call, sink: Sink, cancel: threading.Event) -> bool:
        if not call.tool.needs_permission or call.name in conv.allow_always:
            return True
        choice = sink.permission(call, cancel)
        if cancel.is_set():
            self._finish(conv, call, sink, ToolResult(CANCELLED_RESULT, failed=True))
            raise Cancelled()
        if choice == "allow_always":
            conv.allow_always.add(call.name)
        return choice in ("allow", "allow_always")

    def _finish(self, conv: Conversation, call: Call, sink: Sink, result: ToolResult) -> None:
        conv.messages.append(_result_message(conv.messages, call, result.output))
        sink.tool_finished(call, result)

    def _maybe_compress(self, conv: Conversation, cancel: threading.Event) -> None:
        window, threshold = self.cfg.context.window, self.cfg.context.threshold
        if not compress.should_compress(conv.last_input_tokens, window, threshold):
            return
        # The turn under way is always kept whole: its question must reach the model.
        keep = max(self.cfg.context.keepLastTurns, 1)
        outcome = compress.compress(conv.messages, self.provider, keep, cancel)
        if outcome.changed:
            conv.messages[:] = outcome.messages
            conv.last_input_tokens = None
        if self.log is not None:
            self.log.info(f"[acp] automatic compression — {outcome.line}")

    def _settle(self, conv: Conversation, question: dict, cancel: threading.Event) -> None:
        """Leave a valid history: every tool call answered; a question with no answer removed."""
        for call in history.unanswered_calls(conv.messages):
            conv.messages.append(history.tool_result(call, CANCELLED_RESULT if cancel.is_set() else NOT_RUN))
        if conv.messages and conv.messages[-1] is question:
            conv.messages.pop()


def _result_message(messages: list[dict], call: Call, output: str) -> dict:
    for message in reversed(messages):
        if message["role"] == "assistant":
            for recorded in message.get("tool_calls", ()):
                if recorded.get("ref") == call.ref:
                    return history.tool_result(recorded, output)
            break
    raise RuntimeError(f"tool call {call.ref} is not in the last assistant message")


class _Repeats:
    """Counts how many times in a row the same call (name and arguments) was made."""

    def __init__(self) -> None:
        self._last: bytes | None = None
        self._times = 0

    def see(self, call: Call) -> int:
        key = call.name.encode() + b"\0" + orjson.dumps(call.arguments, option=orjson.OPT_SORT_KEYS)
        self._times = self._times + 1 if key == self._last else 1
        self._last = key
        return self._times
