"""session/prompt and session/cancel: turns in arrival order, the slash commands /new, /compact,
and (with tools.checkpoints) /undo and /redo.

A prompt takes its place in the turn queue on the dispatcher, in frame order, and registers its
Turn there, so a session/cancel sent right behind it always reaches it. Its answer is written
under the Turn's lock: a cancel that got in before the answer makes it `cancelled`, whatever the
provider did meanwhile; a cancel after it is logged as too late.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any, Callable

from bob_acp import engine, sessions, threads
from bob_acp.acp import prompt as prompts
from bob_acp.acp import protocol as p
from bob_acp.acp.channel import ClientChannel
from bob_acp.acp.opener import Opener
from bob_acp.acp.session import Session, Turn
from bob_acp.acp.table import SessionTable
from bob_acp.acp.turn_queue import TurnQueue
from bob_acp.acp.updates import TurnSink, say_news
from bob_acp.config import Config
from bob_acp.context import history, skills
from bob_acp.exceptions import Cancelled, ClientError
from bob_acp.ids import new_id
from bob_acp.jsonrpc.endpoint import Reply
from bob_acp.jsonrpc.errors import RpcError
from bob_acp.jsontext import mapping
from bob_acp.timestamps import utc_now

if TYPE_CHECKING:
    from bob_acp.cancel import Cancel
    from bob_acp.log import Logger
    from bob_acp.tools.client import Client


class Handlers:
    def __init__(self, cfg: Config, log: Logger, table: SessionTable, channel: ClientChannel, opener: Opener,
                 ready: Callable[[bool], object], closing: threading.Event):
        self.cfg = cfg  # the connection's (what prompts may hold); a session's own is session.runtime.cfg
        self.log = log
        self.table = table
        self.channel = channel
        self.opener = opener
        self.ready = ready  # raises unless initialize (and sign-in) came first
        self.closing = closing
        self.queue = TurnQueue()

    # ---- cancel --------------------------------------------------------------------------------

    def cancel(self, params: dict[str, Any]) -> None:
        sid = params.get("sessionId")
        session = self.table.held(sid) if isinstance(sid, str) else None
        if session is None:
            self.log.info("[acp] cancel for unknown session {session!r} ignored", session=str(sid)[:100])
            return
        turns = list(session.turns)
        cancelled = sum(1 for turn in turns if turn.cancel_now())
        if cancelled:
            self.log.info("[acp] session {session}: cancel: {turns} turn(s) cancelled", session=sid, turns=cancelled)
        else:
            self.log.info("[acp] session {session}: cancel after the turn answered: nothing to cancel", session=sid)

    # ---- prompt --------------------------------------------------------------------------------

    def prepare(self, params: dict[str, Any]) -> tuple[Session, Turn]:
        """On the dispatcher, in frame order: check the request, take the turn's place in the
        queue and register its Turn, before any later frame is routed."""
        self.ready(False)  # (never waits for a config file being read: the session has its own)
        session = self.table.get(params)
        if not isinstance(params.get("prompt"), list):
            raise RpcError.invalid_params("prompt: must be an array of content blocks")
        problem = prompts.refusal(params["prompt"], self.cfg.acp.embeddedContext, self.cfg.acp.images)
        if problem:
            raise RpcError.invalid_params(problem)
        with self.table.lock:
            if session.loading:
                raise RpcError.invalid_request(f"session {session.id} is being loaded; prompt once session/load "
                                               "has answered")
            turn = Turn(self.queue.enqueue())
            session.turns.add(turn)
        turn.cancel.subscribe(turn.ticket.withdraw)
        turn.cancel.subscribe(self.channel.wake_senders)
        return session, turn

    def abandon(self, prepared: tuple[Session, Turn]) -> None:
        """The prompt cannot run after all (no thread for it): its place and its turn are given up."""
        session, turn = prepared
        turn.ticket.release()
        self.table.turn_ended(session, turn)

    def prompt(self, params: dict[str, Any], prepared: tuple[Session, Turn] | None = None) -> Reply:
        session, turn = prepared or self.prepare(params)
        outcome: object = engine.CANCELLED  # waited, was cancelled: ran nothing, recorded nothing
        threads.doing.note(session=session.id, turn="waiting for the turn before it")
        try:
            if not self.closing.is_set() and turn.ticket.wait() and not turn.cancel.is_set():
                threads.doing.note(turn="running")
                outcome = self._run(session, params["prompt"], turn)
        finally:
            threads.doing.clear()
            turn.ticket.release()
            self.table.turn_ended(session, turn)
        return Reply(lambda: self._answer(turn, outcome), guard=turn.lock)

    @staticmethod
    def _answer(turn: Turn, outcome: object) -> dict[str, Any]:
        turn.answered = True
        if turn.cancel.is_set():
            return {"stopReason": engine.CANCELLED}
        if isinstance(outcome, RpcError):
            raise outcome
        return {"stopReason": outcome}

    def _run(self, session: Session, blocks: list[Any], turn: Turn) -> str | RpcError:
        text = prompts.flatten(blocks, self.cfg.acp.embeddedContext, session.runtime.cfg.tools.maxReadBytes)
        command = text.strip()
        sink = TurnSink(self.channel, self.log, session, turn.cancel)
        say_news(self.channel, session, sink)  # (a save that failed before this turn: said first)
        try:
            return self._command_or_turn(session, blocks, text, command, sink, turn)
        finally:
            say_news(self.channel, session, sink, fresh_line=True)

    def _command_or_turn(self, session: Session, blocks: list[Any], text: str, command: str, sink: TurnSink,
                         turn: Turn) -> str | RpcError:
        if command == "/new":
            return self.command_new(session, sink)
        if command == "/compact":
            return self.command_compact(session, sink, turn)
        if command in ("/undo", "/redo") and session.conv.checkpoints is not None:
            return self.command_undo(session, sink, turn, redo=command == "/redo")
        if command in ("/undo", "/redo") and session.runtime.cfg.tools.checkpoints:
            return self.command_without_git(session, sink, command)
        if _rules_command(session, command):
            return self.command_rules(session, sink, command)
        text, typed, pictures = self._composed(session, blocks, text)
        try:
            stop, stats = session.engine.run_turn(session.conv, text, sink, turn.cancel, typed, pictures)
        except engine.TurnFailed as failure:
            line = str(failure)
            self.log.warning("[acp] session {session}: turn failed: {error}", session=session.id, error=line)
            self._turn_done(session, failure.stats)
            return RpcError.internal_error(line, data={"error": line})
        finally:
            self.table.save(session)
            self._session_info(session, sink)
            self.opener.report_mcp(session)  # tools a refresh during the turn had to leave out
        self._turn_done(session, stats)
        return stop

    def _composed(self, session: Session, blocks: list[Any], text: str) -> tuple[str, str, list[dict[str, Any]]]:
        """(what the model is given, what the user wrote, the images) of a prompt's text: a
        skill's command rewritten, the files it mentions attached."""
        typed = text
        text = skills.rewrite_prompt(text, session.catalog)
        found = prompts.attachments(text, session.cwd)
        for _written, path, _kind in found:
            self.log.info("[acp] session {session}: attached {path}", session=session.id, path=path)
        text = prompts.with_attachments(text, found)
        typed = prompts.with_attachments(typed, found)  # a replay shows what the user wrote
        pictures = prompts.images(blocks) if self.cfg.acp.images else []
        return text, typed, pictures

    # ---- steering ------------------------------------------------------------------------------

    def steer(self, params: dict[str, Any]) -> dict[str, Any]:
        """_session/steering (acp.steering), as codex-acp and claude-agent-acp answer it: the text
        joins the running turn at its next model call (`injected`); with no turn running, it
        starts one (`startedNewTurn`, its updates streamed as a prompt's are), unless the client
        sent `_meta.steering.idleBehavior: "promptRequired"` (then it sends a prompt itself)."""
        from bob_acp.engine.steering import SteeringFull

        session = self.table.get(params)
        blocks = params.get("prompt")
        if not isinstance(blocks, list):
            raise RpcError.invalid_params("prompt: must be an array of content blocks")
        problem = prompts.refusal(blocks, self.cfg.acp.embeddedContext, self.cfg.acp.images)
        if problem:
            raise RpcError.invalid_params(problem)
        idle = mapping(mapping(params.get("_meta")).get("steering")).get("idleBehavior")
        if idle not in (None, "promptRequired"):
            raise RpcError.invalid_params(f"_meta.steering.idleBehavior: promptRequired, or none (a new turn is "
                                          f"started), not {str(idle)[:40]!r}")
        text = prompts.flatten(blocks, self.cfg.acp.embeddedContext, session.runtime.cfg.tools.maxReadBytes)
        command = text.strip()
        if command in ("/new", "/compact") or (command in ("/undo", "/redo") and session.runtime.cfg.tools.checkpoints) \
                or _rules_command(session, command):
            raise RpcError.invalid_params(f"{command} is a command, not words for the model: send it with "
                                          "session/prompt once the turn has ended")
        composed, typed, pictures = self._composed(session, blocks, text)
        try:
            joined = session.conv.steering.offer(history.user(composed, typed, pictures))
        except SteeringFull as exc:
            raise RpcError.invalid_params(f"prompt: not added: {exc}") from None
        if joined:
            self.log.info("[acp] session {session}: steering: joins the running turn at its next model call",
                          session=session.id)
            return {"outcome": "injected"}
        if idle == "promptRequired":
            self.log.info("[acp] session {session}: steering with no turn running: a prompt is required",
                          session=session.id)
            return {"outcome": "promptRequired", "reason": "noRunningTurn"}
        self._start_turn(params, blocks, typed)
        self.log.info("[acp] session {session}: steering with no turn running: a new turn started with it",
                      session=session.id)
        return {"outcome": "startedNewTurn"}

    def _start_turn(self, params: dict[str, Any], blocks: list[Any], typed: str) -> None:
        """A turn of the steered text, as a prompt's, that no request waits for: its place taken
        and its Turn registered before the answer (a session/cancel behind it reaches it); the
        text shown to the client as the user's, since no prompt of its own carries it."""
        request = {"sessionId": params["sessionId"], "prompt": blocks}
        prepared = self.prepare(request)
        self.channel.update(request["sessionId"], p.user_chunk(typed, new_id()))
        try:
            threads.start(lambda: self._unanswered(request, prepared), "bob-steered-turn")
        except threads.ThreadLimit as exc:
            self.abandon(prepared)
            raise RpcError.internal_error(f"no turn could be started: {exc}") from None

    def _unanswered(self, request: dict[str, Any], prepared: tuple[Session, Turn]) -> None:
        """Run the steered turn; its end, which no client waits for, goes to the log."""
        reply = self.prompt(request, prepared)
        with prepared[1].lock:  # (as a written answer: a cancel after this is too late)
            try:
                ended = str(reply.result()["stopReason"])
            except RpcError as exc:
                ended = f"failed: {exc}"
        self.log.info("[acp] session {session}: the turn started by steering ended: {ended}",
                      session=request["sessionId"], ended=ended)

    def _turn_done(self, session: Session, stats: engine.TurnStats) -> None:
        self.log.info("[acp] turn done: {commands} command(s) · {file_ops} file op(s) · {skills} skill(s)",
                      session=session.id, commands=stats.commands, file_ops=stats.file_ops, skills=stats.skills)

    def _session_info(self, session: Session, sink: TurnSink) -> None:
        """With acp.sessionHistory: the title once the first turn gave one, updatedAt after each."""
        if not self.cfg.acp.sessionHistory:
            return
        session.title = session.title or sessions.title_of(session.conv.messages)
        fresh = session.title if session.title != session.title_sent else None
        session.title_sent = session.title
        sink.send(p.session_info_update(fresh, utc_now()))

    # ---- commands ------------------------------------------------------------------------------

    def command_new(self, session: Session, sink: TurnSink) -> str:
        conv = session.conv
        forgotten = len(conv.messages) - 1
        if self.cfg.sessions.enabled and forgotten > 0:
            kept_as = sessions.new_id()
            self.table.save(session, kept_as, list(conv.messages))
            self.log.info("[acp] session {session}: previous conversation kept as {kept_as}", session=session.id,
                          kept_as=kept_as)
        session.engine.reset(conv)
        session.title = None
        line = f"🆕 New session: {forgotten} message(s) forgotten."
        if session.runtime.cfg.permissions.newForgetsGrants and conv.allow_always:
            # ("always" was said of a conversation that is over: the new one asks again)
            line += f" The {len(conv.allow_always)} “always” answer(s) of this session are forgotten too."
            conv.allow_always.clear()
        sink.text(line, new_id())
        self.log.info("[acp] session {session}: new session, {forgotten} message(s) forgotten", session=session.id,
                      forgotten=forgotten)
        self.table.save(session)
        return engine.END_TURN

    def command_undo(self, session: Session, sink: TurnSink, turn: Turn, redo: bool) -> str:
        """/undo: the last recorded turn taken back, its files and its messages; /redo: what the
        last /undo took, put back. As a turn: never while another runs."""
        from bob_acp import checkpoints

        conv = session.conv
        assert conv.checkpoints is not None
        editor = _Editor(conv.client, turn.cancel) if conv.client is not None else None
        try:
            line = (conv.checkpoints.redo if redo else conv.checkpoints.undo)(
                conv.messages, editor, lambda: self.table.save(session))
        except Cancelled:
            return engine.CANCELLED
        except (checkpoints.CheckpointError, OSError) as exc:
            line = f"{'↪️ /redo' if redo else '↩️ /undo'} failed: {exc}. Nothing of the conversation was taken out; " \
                   "it can be tried again."
        conv.forget_count()
        sink.text(line + "\n", new_id())
        self.log.info("[acp] session {session}: {command} — {outcome}", session=session.id,
                      command="/redo" if redo else "/undo", outcome=line.replace("\n", " "))
        self.table.save(session)
        return engine.END_TURN

    def command_without_git(self, session: Session, sink: TurnSink, command: str) -> str:
        """/undo or /redo where checkpoints are on but git is missing: said, never sent to the model."""
        sink.text(f"{command} needs git, which is not installed here, so this session records no changes to take "
                  "back. Install git (for example `apt install git`, `brew install git` or `dnf install git`) and "
                  "open a new session.\n", new_id())
        return engine.END_TURN

    def command_rules(self, session: Session, sink: TurnSink, command: str) -> str:
        """/rules: the project's rules, numbered; /rules forget N removes one. Never sent to the model."""
        from bob_acp.rules.store import RulesError, listing

        store = session.engine.gate.store
        assert store is not None
        words = command.split()
        try:
            if len(words) == 3 and words[1] == "forget" and words[2].isdigit():
                removed = store.remove(session.cwd, int(words[2]))
                self.log.info("[acp] session {session}: /rules: removed {rule}", session=session.id, rule=removed.shown())
                line = f"Removed this project's rule: {removed.shown()}."
            elif len(words) == 1:
                kept = store.load(session.cwd)
                line = ("\n".join([f"📋 This project's rules ({session.cwd}), kept in Bob's state folder:",
                                    *listing(kept), "/rules forget N removes one; `bob-acp rules` changes them from a "
                                    "terminal."]) if kept.rules or kept.problems else
                        "No rules kept for this project yet: answer a question with \"always in this project\" or "
                        "\"never in this project\".")
            else:
                line = "/rules lists this project's rules; /rules forget N removes rule N."
        except (RulesError, OSError) as exc:
            line = f"/rules: {exc}"
        sink.text(line + "\n", new_id())
        return engine.END_TURN

    def command_compact(self, session: Session, sink: TurnSink, turn: Turn) -> str:
        try:
            line = session.engine.compact(session.conv, sink, turn.cancel)
        except Cancelled:
            return engine.CANCELLED
        sink.text(line, new_id())
        self.log.info("[acp] session {session}: /compact — {outcome}", session=session.id, outcome=line)
        self.table.save(session)
        return engine.END_TURN


class _Editor:
    """The editor's files for /undo (bob_acp.checkpoints.restore.Editor): its buffer read before a
    file is put back, the file written through it; an error is an OSError (the disk decides)."""

    def __init__(self, client: Client, cancel: Cancel):
        self.client = client
        self.cancel = cancel
        self.can_read = client.can_read
        self.can_write = client.can_write

    def read(self, path: str) -> str:
        try:
            text = self.client.read(path, self.cancel)
        except ClientError as exc:
            raise OSError(str(exc)) from None
        if text is None:
            raise OSError("the editor does not have it")
        return text

    def write(self, path: str, text: str) -> None:
        try:
            self.client.write(path, text, self.cancel)
        except ClientError as exc:
            raise OSError(f"the editor did not write it: {exc}") from None


def _rules_command(session: Session, command: str) -> bool:
    """/rules, alone or with its words, in a session that keeps the project's rules."""
    return command.split(" ", 1)[0] == "/rules" and session.engine.gate.store is not None
