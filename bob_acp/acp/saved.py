"""Saved sessions over ACP: session/load (with its replay) and, with acp.sessionHistory,
session/list, session/resume, session/close and session/delete.

Load's "no turn running" check and its taking the session over are one step on the dispatcher,
under the session table's lock: a prompt routed after it is refused until the load answers,
and a prompt routed before it makes the load refuse (-32600).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Callable

from bob_acp import sessions
from bob_acp.acp import protocol as p
from bob_acp.acp.channel import ClientChannel
from bob_acp.acp.opener import Opener
from bob_acp.acp.params import cwd_param, mcp_servers, more_roots, required_str, unknown_session
from bob_acp.acp.session import Session
from bob_acp.acp.table import SessionTable
from bob_acp.acp.updates import result_content
from bob_acp.config import Config
from bob_acp.context import history
from bob_acp.engine import Refs
from bob_acp.files import workspace
from bob_acp.files.workspace import Workspace
from bob_acp.ids import new_id
from bob_acp.jsonrpc.endpoint import Reply
from bob_acp.jsonrpc.errors import RpcError
from bob_acp.tools import builtin as tools

if TYPE_CHECKING:
    from bob_acp.acp.runtime import Runtime
    from bob_acp.log import Logger
    from bob_acp.sessions import ListedSession, ReplayItem


PAGE = 50


class Handlers:
    def __init__(self, cfg: Config, log: Logger, table: SessionTable, channel: ClientChannel, opener: Opener,
                 refs: Refs, ready: Callable[[], Runtime]):
        self.cfg = cfg  # the connection's
        self.log = log
        self.table = table
        self.channel = channel
        self.opener = opener
        self.refs = refs  # the connection's tool-call numbering (a replay moves it past what it shows)
        self.ready = ready  # the configuration as it is now; raises unless initialize (and sign-in) came first
        self.cwds: set[str] = set()  # folders this connection saw sessions in (list and delete without cwd)

    # ---- load / resume ---------------------------------------------------------------------

    def prepare_load(self, params: dict[str, Any]) -> tuple[str, Workspace, list[Any], Session | None, Runtime]:
        runtime = self.ready()
        sid = required_str(params, "sessionId")
        # Omitted or empty, no further roots (the protocol's rule): the client passes back what
        # session/list reports for the session to have them again, and a session file (which a
        # cloned repository can ship) never gives its session folders by itself.
        ws = workspace.of(cwd_param(params), more_roots(params, self.cfg.acp.additionalDirectories) or ())
        servers = mcp_servers(params)
        if not sessions.valid_id(sid):
            raise RpcError.invalid_params("sessionId: not a valid session id",
                                          data={"sessionId": sid[:100], "error": "not a valid session id"})
        with self.table.lock:
            held = self.table.held(sid)
            if held is not None and held.busy:
                raise RpcError.invalid_request(f"session {sid} has a turn running; cancel it or wait")
            if held is not None:
                held.loading = True
        return sid, ws, servers, held, runtime

    def abandon_load(self, prepared: tuple[Any, ...]) -> None:
        """The load cannot run after all (no thread for it): the session it was to replace is free."""
        self._release(prepared[3])

    def load(self, params: dict[str, Any], prepared: tuple[Any, ...] | None = None) -> dict[str, Any]:
        sid, ws, servers, held, runtime = prepared or self.prepare_load(params)
        session, folder, notice = self._take_over(sid, ws, servers, held, runtime)
        replayed = self._replay(session)
        self.send_plan(session)
        if notice:
            self.channel.tell(session.id, notice)
        self.opener.send_commands(session)
        self.log.info("[acp] session {session} loaded from {folder}: {replayed} message(s) replayed", session=sid,
                      folder=folder, replayed=replayed)
        return self.opener.result(session, {})

    def resume(self, params: dict[str, Any]) -> Reply:
        """The session registered again without a replay (the client has it); the model sees
        the whole history."""
        sid, ws, servers, held, runtime = self.prepare_load(params)
        session, folder, notice = self._take_over(sid, ws, servers, held, runtime)
        self.log.info("[acp] session {session} resumed from {folder}: {messages} message(s)", session=sid,
                      folder=folder, messages=len(session.conv.messages) - 1)

        def after() -> None:
            self.send_plan(session)
            if notice:
                self.channel.tell(session.id, notice)
            self.opener.send_commands(session)  # the slash menu of a resumed session too

        return Reply(self.opener.result(session, {}), after=after)

    def fork(self, params: dict[str, Any]) -> Reply:
        """(acp.fork) A new session with the conversation of another so far (held here, or saved
        in `cwd`): its own id and file, a title that says it is a fork; the other goes on as it was."""
        runtime = self.ready()
        sid = required_str(params, "sessionId")
        ws = workspace.of(cwd_param(params), more_roots(params, self.cfg.acp.additionalDirectories) or ())
        servers = mcp_servers(params)
        if not sessions.valid_id(sid):
            raise unknown_session(sid, "not a valid session id")
        with self.table.lock:
            held = self.table.held(sid)
            messages = list(held.conv.messages) if held is not None else None
            title = held.title if held is not None else None
        if messages is None:
            try:
                stored = self.table.store(ws.cwd).load(sid)
            except sessions.SessionLoadError as exc:
                raise _unreadable(sid, exc, "fork") from None
            messages, title = stored.messages, stored.title
        self.table.check_room()
        new = sessions.new_id()
        session = self.opener.make(new, ws, history.repaired(messages), servers, runtime)
        session.title = session.title_sent = sessions.fork_title(title or sessions.title_of(messages))
        self.table.admit(session)
        self.table.save(session)
        self.cwds.add(ws.cwd)
        self.log.info("[acp] session {session}: forked from {source} ({messages} message(s))", session=new,
                      source=sid, messages=len(session.conv.messages) - 1)

        def after() -> None:
            self.channel.update(new, p.session_info_update(session.title))
            self.send_plan(session)
            self.opener.send_commands(session)

        return Reply(self.opener.result(session, {"sessionId": new}), after=after)

    def _take_over(self, sid: str, ws: Workspace, servers: list[Any], held: Session | None,
                   runtime: Runtime) -> tuple[Session, str, str | None]:
        cwd = ws.cwd
        store = self.table.store(cwd)
        try:
            stored = store.load(sid)
            session = self.opener.make(sid, ws, stored.messages, servers, runtime, stored.checkpoints)
        except sessions.SessionLoadError as exc:
            self._release(held)
            raise _unreadable(sid, exc, "load") from None
        except BaseException:
            self._release(held)
            raise
        session.title = stored.title or sessions.title_of(stored.messages)
        notice = self.opener.selectors().restore(session, stored.choices) if self.cfg.acp.configOptions else None
        try:
            self.table.admit(session, replacing=held)  # (refused: it ends, its servers with it)
        finally:
            self._release(held)
        if held is not None and held.mcp is not None:
            held.mcp.close()
        self.cwds.add(cwd)
        return session, store.folder, notice

    def send_plan(self, session: Session) -> None:
        """The session's last plan (tools.plan), so the editor shows it again after a load or resume."""
        if not session.runtime.cfg.tools.plan:
            return
        entries = last_plan(session.conv.messages)
        if entries is not None:
            self.channel.update(session.id, {"sessionUpdate": "plan", "entries": entries})

    def _release(self, held: Session | None) -> None:
        if held is not None:
            with self.table.lock:
                held.loading = False

    def _replay(self, session: Session) -> int:
        items = sessions.replay_items(session.conv.messages)
        recorded = self.cfg.acp.replayStatus == "recorded"
        self.refs.reserve([item.ref for item in items if item.kind == "tool"])
        for item in items:
            self.channel.update(session.id, replay_update(item, session.workspace, recorded))
        return sum(1 for m in session.conv.messages if m["role"] != "system")

    # ---- list / close / delete ---------------------------------------------------------------

    def list(self, params: dict[str, Any]) -> dict[str, Any]:
        cwd = params.get("cwd")
        cursor = params.get("cursor")
        if cursor is not None and not isinstance(cursor, str):
            raise RpcError.invalid_params("cursor: must be a string")
        if cwd is not None:
            folders = [cwd_param(params)]
        else:
            folders = sorted(self._known_cwds())
        # (acp.additionalDirectories) only the sessions that have every one of these roots
        wanted = set(more_roots(params, self.cfg.acp.additionalDirectories) or ())
        try:
            found, next_cursor = sessions.page([self.table.store(c) for c in folders], cursor, PAGE,
                                               (lambda item: wanted <= set(item.more)) if wanted else None)
        except ValueError as exc:
            raise RpcError.invalid_params(f"cursor: {exc}") from None
        result: dict[str, Any] = {"sessions": [_info(item) for item in found]}
        if next_cursor:
            result["nextCursor"] = next_cursor
        return result

    def _known_cwds(self) -> set[str]:
        held = self.table.folders()
        try:
            here = {os.getcwd()}
        except OSError:  # the folder Bob was started in was deleted under it
            here = set()
        return held | self.cwds | here

    def close(self, params: dict[str, Any]) -> dict[str, Any]:
        session = self.table.get(params)
        self.table.drop(session)
        self.log.info("[acp] session {session}: closed (its file stays)", session=session.id)
        return {}

    def delete(self, params: dict[str, Any]) -> dict[str, Any]:
        """Forget a session and delete its file. An id nobody knows (never was, or deleted
        already) succeeds silently, as the protocol says it SHOULD; a malformed id does not."""
        sid = required_str(params, "sessionId")
        if not sessions.valid_id(sid):
            raise unknown_session(sid, "not a valid session id")
        with self.table.lock:
            held = self.table.held(sid)
            if held is not None and held.busy:
                raise RpcError.invalid_request(f"session {sid} has a turn running; cancel it or wait")
        folders = [held.cwd] if held is not None else sorted(self._known_cwds())
        found = any(self.table.store(cwd).delete(sid) for cwd in folders)
        if self.cfg.tools.checkpoints:  # (its trees go with it)
            from bob_acp import checkpoints

            for cwd in folders:
                checkpoints.forget(cwd, sid)
        if held is not None:
            self.table.drop(held)
        self.log.info("[acp] session {session}: {outcome}", session=sid,
                      outcome="deleted" if found or held else "delete: no such session, nothing to do")
        return {}


def _unreadable(sid: str, exc: sessions.SessionLoadError, doing: str) -> RpcError:
    """What a load or fork of a session whose file cannot be used answers."""
    if exc.missing:
        return unknown_session(sid, exc.reason)
    return RpcError.invalid_params(f"sessionId: cannot {doing} session {sid}: {exc.reason}",
                                   data={"sessionId": sid, "error": exc.reason})


def last_plan(messages: list[dict[str, Any]]) -> list[dict[str, Any]] | None:
    """The entries of the last update_plan call that was run (None: no plan was set)."""
    from bob_acp.tools.plan import NAME, plan_entries

    results = {m["tool_call_id"]: m for m in messages if m["role"] == "tool"}
    for message in reversed(messages):
        for call in reversed(message.get("tool_calls", ())) if message["role"] == "assistant" else ():
            result = results.get(call["id"])
            if call["name"] == NAME and result is not None and not result.get("failed"):
                entries = plan_entries(call["arguments"])
                if isinstance(entries, list):
                    return entries
    return None


def _info(item: ListedSession) -> dict[str, Any]:
    info: dict[str, Any] = {"sessionId": item.id, "cwd": item.cwd, "updatedAt": item.updated_at}
    if item.title:
        info["title"] = item.title
    if item.more:
        info["additionalDirectories"] = list(item.more)
    return info


def replay_update(item: ReplayItem, ws: Workspace, recorded_status: bool = False) -> dict[str, Any]:
    if item.kind == "user":
        return p.user_chunk(item.text, new_id())
    if item.kind == "image" and item.image is not None:
        return {"sessionUpdate": "user_message_chunk", "messageId": new_id(),
                "content": {"type": "image", "mimeType": item.image["mimeType"], "data": item.image["data"]}}
    if item.kind == "agent":
        return p.agent_chunk(item.text, new_id())
    arguments = item.arguments or {}
    tool = tools.get(item.name)
    try:
        title = tool.title(arguments) if tool else item.name
        places = [p.location(loc.path, loc.line) for loc in tool.locations(arguments, ws)] if tool else []
    except Exception as exc:  # arguments of a shape the tool cannot read: its name, no places (as live)
        from bob_acp import log

        log.get("bob.acp").debug(f"replay of {item.ref}: its title and places cannot be read: {exc!r}")
        title, places = item.name, []
    kind = tool.kind if tool else "execute"
    if item.output is None:
        return p.tool_call(item.ref, title, kind, arguments, places, status="failed")
    status = "failed" if item.failed and recorded_status else "completed"  # completed: the default profile's replay
    frame = p.tool_call(item.ref, title, kind, arguments, places, status=status,
                        content=result_content(item.name, arguments, item.output))
    frame["rawOutput"] = {"output": p.bounded(item.output)}
    return frame

