"""session/prompt and session/cancel: turns in arrival order, the slash commands /new, /compact,
and (with tools.checkpoints) /undo and /redo.

A prompt takes its place in the turn queue on the dispatcher, in frame order, and registers its
Turn there, so a session/cancel sent right behind it always reaches it. Its answer is written
under the Turn's lock: a cancel that got in before the answer makes it `cancelled`, whatever the
provider did meanwhile; a cancel after it is logged as too late.
"""

from __future__ import annotations

import os
import threading
from typing import TYPE_CHECKING, Callable

from bob_acp import engine, sessions, skills
from bob_acp.acp import prompt as prompts
from bob_acp.acp import protocol as p
from bob_acp.acp.channel import ClientChannel
from bob_acp.acp.opener import Opener
from bob_acp.acp.session import Session, Turn
from bob_acp.acp.table import SessionTable
from bob_acp.acp.turn_queue import TurnQueue
from bob_acp.acp.updates import TurnSink
from bob_acp.config import Config
from bob_acp.exceptions import Cancelled, ClientError
from bob_acp.jsonrpc.endpoint import Reply
from bob_acp.jsonrpc.errors import RpcError
from bob_acp.timestamps import utc_now

if TYPE_CHECKING:
    from bob_acp.log import Logger



class Handlers:
    def __init__(self, cfg: Config, log: Logger, table: SessionTable, channel: ClientChannel, opener: Opener,
                 ready: Callable[[], object], closing: threading.Event):
        self.cfg = cfg  # the connection's (what prompts may hold); a session's own is session.runtime.cfg
        self.log = log
        self.table = table
        self.channel = channel
        self.opener = opener
        self.ready = ready  # raises unless initialize (and sign-in) came first
        self.closing = closing
        self.queue = TurnQueue()

    # ---- cancel --------------------------------------------------------------------------------

    def cancel(self, params: dict) -> None:
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

    def prepare(self, params: dict) -> tuple[Session, Turn]:
        """On the dispatcher, in frame order: check the request, take the turn's place in the
        queue and register its Turn, before any later frame is routed."""
        self.ready()
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

    def prompt(self, params: dict, prepared: tuple[Session, Turn] | None = None) -> Reply:
        session, turn = prepared or self.prepare(params)
        outcome: object = engine.CANCELLED  # waited, was cancelled: ran nothing, recorded nothing
        try:
            if not self.closing.is_set() and turn.ticket.wait() and not turn.cancel.is_set():
                outcome = self._run(session, params["prompt"], turn)
        finally:
            turn.ticket.release()
            self.table.turn_ended(session, turn)
        return Reply(lambda: self._answer(turn, outcome), guard=turn.lock)

    @staticmethod
    def _answer(turn: Turn, outcome: object) -> dict:
        turn.answered = True
        if turn.cancel.is_set():
            return {"stopReason": engine.CANCELLED}
        if isinstance(outcome, RpcError):
            raise outcome
        return {"stopReason": outcome}

    def _run(self, session: Session, blocks: list, turn: Turn) -> str | RpcError:
        text = prompts.flatten(blocks, self.cfg.acp.embeddedContext, session.runtime.cfg.tools.maxReadBytes)
        command = text.strip()
        sink = TurnSink(self.channel, self.log, session, turn.cancel)
        if command == "/new":
            return self.command_new(session, sink)
        if command == "/compact":
            return self.command_compact(session, sink, turn)
        if command in ("/undo", "/redo") and session.conv.checkpoints is not None:
            return self.command_undo(session, sink, turn, redo=command == "/redo")
        typed = text
        text = skills.rewrite_prompt(text, session.catalog)
        found = prompts.attachments(text, session.cwd)
        for _written, path, _kind in found:
            self.log.info("[acp] session {session}: attached {path}", session=session.id, path=path)
        text = prompts.with_attachments(text, found)
        typed = prompts.with_attachments(typed, found)  # a replay shows what the user wrote
        pictures = prompts.images(blocks) if self.cfg.acp.images else []
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

    def _turn_done(self, session: Session, stats: engine.TurnStats) -> None:
        self.log.info("[acp] turn done: {commands} command(s) · {file_ops} file op(s) · {skills} skill(s)",
                      session=session.id, commands=stats.commands, file_ops=stats.file_ops, skills=stats.skills)

    def _session_info(self, session: Session, sink: TurnSink) -> None:
        """With acp.sessionHistory: the title once the first turn gave one, updatedAt after each."""
        if not self.cfg.acp.sessionHistory:
            return
        title = sessions.title_of(session.conv.messages)
        fresh = title if title and title != session.title else None
        session.title = title or session.title
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
        sink.text(line, engine.new_message_id())
        self.log.info("[acp] session {session}: new session, {forgotten} message(s) forgotten", session=session.id,
                      forgotten=forgotten)
        self.table.save(session)
        return engine.END_TURN

    def command_undo(self, session: Session, sink: TurnSink, turn: Turn, redo: bool) -> str:
        """/undo: the last turn that changed files taken back, its files and its messages; /redo:
        what the last /undo took, put back. As a turn: never while another runs."""
        from bob_acp import checkpoints

        conv = session.conv
        assert conv.checkpoints is not None
        client = conv.client

        def write(root: str, path: str, data: bytes, mode: str) -> None:
            # Through the editor when it writes files (its buffer follows); the disk otherwise.
            full = os.path.join(root, path)
            if (client is not None and client.can_write and mode == checkpoints.FILE and os.path.isfile(full)
                    and not os.path.islink(full) and not os.stat(full).st_mode & 0o111):
                try:
                    text = data.decode("utf-8")
                except UnicodeDecodeError:
                    text = None
                if text is not None:
                    try:
                        client.write(full, text, turn.cancel)
                        return
                    except ClientError as exc:
                        self.log.info(f"[acp] session {session.id}: the editor did not write {full} ({exc}); "
                                      "written on disk")
            checkpoints.write_disk(root, path, data, mode)

        try:
            line = (conv.checkpoints.redo if redo else conv.checkpoints.undo)(conv.messages, write)
        except Cancelled:
            return engine.CANCELLED
        except (checkpoints.CheckpointError, OSError) as exc:
            line = f"{'↪️ /redo' if redo else '↩️ /undo'} failed: {exc}"
        conv.forget_count()
        sink.text(line + "\n", engine.new_message_id())
        self.log.info("[acp] session {session}: {command} — {outcome}", session=session.id,
                      command="/redo" if redo else "/undo", outcome=line.replace("\n", " "))
        self.table.save(session)
        return engine.END_TURN

    def command_compact(self, session: Session, sink: TurnSink, turn: Turn) -> str:
        try:
            line = session.engine.compact(session.conv, sink, turn.cancel)
        except Cancelled:
            return engine.CANCELLED
        sink.text(line, engine.new_message_id())
        self.log.info("[acp] session {session}: /compact — {outcome}", session=session.id, outcome=line)
        self.table.save(session)
        return engine.END_TURN
