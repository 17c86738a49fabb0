"""session/prompt and session/cancel: turns in arrival order, the slash commands /new and /compact.

A prompt takes its place in the turn queue on the dispatcher, in frame order, and registers its
Turn there, so a session/cancel sent right behind it always reaches it. Its answer is written
under the Turn's lock: a cancel that got in before the answer makes it `cancelled`, whatever the
provider did meanwhile; a cancel after it is logged as too late.
"""

from __future__ import annotations

from typing import Any

from bob_acp.acp import prompt as prompts
from bob_acp.acp import protocol as p
from bob_acp.acp.server import engine, sessions, skills
from bob_acp.acp.session import Session, Turn
from bob_acp.acp.turn_queue import TurnQueue
from bob_acp.acp.updates import TurnSink
from bob_acp.exceptions import Cancelled
from bob_acp.jsonrpc.endpoint import Reply
from bob_acp.jsonrpc.errors import RpcError


class Handlers:
    def __init__(self, server: Any):
        self.server = server
        self.queue = TurnQueue()

    # ---- cancel --------------------------------------------------------------------------------

    def cancel(self, params: dict) -> None:
        server = self.server
        sid = params.get("sessionId")
        session = (server.sessions.get(sid) or server.draining.get(sid)) if isinstance(sid, str) else None
        if session is None:
            server.log.info(f"[acp] cancel for unknown session {str(sid)[:100]!r} ignored")
            return
        turns = list(session.turns)
        cancelled = sum(1 for turn in turns if turn.cancel_now())
        if cancelled:
            server.log.info(f"[acp] session {sid}: cancel: {cancelled} turn(s) cancelled")
        else:
            server.log.info(f"[acp] session {sid}: cancel after the turn answered: nothing to cancel")

    # ---- prompt --------------------------------------------------------------------------------

    def prepare(self, params: dict) -> tuple[Session, Turn]:
        """On the dispatcher, in frame order: check the request, take the turn's place in the
        queue and register its Turn, before any later frame is routed."""
        server = self.server
        server.require_ready()
        session = server.session(params)
        if not isinstance(params.get("prompt"), list):
            raise RpcError.invalid_params("prompt: must be an array of content blocks")
        problem = prompts.refusal(params["prompt"], server.cfg.acp.embeddedContext, server.cfg.acp.images)
        if problem:
            raise RpcError.invalid_params(problem)
        with server.sessions_lock:
            if session.loading:
                raise RpcError.invalid_request(f"session {session.id} is being loaded; prompt once session/load "
                                               "has answered")
            turn = Turn(self.queue.enqueue())
            session.turns.add(turn)
        turn.cancel.subscribe(turn.ticket.withdraw)
        turn.cancel.subscribe(server.endpoint.wake_senders)
        return session, turn

    def prompt(self, params: dict, prepared: tuple[Session, Turn] | None = None) -> Reply:
        session, turn = prepared or self.prepare(params)
        server = self.server
        outcome: Any = engine.CANCELLED  # waited, was cancelled: ran nothing, recorded nothing
        try:
            if not server.closing.is_set() and turn.ticket.wait() and not turn.cancel.is_set():
                outcome = self._run(session, params["prompt"], turn)
        finally:
            turn.ticket.release()
            with server.sessions_lock:
                session.turns.discard(turn)
                if not session.turns:
                    server.draining.pop(session.id, None)
        return Reply(lambda: self._answer(turn, outcome), guard=turn.lock)

    @staticmethod
    def _answer(turn: Turn, outcome: Any) -> dict:
        turn.answered = True
        if turn.cancel.is_set():
            return {"stopReason": engine.CANCELLED}
        if isinstance(outcome, RpcError):
            raise outcome
        return {"stopReason": outcome}

    def _run(self, session: Session, blocks: list, turn: Turn) -> Any:
        server = self.server
        text = prompts.flatten(blocks, server.cfg.acp.embeddedContext, server.cfg.tools.maxReadBytes)
        command = text.strip()
        sink = TurnSink(server, session, turn.cancel)
        if command == "/new":
            return self.command_new(session, sink)
        if command == "/compact":
            return self.command_compact(session, sink, turn)
        typed = text
        text = skills.rewrite_prompt(text, session.catalog)
        found = prompts.attachments(text, session.cwd)
        for _written, path, _kind in found:
            server.log.info(f"[acp] session {session.id}: attached {path}")
        text = prompts.with_attachments(text, found)
        typed = prompts.with_attachments(typed, found)  # a replay shows what the user wrote
        pictures = prompts.images(blocks) if server.cfg.acp.images else []
        try:
            stop, stats = server.engine.run_turn(session.conv, text, sink, turn.cancel, typed, pictures)
        except engine.TurnFailed as failure:
            line = str(failure)
            server.log.warning(f"[acp] session {session.id}: turn failed: {line}")
            server.log.info(f"[acp] turn done: {failure.stats.line()}")
            return RpcError.internal_error(line, data={"error": line})
        finally:
            server.save(session)
            self._session_info(session, sink)
            server.report_mcp(session)  # tools a refresh during the turn had to leave out
        server.log.info(f"[acp] turn done: {stats.line()}")
        return stop

    def _session_info(self, session: Session, sink: TurnSink) -> None:
        """With acp.sessionHistory: the title once the first turn gave one, updatedAt after each."""
        server = self.server
        if not server.cfg.acp.sessionHistory:
            return
        title = sessions.title_of(session.conv.messages)
        fresh = title if title and title != session.title else None
        session.title = title or session.title
        sink._send(p.session_info_update(fresh, _now()))

    # ---- commands ------------------------------------------------------------------------------

    def command_new(self, session: Session, sink: TurnSink) -> str:
        server = self.server
        conv = session.conv
        forgotten = len(conv.messages) - 1
        if server.cfg.sessions.enabled and forgotten > 0:
            kept_as = sessions.new_id()
            server.save(session, kept_as, list(conv.messages))
            server.log.info(f"[acp] session {session.id}: previous conversation kept as {kept_as}")
        server.engine.reset(conv)
        session.title = None
        sink.text(f"🆕 New session: {forgotten} message(s) forgotten.", engine.new_message_id())
        server.log.info(f"[acp] session {session.id}: new session, {forgotten} message(s) forgotten")
        server.save(session)
        return engine.END_TURN

    def command_compact(self, session: Session, sink: TurnSink, turn: Turn) -> str:
        server = self.server
        try:
            line = server.engine.compact(session.conv, sink, turn.cancel)
        except Cancelled:
            return engine.CANCELLED
        sink.text(line, engine.new_message_id())
        server.log.info(f"[acp] session {session.id}: /compact — {line}")
        server.save(session)
        return engine.END_TURN


def _now() -> str:
    import datetime

    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
