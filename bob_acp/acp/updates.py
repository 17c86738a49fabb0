"""The engine's events as ACP frames for one session's turn (a Sink of bob_acp.engine)."""

from __future__ import annotations

from bob_acp import visible
from bob_acp.acp import protocol as p
from bob_acp.acp.channel import ClientChannel
from bob_acp.acp.session import Session
from bob_acp.cancel import Cancel
from bob_acp.exceptions import Cancelled
from bob_acp.ids import new_id
from bob_acp.jsonrpc.endpoint import PeerError, answer_of
from bob_acp.jsontext import clean, mapping

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from bob_acp.engine.calls import Call
    from bob_acp.jsonrpc.sent import Sent
    from bob_acp.log import Logger
    from bob_acp.tools.base import Answer, ToolResult


RAW_OUTPUT_LIMIT = p.MAX_TEXT
MAX_ANSWER = 20000  # characters of a typed answer the model is given
# A choice's options, each its own kind, in the order CodeCompanion numbers its labels 1 to 4
CHOICE_KINDS = ("allow_always", "allow_once", "reject_once", "reject_always")
CANCEL_FOLLOWS = 0.5  # seconds a "cancelled" permission answer waits for the session/cancel behind it


def result_language(name: str, arguments: dict[str, Any]) -> str:
    """The fence's language for a tool's text result."""
    if name == "bash":
        return "console"
    if name == "read_file" and isinstance(arguments.get("path"), str):
        return p.language_of(arguments["path"])
    if name == "read_skill":
        return "markdown"
    return ""


def result_content(name: str, arguments: dict[str, Any], output: str) -> list[dict[str, Any]]:
    return [p.text_content(p.fenced(output, result_language(name, arguments)))]


def locations(call: Call) -> list[dict[str, Any]]:
    return [p.location(loc.path, loc.line) for loc in call.locations]


def say_news(channel: ClientChannel, session: Session, sink: TurnSink | None = None, fresh_line: bool = False) -> None:
    """What the session's user must hear (Session.news), if it can be said now: as notices to a
    client that shows them, else as lines of the turn `sink` belongs to (`fresh_line`: after
    the model's text, on a line of its own, never glued to it)."""
    notices = channel.capabilities.notices
    for title, description, severity in session.news.take(notices, sink is not None):
        if notices or sink is None:
            channel.notice(session.id, title, description, severity)
            continue
        mark = {"warning": "⚠️ ", "error": "❌ "}.get(severity, "")
        line = f"{mark}{title}{f' {description}' if description else ''}\n"
        sink.text(("\n" if fresh_line else "") + line, new_id())


class TurnSink:
    def __init__(self, channel: ClientChannel, log: Logger, session: Session, cancel: Cancel):
        self.channel = channel
        self.log = log
        self.sid = session.id
        self.cwd = session.cwd
        self.cancel = cancel
        # Zed's display-only terminal (_meta), unless commands run in the editor's own terminals.
        client = session.conv.client
        self.terminal = channel.capabilities.terminal_output and not (client is not None and client.can_run)
        self._compression_failure_told = False
        self.ask_user = session.runtime.cfg.tools.askUser

    def send(self, update: dict[str, Any]) -> None:
        # While the client is not reading, the turn waits for room; a cancelled turn stops waiting.
        self.channel.update(self.sid, update, self.cancel.is_set)

    def text(self, chunk: str, message_id: str) -> None:
        self.send(p.agent_chunk(chunk, message_id))

    def thought(self, chunk: str, message_id: str) -> None:
        self.send(p.thought_chunk(chunk, message_id))

    def user_text(self, chunk: str, message_id: str) -> None:
        self.send(p.user_chunk(chunk, message_id))

    def retrying(self, attempt: int, delay: float, why: str) -> None:
        self.log.info("[acp] session {session}: {reason}; retry {attempt} in {delay} s", session=self.sid,
                      reason=why, attempt=attempt, delay=f"{delay:.1f}")
        if self.channel.capabilities.retry_events:
            self.channel.notify(p.RETRY_EVENT, {"sessionId": self.sid, "attempt": attempt, "delay": round(delay, 3),
                                                "reason": why}, self.cancel.is_set)
        if self.channel.capabilities.notices:
            self.send(p.notice(f"The model call is retried in {delay:.1f} s (retry {attempt})", why, "warning"))

    def notice(self, title: str, description: str | None = None, severity: str = "warning") -> None:
        self.channel.notice(self.sid, title, description, severity, self.cancel.is_set)

    def compaction(self, compaction_id: str, status: str, automatic: bool, summary: str = "",
                   error: str = "") -> None:
        """To a client that follows compactions: each step. To one that shows notices: how it
        ended. To any other: an automatic compression that failed, once a turn (a /compact says
        its own outcome)."""
        capabilities = self.channel.capabilities
        if capabilities.compaction:
            if summary:
                self.send(p.compaction_summary_chunk(compaction_id, summary))
            self.send(p.compaction_update(compaction_id, status, error or None))
        elif capabilities.notices and status == "completed":
            what = "The conversation so far was summarised" + (" (it neared the context window)" if automatic else "")
            self.send(p.notice(what, None, "info"))
        elif capabilities.notices and status == "failed":
            self.send(p.notice("The conversation could not be summarised; it is kept whole", error, "warning"))
        elif automatic and status == "failed" and not self._compression_failure_told:
            self._compression_failure_told = True
            self.text(f"⚠️ The history is near the context window and automatic compression failed ({error}); "
                      "the history is kept whole.\n", new_id())

    def usage(self, used: int, size: int, cost: float | None) -> None:
        self.send(p.usage_update(used, size, cost))

    def _terminal(self, call: Call) -> bool:
        return self.terminal and call.name == "bash"

    def _proposed(self, call: Call) -> list[dict[str, Any]] | None:
        if call.preview is None:
            return None
        return [p.diff_content(call.preview.path, call.preview.old_text, call.preview.new_text)]

    def tool_pending(self, call: Call) -> None:
        content = self._proposed(call)
        meta: dict[str, object] | None = None
        if self._terminal(call):
            content = [p.terminal_content(call.ref)]
            meta = {"terminal_info": {"terminal_id": call.ref, "cwd": self.cwd}}
        if call.sandboxed:  # (tools.sandbox) the client can say the command runs confined, and how far
            bob: dict[str, object] = {"sandboxed": True}
            if call.partial:
                bob["partial"] = call.partial
            meta = {**(meta or {}), "bob": bob}
        self.send(p.tool_call(call.ref, call.title, call.kind, call.arguments, locations(call),
                               content=content, meta=meta))

    def permission(self, call: Call, cancel: Cancel) -> str:
        project = call.proposal.covered() if call.proposal is not None else None
        if call.grant is None:  # this call can never be remembered: no "always" to offer
            options = p.permission_options(None, project)
        else:
            whole = call.tool is not None and call.grant == call.tool.grant_key
            options = p.permission_options(call.name if whole else f"`{call.grant}`", project)
        params = {
            "sessionId": self.sid,
            "toolCall": p.tool_request(call.ref, call.title, call.kind, call.arguments, locations(call),
                                       self._proposed(call)),
            "options": options,
        }
        outcome = self.channel.ask(p.REQUEST_PERMISSION, params, cancel)
        choice = chosen_option(outcome, {o["optionId"] for o in options})
        if choice == p.REJECT:
            call.reason = rejection_reason(outcome)
            if not call.reason and self.ask_user and self.channel.capabilities.forms and not cancel.is_set() \
                    and not outcome.cancelled() and not _cancelled_outcome(outcome):
                call.reason = self._instead(call, cancel)
        if _cancelled_outcome(outcome):
            # A client answers "cancelled" once it has cancelled the turn (ACP): its session/cancel
            # is on the way (it goes through the dispatcher, the answer does not). A rejection
            # either way; give the cancel a moment so the turn ends as the person meant.
            cancel.wait(CANCEL_FOLLOWS)
        failed = None if outcome.cancelled() else outcome.exception()
        if choice == p.REJECT and (outcome.cancelled() or failed is not None):
            why = failed.error if isinstance(failed, PeerError) else "no answer"
            self.log.info(f"[acp] session {self.sid}: permission for {call.ref} counted as rejected: {str(why)[:200]}")
        return choice

    def ask(self, call: Call, question: str, options: list[str], cancel: Cancel) -> Answer:
        """ask_user: a form the client shows, where it has them (a client that fails the form,
        as the Python SDK's does without its unstable flag, gets the choice below instead); else,
        with options, a choice among them as a permission question (every client has those);
        else no way to ask. What the user gives is one line, its controls made visible."""
        from bob_acp.tools.base import Answer  # (a tool type: not loaded to answer `initialize`)

        if self.channel.capabilities.forms:
            field: dict[str, Any] = {"type": "string", "title": "Your answer"}
            if options:
                field["enum"] = options
            outcome = self._form(call, question, {"answer": field}, ["answer"], cancel)
            if isinstance(outcome, Answer):
                return outcome
            if outcome is not None:
                answer = outcome.get("answer")
                if not isinstance(answer, str) or (options and answer not in options):
                    return Answer("error: the editor's form came back without an answer of the asked kind", True)
                return Answer(f"The user answered: {visible.line(clean(answer))[:MAX_ANSWER]}")
        if options and len(options) <= len(CHOICE_KINDS):
            return self._choice(call, question, options, cancel)
        if options:
            return Answer(f"error: this client takes no typed answer and shows at most {len(CHOICE_KINDS)} choices "
                          "apart: ask with fewer options, or ask in your reply and end your turn.", True)
        return Answer("error: this client cannot take a typed answer (it offers no form to fill in). Ask the question "
                      "in your reply and end your turn, or call ask_user again with options to choose from.", True)

    def _choice(self, call: Call, question: str, options: list[str], cancel: Cancel) -> Answer:
        """A choice as a permission question. Clients label options by kind (CodeCompanion
        numbers them 1-4 by kind, agent-shell gives each kind a key), so each option gets a kind
        of its own, in the order that numbers them 1, 2, 3, 4; its name and the question carry
        its number too. With two options or fewer, a "none of these" rejects (what closing the
        question picks)."""
        from bob_acp.tools.base import Answer  # (a tool type: not loaded to answer `initialize`)

        numbered = [f"{index}: {visible.line(option)}" for index, option in enumerate(options, 1)]
        offered = [{"optionId": f"answer-{index}", "name": name, "kind": kind}
                   for index, (name, kind) in enumerate(zip(numbered, CHOICE_KINDS[:len(numbered)], strict=True))]
        if len(options) <= 2:
            offered.append({"optionId": "no-answer", "name": "None of these (don't answer)", "kind": "reject_once"})
        title = f"{visible.line(question)} ({'; '.join(numbered)})"
        params = {"sessionId": self.sid, "options": offered,
                  "toolCall": p.tool_request(call.ref, title, "other", call.arguments, [])}
        sent = self.channel.ask(p.REQUEST_PERMISSION, params, cancel)
        self._cancelled(cancel)
        chosen = chosen_option(sent, {o["optionId"] for o in offered})
        if chosen.startswith("answer-"):
            return Answer(f"The user answered: {visible.line(options[int(chosen[7:])])}")
        return Answer("The user did not answer (they dismissed the question).")

    def _instead(self, call: Call, cancel: Cancel) -> str:
        """After a rejection the client gave no reason with: what to do instead, asked in a form
        (optional; "" when none is given)."""
        field = {"type": "string", "title": "What should Bob do instead? (optional)"}
        try:
            outcome = self._form(call, f"You rejected {call.title}.", {"instead": field}, [], cancel)
        except Cancelled:  # (the turn's cancel: the rejection stands, and the turn ends)
            return ""
        if not isinstance(outcome, dict):
            return ""
        instead = outcome.get("instead")
        return " ".join(clean(instead).split())[:500] if isinstance(instead, str) else ""

    def _form(self, call: Call, message: str, fields: dict[str, Any], required: list[str],
              cancel: Cancel) -> dict[str, Any] | Answer | None:
        """An elicitation/create form for `call`: the accepted content, an Answer that says why
        there is none (declined, dismissed, not answered), or None when the client failed it."""
        from bob_acp.tools.base import Answer  # (a tool type: not loaded to answer `initialize`)

        schema: dict[str, Any] = {"type": "object", "properties": fields}
        if required:
            schema["required"] = required
        params = {"sessionId": self.sid, "toolCallId": call.ref, "mode": "form", "message": message,
                  "requestedSchema": schema}
        sent = self.channel.ask(p.ELICITATION_CREATE, params, cancel)
        self._cancelled(cancel)
        if sent.cancelled():
            return Answer("error: the editor did not answer the question", True)
        failed = sent.exception()
        if failed is not None:  # (it advertised forms but fails them: the way without forms, from now on)
            why = failed.error if isinstance(failed, PeerError) else failed
            words = why.get("message", why) if isinstance(why, dict) else why
            self.log.info("[acp] session {session}: the client failed a form ({why}): it is asked without forms",
                          session=self.sid, why=clean(str(words))[:200])
            self.channel.capabilities.forms = False
            return None
        result = mapping(answer_of(sent))
        action = result.get("action")
        if action == "accept":
            return mapping(result.get("content"))
        if action == "decline":
            return Answer("The user declined to answer.")
        return Answer("The user did not answer (they dismissed the question).")

    @staticmethod
    def _cancelled(cancel: Cancel) -> None:
        if cancel.is_set():
            raise Cancelled()

    def plan(self, entries: list[dict[str, Any]]) -> None:
        self.send({"sessionUpdate": "plan", "entries": entries})

    def tool_running(self, call: Call) -> None:
        if call.rule:  # (which of the project's rules answered for the user: in the title an editor shows)
            self.send(p.tool_call_update(call.ref, "in_progress", title=f"{call.title} · rule: {call.rule}",
                                         meta={"bob": {"rule": call.rule}}))
            return
        self.send(p.tool_call_update(call.ref, "in_progress"))

    def tool_output(self, call: Call, tail: str, delta: str) -> None:
        if self._terminal(call):
            meta = {"terminal_output": {"terminal_id": call.ref, "data": delta}}
            self.send(p.tool_call_update(call.ref, "in_progress", meta=meta))
        else:
            self.send(p.tool_call_update(call.ref, "in_progress", result_content(call.name, call.arguments, tail)))

    def tool_terminal(self, call: Call) -> None:
        if call.terminal is not None:
            self.send(p.tool_call_update(call.ref, "in_progress", [p.terminal_content(call.terminal)]))

    def tool_finished(self, call: Call, result: ToolResult) -> None:
        status = "failed" if result.failed else "completed"
        raw = {"output": p.bounded(result.output, RAW_OUTPUT_LIMIT)}
        if call.terminal is not None:  # the editor keeps showing its terminal, released or not
            self.send(p.tool_call_update(call.ref, status, [p.terminal_content(call.terminal)], raw))
            return
        if self._terminal(call) and (result.exit_code is not None or result.signal is not None):
            meta = {"terminal_exit": {"terminal_id": call.ref, "exit_code": result.exit_code, "signal": result.signal}}
            self.send(p.tool_call_update(call.ref, status, [p.terminal_content(call.ref)], raw, meta))
            return
        if result.diff is not None:
            content = [p.diff_content(result.diff.path, result.diff.old_text, result.diff.new_text)]
        else:
            content = result_content(call.name, call.arguments, result.output)
        self.send(p.tool_call_update(call.ref, status, content, raw))


def _cancelled_outcome(outcome: Sent) -> bool:
    result = mapping(answer_of(outcome))
    selected = result.get("outcome")
    return isinstance(selected, dict) and selected.get("outcome") == "cancelled"


def rejection_reason(outcome: Sent) -> str:
    """What the user said to do instead, with a rejection (`_meta.bob.reason` of the answer, as
    `bob-acp chat` sends it): one line, bounded; "" when none."""
    result = mapping(answer_of(outcome))
    meta = mapping(result.get("_meta"))
    bob = mapping(meta.get("bob"))
    reason = bob.get("reason")
    return " ".join(clean(reason).split())[:500] if isinstance(reason, str) else ""


def chosen_option(outcome: Sent, offered: set[str]) -> str:
    """The option the user selected, or reject: anything but a well-formed selection of an
    offered option (an error, a cancelled outcome, a wrong shape) never reads as approval."""
    result = answer_of(outcome)
    if not isinstance(result, dict):
        return p.REJECT
    selected = result.get("outcome")
    if not isinstance(selected, dict) or selected.get("outcome") != "selected":
        return p.REJECT
    option = selected.get("optionId")
    return option if isinstance(option, str) and option in offered else p.REJECT
