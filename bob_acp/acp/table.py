"""The session table: the one owner of a connection's sessions, their lock, the sessions still
draining after they were dropped (their turn has not returned yet), the bound on how many there
are, and their saving. Every room of the ACP layer reaches a session through it."""

from __future__ import annotations

import collections
import threading

from bob_acp.acp.lazy import LazyModule
from bob_acp.acp.params import required_str, unknown_session
from bob_acp.acp.session import Session, Turn
from bob_acp.acp.updates import say_news
from bob_acp.jsonrpc.errors import RpcError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable

    from bob_acp.acp.channel import ClientChannel
    from bob_acp.config import Config
    from bob_acp.log import Logger
    from bob_acp.sessions import SessionStore

sessions = LazyModule("bob_acp.sessions", globals(), "sessions")

DEFAULT_MAX_SESSIONS = 1024


class SessionTable:
    def __init__(self, cfg: Config, log: Logger, channel: ClientChannel):
        self.cfg = cfg
        self.log = log
        self.channel = channel
        self.sessions: collections.OrderedDict[str, Session] = collections.OrderedDict()
        self.draining: dict[str, Session] = {}  # dropped sessions whose turn has not returned yet
        self.lock = threading.Lock()

    # ---- finding ------------------------------------------------------------------------------

    def get(self, params: dict[str, Any]) -> Session:
        """The session a request names (-32602 when this connection does not hold it)."""
        sid = required_str(params, "sessionId")
        session = self.sessions.get(sid)
        if session is None:
            raise unknown_session(sid)
        return session

    def held(self, sid: str) -> Session | None:
        """The session of this id, held or still draining (call with the lock held)."""
        return self.sessions.get(sid) or self.draining.get(sid)

    def all(self) -> list[Session]:
        with self.lock:
            return list(self.sessions.values()) + list(self.draining.values())

    def folders(self) -> set[str]:
        with self.lock:
            return {session.cwd for session in self.sessions.values()}

    # ---- seating ------------------------------------------------------------------------------

    def limit(self) -> int:
        return self.cfg.limits.maxSessions or DEFAULT_MAX_SESSIONS  # 0: the default; negative: no bound

    def check_room(self) -> None:
        limit = self.limit()
        if self.cfg.limits.sessionOverflow != "evict_oldest" and 0 < limit <= len(self.sessions):
            raise RpcError.invalid_params(f"too many sessions: this connection holds {limit} (limits.maxSessions)")

    def admit(self, session: Session, replacing: Session | None = None) -> None:
        """Seat a session within the bound (refuse, or evict the oldest). A session refused ends
        here: what was started for it (its MCP servers, a snapshot made ahead) goes with it."""
        try:
            self._seat(session, replacing)
        except BaseException:
            session.end()
            raise

    def _seat(self, session: Session, replacing: Session | None) -> None:
        limit = self.limit()
        with self.lock:
            held = self.sessions.get(session.id)
            if (held is not None and held is not replacing) or session.id in self.draining:
                raise RpcError.internal_error(f"session id {session.id} is already held by this connection")
            self.sessions.pop(session.id, None)
            while limit > 0 and len(self.sessions) >= limit:
                if self.cfg.limits.sessionOverflow != "evict_oldest":
                    raise RpcError.invalid_params(f"too many sessions: this connection holds {limit} (limits.maxSessions)")
                _, oldest = self.sessions.popitem(last=False)
                self._drop(oldest)
                self.log.info("[acp] session {session}: evicted (limits.maxSessions {limit})", session=oldest.id,
                              limit=limit)
            self.sessions[session.id] = session

    def drop(self, session: Session) -> None:
        """Forget a session (close, delete): its turn is cancelled, what it runs ends."""
        with self.lock:
            if self.sessions.get(session.id) is session:
                del self.sessions[session.id]
            self._drop(session)

    def _drop(self, session: Session) -> None:
        """Called with the lock held."""
        if session.turns:
            self.draining[session.id] = session
        session.end()

    def turn_ended(self, session: Session, turn: Turn) -> None:
        with self.lock:
            session.turns.discard(turn)
            if not session.turns:
                self.draining.pop(session.id, None)

    # ---- saving -------------------------------------------------------------------------------

    def _not_saved(self, session: Session, exc: Exception) -> None:
        """Said once per run of failed saves: the conversation is kept in memory, and each turn
        tries to save it again."""
        if isinstance(exc, OSError) and exc.strerror:
            reason = f"{exc.strerror}: {exc.filename}" if exc.filename else exc.strerror
        else:
            reason = str(exc)
        self.log.warning("[acp] session {session}: not saved: {error}", session=session.id, error=reason)
        if session.unsaved is None:
            session.unsaved = reason
            self.notice(session, "This conversation could not be saved.",
                        f"{reason}. Bob keeps it in memory and tries again after each turn; it is lost if Bob ends "
                        "before a save succeeds.")

    def notice(self, session: Session, title: str, description: str | None = None, severity: str = "warning") -> None:
        """Something the session's user must hear (updates.say_news): a notice now, or once the
        client knows the session's id; to a client without notices, in the session's next turn."""
        session.news.add((title, description, severity))
        say_news(self.channel, session)

    def store(self, cwd: str, redact: Callable[[Any], Any] | None = None) -> SessionStore:
        """The session files of a folder; `redact`: what a conversation goes through before it
        is written (its configuration's secrets)."""
        return sessions.SessionStore(cwd, self.cfg.sessions.dir, redact, self.log)

    def save(self, session: Session, sid: str | None = None, messages: list[dict[str, Any]] | None = None) -> None:
        """Write the session's file (sessions.enabled); `sid` and `messages`: another file (the
        conversation /new set aside). A file another process changed is left as it is and the
        conversation goes on under a new id, which the user is told."""
        if not self.cfg.sessions.enabled:
            return
        conv = session.conv
        choices = {"model": conv.model, "mode": conv.mode, "reasoning": conv.reasoning} if self.cfg.acp.configOptions else {}
        if choices and conv.sandbox is not None and conv.sandbox.network != session.runtime.cfg.tools.sandboxNetwork:
            choices["network"] = "on" if conv.sandbox.network else "off"  # (the session's own switch)
        # A copy: a save from the dispatcher (a mode change) can come while the turn appends.
        messages = list(conv.messages if messages is None else messages)
        if sid is None:  # (the title stays what the first turn gave: a compaction or /undo does not rename)
            session.title = session.title or sessions.title_of(messages)
        title = session.title if sid is None else sessions.title_of(messages)
        try:
            records = (conv.checkpoints.data(session.runtime.redact) if conv.checkpoints is not None and sid is None
                       else None)
            written = self.store(session.cwd, session.runtime.redact).save(sid or session.file_id, messages, title,
                                                   {k: v for k, v in choices.items() if v}, session.workspace.more,
                                                   records)
        except Exception as exc:  # the session goes on in memory; the user learns it is not kept
            self._not_saved(session, exc)
            return
        if session.unsaved is not None and sid is None:
            session.unsaved = None
            self.log.info("[acp] session {session}: saved again", session=session.id)
            self.notice(session, "This conversation is saved again.", severity="info")
        if sid is None and written != session.file_id:
            session.file_id = written
            self.channel.tell(session.id, f"⚠️ This conversation's file was changed by another Bob (the same session "
                                          f"open twice?). That file is kept as it is, and this conversation continues "
                                          f"under the new id {written} (titled “{sessions.fork_title(title)}”).")
