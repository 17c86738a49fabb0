"""The engine: one turn of the agent (generate, stream, run the tool calls in order, repeat), and
the conversation commands /new and /compact.

The engine knows no JSON-RPC: it reports through a Sink the ACP layer implements, and it keeps
the conversation (bob_acp.context.history format) valid whatever happens: after a cancel, a failure or a
stopped loop every tool call the model made has a result.
"""

from __future__ import annotations

import os
import random
from typing import TYPE_CHECKING, Any, Callable, TypeVar

import orjson

from bob_acp import sandbox, threads
from bob_acp.cancel import SHUTDOWN, Cancel
from bob_acp.checkpoints import CheckpointError
from bob_acp.checkpoints.changes import Window
from bob_acp.context import history, system_prompt
from bob_acp.engine import compress
from bob_acp.engine.calls import (
    CANCELLED_RESULT,
    NOT_RUN,
    REJECTED,
    Call,
    NotRun,
    Repeats,
    failed,
    make_call,
    result_message,
)
from bob_acp.engine.conversation import Conversation, Refs
from bob_acp.engine.gate import Gate
from bob_acp.engine.sink import Sink, TurnFailed, TurnStats
from bob_acp.engine.stops import CANCELLED, END_TURN, MAX_TOKENS, MAX_TURN_REQUESTS, REFUSAL
from bob_acp.exceptions import BobError, Cancelled, ModelError
from bob_acp.files.workspace import Workspace, too_broad
from bob_acp.ids import new_id
from bob_acp.providers.base import Provider
from bob_acp.providers.models import ModelSet, Option
from bob_acp.sandbox import policy
from bob_acp.tools.base import LiveOutput, ToolContext, ToolResult
from bob_acp.tools.builtin import BUILTIN

if TYPE_CHECKING:
    from bob_acp.config import Config
    from bob_acp.context.skills import Catalog
    from bob_acp.log import Logger
    from bob_acp.providers.base import ModelReply, Usage
    from bob_acp.tools.base import ToolSet



T = TypeVar("T")

# A reported count past these is taken for a server's garbage (one log line; no cost from it):
# a prompt of more than PROMPT_SLACK times Bob's own estimate of what it sent (characters / 4:
# real tokenisers give 1-4 times that), plus a fixed slack; a reply of more than OUTPUT_CEILING.
PROMPT_SLACK = 4
PROMPT_FLOOR = 8192
OUTPUT_CEILING = 1 << 20


class _LoopStop(Exception):
    def __init__(self, call: Call, times: int):
        super().__init__(f"the same tool call was repeated {times} times in a row ({call.title})")


class _Stream:
    """The provider's pieces, to the sink under this model message's ids."""

    def __init__(self, sink: Sink):
        self.sink = sink
        self.parts: list[str] = []
        self.message_id = new_id()
        self.thought_id = new_id()

    def text(self, chunk: str) -> None:
        if chunk:
            self.parts.append(chunk)
            self.sink.text(chunk, self.message_id)

    def thought(self, chunk: str) -> None:
        if chunk:
            self.sink.thought(chunk, self.thought_id)

    def retrying(self, attempt: int, delay: float, why: str) -> None:
        self.sink.retrying(attempt, delay, why)


_labels = random.Random(os.urandom(16))  # distinct, not secret (see sessions.new_id)


def new_owner() -> str:
    """A session's label for the processes its commands start (bob_acp.processes.children reads it)."""
    return f"session-{_labels.getrandbits(48):012x}"


class Engine:
    def __init__(self, cfg: Config, provider: Provider | ModelSet | None, no_model_message: str = "", log: Logger | None = None,
                 refs: Refs | None = None, env: dict[str, Any] | None = None, redact: Callable[[Any], Any] | None = None):
        self.cfg = cfg
        # Every model a session may pick (a lone provider: the configured model alone).
        self.models = provider if isinstance(provider, ModelSet) else ModelSet.single(cfg, provider, log)
        self.no_model_message = no_model_message
        self.log = log
        self.refs = refs or Refs()
        self.env = env  # the environment tools start with (secrets dropped)
        # Known secret values out of every tool result before the model, the client or the
        # session file sees it (an approved command can still print a key it found).
        self.redact = redact if redact is not None else _same
        self.gate = Gate(cfg, log)  # (the permission question, the approval modes and the project's rules)

    # ---- conversations -----------------------------------------------------------------------

    def new_conversation(self, ws: Workspace, catalog: Catalog, stored: list[dict[str, Any]] | None = None,
                         tools: ToolSet = BUILTIN, prompt: str | None = None) -> Conversation:
        """A fresh history holding the system prompt (`prompt`, or the one built for these),
        or a stored one whose system prompt is replaced by the current one."""
        if prompt is None:
            prompt = system_prompt.build(ws, catalog, tools=tools.names())
        messages = [history.system(prompt)]
        if stored:
            messages += [m for m in stored if m["role"] != "system"]
        owner = new_owner()
        conv = Conversation(workspace=ws, messages=messages, skills=catalog.skills, tools=tools,
                            mode=self.cfg.permissions.mode, owner=owner)
        broad = too_broad(ws)
        if broad is None:
            conv.sandbox = sandbox.for_session(self.cfg, ws, owner, self.log)
        conv.unoffered = policy.unoffered_modes(conv.sandbox, broad)
        if conv.mode in conv.unoffered:
            conv.notices.append(f"This session asks before every tool call (approval mode ask, not {conv.mode}): "
                                f"{conv.unoffered[conv.mode]}.")
            conv.mode = "ask"
        elif broad is not None and self.cfg.tools.sandbox != "off":  # (its commands run without the sandbox)
            conv.notices.append(f"{conv.unoffered['allow-edits'][0].upper()}{conv.unoffered['allow-edits'][1:]}.")
        if conv.sandbox is not None and conv.sandbox.refusal() is not None:
            conv.notices.append(f"The sandbox (tools.sandbox: {self.cfg.tools.sandbox}) cannot be had here "
                                f"({conv.sandbox.partial() or 'this kernel has no Landlock'}): this session's commands "
                                "are refused unless run unconfined, which asks you each time. tools.sandbox: "
                                "best-effort runs them with what this machine offers.")
        return conv

    def reset(self, conv: Conversation) -> list[dict[str, Any]]:
        """/new: the history back to its system prompt; returns the messages it held."""
        before = list(conv.messages)
        conv.messages[:] = conv.messages[:1]
        conv.forget_count()
        return before

    def compact(self, conv: Conversation, sink: Sink, cancel: Cancel) -> str:
        """/compact: compress now (the threshold ignored, keepLastTurns honoured); the line to show."""
        option = self.models.pick(conv.model)
        if option.entry.provider is None:
            return "[compact: failed, history kept: no model is configured]"
        outcome = self._compress(conv, option, self.cfg.context.keepLastTurns, sink, cancel, automatic=False)
        if outcome.usage is not None:
            conv.cost += self._price(outcome.usage, option)
        if outcome.changed:
            conv.messages[:] = outcome.messages
            conv.forget_count()
            sink.usage(conv.context_tokens(), self.window(option), self._cost(conv))
        return outcome.line

    # ---- a turn ------------------------------------------------------------------------------

    def run_turn(self, conv: Conversation, text: str, sink: Sink, cancel: Cancel,
                 typed: str | None = None, images: list[dict[str, Any]] | None = None) -> tuple[str, TurnStats]:
        """Run one prompt turn; returns (stop reason, stats) or raises TurnFailed. `typed`: what
        the user wrote, when `text` is Bob's rewrite of it (kept for the replay)."""
        stats = TurnStats()
        option = self.models.pick(conv.model)
        if option.entry.provider is None:
            refusal = self.no_model_message if option.entry is self.models.default else (
                f"The model {option.value} cannot be used: {option.entry.problem}. Pick another model, or "
                "configure this one and start a new session.")
            sink.text(refusal, new_id())
            return REFUSAL, stats
        question = history.user(text, typed, images)
        conv.messages.append(question)
        if conv.checkpoints is not None:
            conv.checkpoints.begin_turn()
        conv.steering.open(cancel)
        try:
            stop = self._loop(conv, sink, cancel, stats)
        except Cancelled:
            stop = CANCELLED
        except _LoopStop as loop:
            sink.text(f"\n\n[turn stopped: {loop}]", new_id())
            stop = END_TURN
        except ModelError as exc:
            if not cancel.is_set():  # a cancel is never an error, whatever the provider raised
                raise TurnFailed(str(exc), stats) from None
            stop = CANCELLED
        finally:
            unread = conv.steering.close()
            self._settle(conv, question, cancel)
            if unread and any(message is question for message in conv.messages):
                conv.messages += unread  # (said as the turn ended, unread: kept, as the user's)
            if conv.checkpoints is not None:
                self._end_checkpoint(conv, sink, question)
            if conv.sandbox is not None:
                self._rest_sandbox(conv, sink)
        return (CANCELLED if cancel.is_set() else stop), stats

    def _end_checkpoint(self, conv: Conversation, sink: Sink, question: dict[str, Any]) -> None:
        """The turn's record, when Bob's calls changed files (tools.checkpoints)."""
        assert conv.checkpoints is not None
        try:
            if conv.checkpoints.end_turn(question) is not None:
                self._say(sink, conv.checkpoints.tidy())
        except (CheckpointError, OSError) as exc:
            sink.notice("This turn could not be recorded: /undo cannot take it back", str(exc))
            if self.log is not None:
                self.log.warning(f"[acp] checkpoint after the turn failed: {exc}")

    @staticmethod
    def _rest_sandbox(conv: Conversation, sink: Sink) -> None:
        """The sandbox idle between turns ends; what its jobs planted before they ended is said."""
        assert conv.sandbox is not None
        planted = conv.sandbox.rest()
        if planted:
            sink.notice(sandbox.PLANTED_TITLE, ", ".join(planted))

    def _loop(self, conv: Conversation, sink: Sink, cancel: Cancel, stats: TurnStats) -> str:
        repeats = Repeats()
        compression = _CompressionTries()
        for _ in range(self.cfg.limits.maxModelCalls):
            self._steered(conv, sink, conv.steering.take())
            self._maybe_compress(conv, sink, cancel, compression)
            calls, truncated = self._generate(conv, sink, cancel)
            if truncated:
                return MAX_TOKENS  # the partial reply is in the history; nothing of it runs
            if not calls:
                if self._steered(conv, sink, conv.steering.take_or_close()):
                    continue  # (what the user added while the model answered is answered too)
                return END_TURN
            for call in calls:
                self._run_call(conv, call, sink, cancel, stats, repeats.see(call))
        return MAX_TURN_REQUESTS

    def _steered(self, conv: Conversation, sink: Sink, messages: list[dict[str, Any]]) -> bool:
        """What the user added to the running turn joins the history, after every result of
        the calls before it (a call is never cut), and is shown as the user's in the turn."""
        conv.messages += messages
        for message in messages:
            sink.user_text(message.get("typed") or history.text_of(message), new_id())
        if messages and self.log is not None:
            self.log.info(f"[acp] {len(messages)} message(s) the user added to the running turn read")
        return bool(messages)

    def _generate(self, conv: Conversation, sink: Sink, cancel: Cancel) -> tuple[list[Call], bool]:
        threads.doing.note(turn="calling the model")
        stream = _Stream(sink)
        sent = len(conv.messages)
        option = self.models.pick(conv.model)
        provider = option.entry.provider
        if provider is None:  # (run_turn refuses before: a model chosen mid-turn is not possible)
            raise ModelError(f"the model {option.value} cannot be used: {option.entry.problem}")
        tools = conv.tools.current(cancel)  # an MCP server's tools may have changed since the last call
        try:
            reply = provider.generate(self._sent(conv, option), tools.specs(), stream, cancel,
                                                   model=option.name, reasoning=conv.reasoning)
        except (Cancelled, ModelError):
            if stream.parts:  # what the user already saw stays in the history
                conv.messages.append(history.assistant("".join(stream.parts)))
            raise
        self._check_usage(reply, conv, tools)
        tokens = reply.input_tokens if reply.input_tokens is not None else compress.estimate_tokens(conv.messages)
        conv.count(tokens, sent)
        conv.cost += self._price(reply.usage, option)
        self._log_usage(reply.usage)
        sink.usage(tokens, self.window(option), self._cost(conv))
        text = "".join(stream.parts) or reply.text
        if reply.truncated:  # cut at the token limit: the text stays, a call it was making does not run
            conv.messages.append(history.assistant(text, None, reply.thinking, option.entry.id))
            return [], True
        per_command = self.cfg.permissions.allowAlways == "command"
        calls = [make_call(self.refs.next(), tc.name, tc.arguments, tools.get(tc.name), conv.workspace, per_command)
                 for tc in reply.tool_calls]
        recorded = [{"id": tc.id, "ref": c.ref, "name": c.name, "arguments": c.arguments}
                    for tc, c in zip(reply.tool_calls, calls, strict=True)]
        conv.messages.append(history.assistant(text, recorded, reply.thinking, option.entry.id))
        return calls, False

    def _check_usage(self, reply: ModelReply, conv: Conversation, tools: ToolSet) -> None:
        """Counts a server reported that are far beyond what was sent or received are not acted
        on (no compression, no cost from them): one log line, and Bob's own estimate instead."""
        usage = reply.usage
        if usage.input is not None:
            sent = compress.estimate_tokens(conv.messages) + len(orjson.dumps(tools.specs())) // 4
            if usage.input > PROMPT_SLACK * sent + PROMPT_FLOOR:
                self._warn(f"[acp] the model server reported a prompt of {usage.input} tokens for about {sent} "
                           "sent: ignored (Bob's own estimate is used)")
                usage.input = None
                reply.input_tokens = None
        if usage.output is not None and usage.output > OUTPUT_CEILING:
            self._warn(f"[acp] the model server reported {usage.output} output tokens: ignored")
            usage.output = None

    def _warn(self, line: str) -> None:
        if self.log is not None:
            self.log.warning(line)

    def _run_call(self, conv: Conversation, call: Call, sink: Sink, cancel: Cancel, stats: TurnStats,
                  times: int) -> None:
        """One call, from its question to its result: the one place a call's result joins the
        history (_finish), whether it ran or not (NotRun)."""
        if cancel.is_set():  # nothing more runs once the turn is cancelled; _settle answers the rest
            raise Cancelled()
        try:
            result = self._step(conv, call, sink, cancel, stats, times)
        except NotRun as not_run:
            self._finish(conv, call, sink, failed(str(not_run)))
            if not_run.then is not None:
                raise not_run.then from None
            return
        self._finish(conv, call, sink, result)

    def _step(self, conv: Conversation, call: Call, sink: Sink, cancel: Cancel, stats: TurnStats,
              times: int) -> ToolResult:
        """The call's result, or NotRun; a call that started is counted in `stats`."""
        ctx = ToolContext(workspace=conv.workspace, config=self.cfg, skills=conv.skills, env=self.env, owner=conv.owner or None,
                          sandbox=conv.sandbox, client=conv.client)
        call.sandboxed = policy.confined(conv.sandbox, call.name, call.arguments)
        call.partial = policy.lacking(conv.sandbox) if call.sandboxed else None
        tool = call.tool
        if tool is not None and times < self.cfg.loop.warnAt:
            call.preview = _quietly(lambda: tool.preview(call.arguments, ctx))
        sink.tool_pending(call)
        if tool is None:
            known = ", ".join(conv.tools.current(cancel).names())
            raise NotRun(f"error: unknown tool '{call.name}'; the tools are: {known}")
        if times >= self.cfg.loop.stopAt:
            raise NotRun(f"[not run: this exact call was made {times} times in a row]", _LoopStop(call, times))
        if times >= self.cfg.loop.warnAt:
            raise NotRun(f"[not run: this exact call was made {times} times in a row; it would give the same result. "
                         "Try a different approach.]")
        threads.doing.note(turn=f"{call.ref} ({call.name}): permission")
        if not self._permitted(conv, call, sink, cancel):
            raise NotRun(f"[rejected by the user: {call.reason}]" if call.reason else REJECTED)
        sink.tool_running(call)
        threads.doing.note(turn=f"{call.ref} ({call.name}): running")
        ctx.confine = call.confine
        if call.name == "bash" and conv.sandbox is not None and not call.sandboxed and self.log is not None:
            self.log.info("[acp] unconfined run (outside the sandbox): {title}", tool=call.name, call=call.ref,
                          title=call.title)
        redact = self.redact
        ctx.live = LiveOutput(lambda tail, delta: sink.tool_output(call, redact(tail), redact(delta)),
                              self.cfg.tools.bash.outputLimit)

        def show_terminal(terminal_id: str) -> None:
            call.terminal = terminal_id
            sink.tool_terminal(call)

        ctx.show_terminal = show_terminal
        ctx.ask = lambda question, options: sink.ask(call, question, options, cancel)
        try:
            window = self._open_window(conv, call, sink, cancel)  # (a cancel during its look ends the call too)
            if window is not None:  # (what the editor gave and was given: the file as the user sees it)
                window.editor_texts, window.editor_written = ctx.editor_texts, ctx.editor_written
            try:
                result = tool.run(call.arguments, ctx, cancel)
            finally:
                if window is not None:
                    self._close_window(conv, window, sink)
        except Cancelled:
            raise NotRun(_cancelled(cancel), Cancelled()) from None
        except BobError as exc:  # (a thread or process the machine would not give: in words)
            stats.count(call)
            raise NotRun(f"error: {call.name} could not run: {exc}") from None
        except Exception as exc:  # a tool's own failure: a result the model reads; the call never stays open
            stats.count(call)
            if self.log is not None:
                self.log.error(f"[acp] {call.ref} ({call.name}) failed", detail=_traceback())
            raise NotRun(f"error: {call.name} failed: {type(exc).__name__}: {exc}") from None
        stats.count(call)
        return result

    def _open_window(self, conv: Conversation, call: Call, sink: Sink, cancel: Cancel) -> Window | None:
        """Before a call that may change files (tools.checkpoints): what it may change, as it is
        now; a failure is said once a turn and the call runs unrecorded."""
        if conv.checkpoints is None or call.tool is None or not call.tool.changes_files:
            return None
        path = call.arguments.get("path")
        target = conv.workspace.resolve(path) if isinstance(path, str) and path and "\0" not in path else None
        try:
            command = call.arguments.get("command") if call.name == "bash" else None
            window, said = conv.checkpoints.open_window(call.name, target, cancel,
                                                        command if isinstance(command, str) else "",
                                                        one_file=call.tool.one_file)
        except (CheckpointError, OSError) as exc:
            self._checkpoint_failed(conv, sink, exc)
            return None
        self._say(sink, said)
        return window

    def _close_window(self, conv: Conversation, window: Window, sink: Sink) -> None:
        assert conv.checkpoints is not None
        try:
            self._say(sink, conv.checkpoints.close_window(window, window.command != "" and self._jobs_left(conv)))
        except (CheckpointError, OSError) as exc:
            self._checkpoint_failed(conv, sink, exc)

    @staticmethod
    def _jobs_left(conv: Conversation) -> bool:
        """Whether a command of the session left a job running (in its sandbox, or carrying its label)."""
        if conv.sandbox is not None and conv.sandbox.jobs_running():
            return True
        from bob_acp.processes import children

        return bool(conv.owner) and children.running(conv.owner)

    def _checkpoint_failed(self, conv: Conversation, sink: Sink, exc: Exception) -> None:
        if self.log is not None:
            self.log.warning(f"[acp] checkpoint of a call failed: {exc}")
        if conv.checkpoints is not None and conv.checkpoints.first_failure():
            sink.notice("A change of this turn cannot be recorded: /undo will not take it back", str(exc))

    @staticmethod
    def _say(sink: Sink, line: str) -> None:
        if line:
            sink.notice(line, severity="info")

    def _permitted(self, conv: Conversation, call: Call, sink: Sink, cancel: Cancel) -> bool:
        try:
            return self.gate.permitted(conv, call, sink, cancel)
        except Cancelled:
            raise NotRun(_cancelled(cancel), Cancelled()) from None

    def _finish(self, conv: Conversation, call: Call, sink: Sink, result: ToolResult) -> None:
        result.output = self.redact(result.output)
        if result.diff is not None:
            diff = result.diff
            diff.old_text = None if diff.old_text is None else self.redact(diff.old_text)
            diff.new_text = self.redact(diff.new_text)
        conv.messages.append(result_message(conv.messages, call, result.output, result.failed))
        sink.tool_finished(call, result)
        if result.plan is not None:
            sink.plan(result.plan)

    def _maybe_compress(self, conv: Conversation, sink: Sink, cancel: Cancel, tries: "_CompressionTries") -> None:
        option = self.models.pick(conv.model)
        window, threshold = self.window(option), self.cfg.context.threshold
        provider = option.entry.provider
        if provider is None or not compress.should_compress(conv.context_tokens(), window, threshold) or tries.failed >= 2:
            return  # (after a failure it is tried once more in the turn, then no more: each try is paid for)
        # The turn under way is always kept whole: its question must reach the model.
        keep = max(self.cfg.context.keepLastTurns, 1)
        outcome = self._compress(conv, option, keep, sink, cancel, automatic=True)
        if outcome.usage is not None:
            conv.cost += self._price(outcome.usage, option)
        if outcome.changed:
            conv.messages[:] = outcome.messages
            conv.forget_count()
            sink.usage(conv.context_tokens(), window, self._cost(conv))
        if self.log is not None:
            self.log.info(f"[acp] automatic compression — {outcome.line}")
        if outcome.failed:
            tries.failed += 1

    def _compress(self, conv: Conversation, option: Option, keep: int, sink: Sink, cancel: Cancel,
                  automatic: bool) -> compress.Compression:
        """compress.compress, its course told to the sink (once there is something to summarise)."""
        compaction_id = new_id()
        started = []

        def start() -> None:
            started.append(True)
            sink.compaction(compaction_id, "in_progress", automatic)

        assert option.entry.provider is not None
        try:
            outcome = compress.compress(self._sent(conv, option), option.entry.provider, keep, cancel,
                                        model=option.name, on_start=start)
        except Cancelled:
            if started:
                sink.compaction(compaction_id, "cancelled", automatic)
            raise
        if started and outcome.changed:
            sink.compaction(compaction_id, "completed", automatic, summary=outcome.summary)
        elif started:
            why = outcome.line.removeprefix("[compact: failed, history kept: ").rstrip("]")
            sink.compaction(compaction_id, "failed", automatic, error=why)
        return outcome

    def _settle(self, conv: Conversation, question: dict[str, Any], cancel: Cancel) -> None:
        """Leave a valid history: every tool call answered; a question with no answer removed."""
        for call in history.unanswered_calls(conv.messages):
            conv.messages.append(history.tool_result(call, _cancelled(cancel) if cancel.is_set() else NOT_RUN, True))
        if conv.messages and conv.messages[-1] is question:
            conv.messages.pop()

    # ---- cost --------------------------------------------------------------------------------

    def _price(self, usage: Usage, option: Option) -> float:
        price = option.entry.settings.price
        if price.input is None and price.output is None:
            return 0.0
        return ((usage.input or 0) * (price.input or 0) + (usage.output or 0) * (price.output or 0)) / 1e6

    def _cost(self, conv: Conversation) -> float | None:
        priced = any(e.settings.price.input is not None or e.settings.price.output is not None
                     for e in self.models.entries)
        return conv.cost if priced else None

    def window(self, option: Option) -> int:
        """The context window of the model a session uses (its own `window`, else context.window)."""
        return option.entry.settings.window or self.cfg.context.window

    @staticmethod
    def _sent(conv: Conversation, option: Option) -> list[dict[str, Any]]:
        """The history as this model receives it: another model's reasoning left out (signed
        thinking and encrypted reasoning cannot cross to a model that did not make them)."""
        if not any("thinking" in m and m.get("by") not in (None, option.entry.id) for m in conv.messages):
            return conv.messages
        return history.without_others_thinking(conv.messages, option.entry.id)

    def _log_usage(self, usage: Usage) -> None:
        if self.log is not None and (usage.cache_read or usage.cache_write):
            self.log.info(f"[acp] model call: {usage.input} input token(s), {usage.cache_read} read from the cache, "
                          f"{usage.cache_write} written to it")


class _CompressionTries:
    """How automatic compression went in this turn."""

    __slots__ = ("failed",)

    def __init__(self) -> None:
        self.failed = 0


def _traceback() -> str:
    import traceback

    return traceback.format_exc()


def _same(text: T) -> T:
    return text


def _quietly(work: Callable[[], T]) -> T | None:
    try:
        return work()
    except Exception as exc:  # a preview is a courtesy: the call itself reports any problem
        from bob_acp import log

        log.get("bob.engine").debug(f"no preview of the proposed change: {exc!r}")
        return None


def _cancelled(cancel: Cancel) -> str:
    """A call's result when its turn was cancelled: by the user, or by Bob's own shutdown."""
    return history.SHUT_DOWN_RESULT if cancel.reason == SHUTDOWN else CANCELLED_RESULT
