"""The agent side of ACP: sessions, the global turn lock, and the method handlers.

Threads: handlers marked worker=True (prompt, load) run on worker threads of the endpoint; all
others run on the dispatcher. One global turn lock serialises prompt turns process-wide; a
session's cancel Events reach its running turn and the prompts waiting behind it.
"""

from __future__ import annotations

import collections
import os
import sys
import threading
from typing import Any

from bob_acp import __version__, history
from bob_acp.acp import prompt as prompts
from bob_acp.acp import protocol as p
from bob_acp.exceptions import Cancelled
from bob_acp.jsonrpc.endpoint import Endpoint, Outcome, Reply, Route
from bob_acp.jsonrpc.errors import RpcError
from bob_acp.lazy import LazyModule, warm

# Not needed to answer `initialize`: loaded on first use, or warmed once initialize is answered.
engine = LazyModule("bob_acp.engine")
sessions = LazyModule("bob_acp.sessions")
skills = LazyModule("bob_acp.skills")
system_prompt = LazyModule("bob_acp.system_prompt")
tools = LazyModule("bob_acp.tools")
compress = LazyModule("bob_acp.compress")

DEFAULT_MAX_SESSIONS = 1024


class Session:
    def __init__(self, sid: str, cwd: str, conv: engine.Conversation, catalog: Any):
        self.id = sid
        self.cwd = cwd
        self.conv = conv
        self.catalog = catalog
        self.cancels: set[threading.Event] = set()  # its running turn and those waiting
        self.running = False

    def cancel_all(self) -> None:
        for event in list(self.cancels):
            event.set()


class AgentServer:
    def __init__(self, cfg: Any, log: Any, provider: Any, no_model_message: str, auth_methods: list | None = None,
                 authenticate: Any = None):
        self.cfg = cfg
        self.log = log
        self.provider = provider
        self._no_model_message = no_model_message
        self._engine: Any = None
        self.auth_methods = list(auth_methods or [])
        self._authenticate_hook = authenticate
        self.endpoint: Endpoint | None = None
        self.sessions: collections.OrderedDict[str, Session] = collections.OrderedDict()
        self.draining: dict[str, Session] = {}  # evicted sessions whose turn has not returned yet
        self.sessions_lock = threading.Lock()
        self.turn_lock = threading.Lock()
        self.closing = threading.Event()
        self.initialized = False
        self.authenticated = not self.auth_methods

    @property
    def engine(self) -> Any:
        if self._engine is None:
            self._engine = engine.Engine(self.cfg, self.provider, self._no_model_message, self.log)
        return self._engine

    # ---- wiring ---------------------------------------------------------------------------

    def routes(self) -> dict[str, Route]:
        table = {
            p.INITIALIZE: Route(self.initialize),
            p.AUTHENTICATE: Route(self.authenticate),
            p.SESSION_NEW: Route(self.new_session),
            p.SESSION_PROMPT: Route(self.prompt, worker=True, prepare=self.prepare_prompt),
        }
        if self.cfg.sessions.enabled:
            table[p.SESSION_LOAD] = Route(self.load_session, worker=True)
        unsupported = p.NOT_SUPPORTED if self.cfg.sessions.enabled else (*p.NOT_SUPPORTED, p.SESSION_LOAD)
        for method in unsupported:
            table[method] = Route(self._unsupported(method))
        return table

    def notifications(self) -> dict:
        return {p.SESSION_CANCEL: self.cancel}

    def on_close(self) -> None:
        """Input ended or a signal came: cancel every turn and kill every tool process."""
        self.closing.set()
        with self.sessions_lock:
            held = list(self.sessions.values()) + list(self.draining.values())
        for session in held:
            session.cancel_all()
        if "bob_acp.tools" in sys.modules:  # no tool ran if they were never loaded
            tools.kill_all()

    def _unsupported(self, method: str):
        def handler(_params: dict) -> None:
            if method.startswith("session/"):
                self._require_ready()
            raise RpcError.method_not_found(method)

        return handler

    def _update(self, sid: str, update: dict) -> None:
        self.endpoint.notify(p.SESSION_UPDATE, {"sessionId": sid, "update": update})

    # ---- initialize / authenticate ---------------------------------------------------------

    def initialize(self, params: dict) -> Any:
        version = params.get("protocolVersion")
        if isinstance(version, bool) or not isinstance(version, int):
            raise RpcError.invalid_params("protocolVersion: must be an integer")
        info = params.get("clientInfo") if isinstance(params.get("clientInfo"), dict) else {}
        name, client_version = info.get("name", "unknown"), info.get("version", "")
        self.log.info(f"[acp] initialize: client {name} {client_version}, protocol {version}".replace("  ", " "))
        first = not self.initialized
        self.initialized = True
        result = {
            "protocolVersion": p.PROTOCOL_VERSION,
            "agentCapabilities": {
                "loadSession": bool(self.cfg.sessions.enabled),
                "promptCapabilities": {"image": False, "audio": False, "embeddedContext": False},
                "mcpCapabilities": {"http": False, "sse": False},
            },
            "agentInfo": {"name": "bob", "title": "Bob (bash-first agent)", "version": __version__},
            "authMethods": self.auth_methods,
        }
        if first:
            return Reply(result, after=lambda: warm(engine, sessions, skills, system_prompt, tools, compress))
        return result

    def authenticate(self, params: dict) -> dict:
        if not self.initialized:
            raise RpcError.invalid_request("initialize first")
        method_id = _required_str(params, "methodId")
        if not self.auth_methods:
            return {}
        if method_id not in {m.get("id") for m in self.auth_methods}:
            raise RpcError.invalid_params(f"methodId: unknown authentication method {method_id!r}")
        if self._authenticate_hook is not None and not self._authenticate_hook(method_id, params):
            raise RpcError.auth_required()
        self.authenticated = True
        return {}

    def _require_ready(self) -> None:
        if not self.initialized:
            raise RpcError.invalid_request("initialize first")
        if not self.authenticated:
            raise RpcError.auth_required()

    # ---- sessions ---------------------------------------------------------------------------

    def new_session(self, params: dict) -> Reply:
        self._require_ready()
        cwd = _cwd_param(params)
        servers = _mcp_servers(params)
        self._check_room()  # refuse before building anything (skills, system prompt)
        sid = sessions.new_id()
        session = self._make_session(sid, cwd, None)
        self._admit(session)
        self.log.info(f"[acp] session {sid}: new in {cwd}; {len(servers)} MCP server(s) ignored")
        self._save(session)
        return Reply({"sessionId": sid}, after=lambda: self._send_commands(session))

    def _make_session(self, sid: str, cwd: str, stored: list[dict] | None) -> Session:
        catalog = skills.discover(cwd, self.cfg)
        for warning in catalog.warnings:
            self.log.warning(f"[acp] session {sid}: {warning}")
        messages = [history.system(system_prompt.build(cwd, catalog))]
        if stored:
            messages += [m for m in stored if m["role"] != "system"]
        conv = engine.Conversation(cwd=cwd, messages=messages, skills=catalog.skills)
        return Session(sid, cwd, conv, catalog)

    def _limit(self) -> int:
        return self.cfg.limits.maxSessions or DEFAULT_MAX_SESSIONS  # 0: the default; negative: no bound

    def _check_room(self) -> None:
        limit = self._limit()
        if self.cfg.limits.sessionOverflow != "evict_oldest" and 0 < limit <= len(self.sessions):
            raise RpcError.invalid_params(f"too many sessions: this connection holds {limit} (limits.maxSessions)")

    def _admit(self, session: Session) -> None:
        """Seat a session within the bound (refuse, or evict the oldest)."""
        limit = self._limit()
        with self.sessions_lock:
            if session.id in self.sessions or session.id in self.draining:
                raise RpcError.internal_error(f"session id {session.id} is already held by this connection")
            while limit > 0 and len(self.sessions) >= limit:
                if self.cfg.limits.sessionOverflow != "evict_oldest":
                    raise RpcError.invalid_params(f"too many sessions: this connection holds {limit} (limits.maxSessions)")
                _, oldest = self.sessions.popitem(last=False)
                if oldest.cancels:
                    self.draining[oldest.id] = oldest
                oldest.cancel_all()
                self.log.info(f"[acp] session {oldest.id}: evicted (limits.maxSessions {limit})")
            self.sessions[session.id] = session

    def _session(self, params: dict) -> Session:
        sid = _required_str(params, "sessionId")
        session = self.sessions.get(sid)
        if session is None:
            raise RpcError.invalid_params(f"sessionId: unknown session {sid}", data={"sessionId": sid})
        return session

    def _send_commands(self, session: Session) -> None:
        self._update(session.id, p.commands_update(skills.available_commands(session.catalog)))

    def _store(self, cwd: str) -> "sessions.SessionStore":
        return sessions.SessionStore(cwd, self.cfg.sessions.dir)

    def _save(self, session: Session, sid: str | None = None, messages: list[dict] | None = None) -> None:
        if not self.cfg.sessions.enabled:
            return
        try:
            self._store(session.cwd).save(sid or session.id, session.conv.messages if messages is None else messages)
        except Exception as exc:  # the session goes on; the user learns why it is not kept
            self.log.warning(f"[acp] session {session.id}: not saved: {exc}")

    # ---- prompt / cancel ---------------------------------------------------------------------

    def cancel(self, params: dict) -> None:
        sid = params.get("sessionId")
        session = self.sessions.get(sid) if isinstance(sid, str) else None
        session = session or (self.draining.get(sid) if isinstance(sid, str) else None)
        if session is None:
            self.log.info(f"[acp] cancel for unknown session {sid!r} ignored")
            return
        session.cancel_all()

    def prepare_prompt(self, params: dict) -> tuple[Session, threading.Event]:
        """On the dispatcher, in frame order: check the request and register the turn's cancel
        Event, so a session/cancel sent right behind the prompt always reaches it."""
        self._require_ready()
        session = self._session(params)
        if not isinstance(params.get("prompt"), list):
            raise RpcError.invalid_params("prompt: must be an array of content blocks")
        cancel = threading.Event()
        session.cancels.add(cancel)
        return session, cancel

    def prompt(self, params: dict, prepared: tuple[Session, threading.Event] | None = None) -> dict:
        session, cancel = prepared or self.prepare_prompt(params)
        blocks = params["prompt"]
        try:
            if self.closing.is_set() or not self._acquire_turn(cancel):
                return {"stopReason": p.CANCELLED}  # waited, was cancelled: ran nothing, recorded nothing
            try:
                session.running = True
                return self._run_prompt(session, blocks, cancel)
            finally:
                session.running = False
                self.turn_lock.release()
        finally:
            session.cancels.discard(cancel)
            if not session.cancels:
                self.draining.pop(session.id, None)

    def _acquire_turn(self, cancel: threading.Event) -> bool:
        while not self.turn_lock.acquire(timeout=0.05):
            if cancel.is_set():
                return False
        if cancel.is_set():
            self.turn_lock.release()
            return False
        return True

    def _run_prompt(self, session: Session, blocks: list, cancel: threading.Event) -> dict:
        text = prompts.flatten(blocks)
        command = text.strip()
        if command == "/new":
            return self._command_new(session)
        if command == "/compact":
            return self._command_compact(session, cancel)
        text = skills.rewrite_prompt(text, session.catalog)
        found = prompts.attachments(text, session.cwd)
        for _written, path, _kind in found:
            self.log.info(f"[acp] session {session.id}: attached {path}")
        text = prompts.with_attachments(text, found)
        sink = TurnSink(self, session)
        try:
            stop, stats = self.engine.run_turn(session.conv, text, sink, cancel)
        except engine.TurnFailed as failure:
            line = str(failure)
            self.log.warning(f"[acp] session {session.id}: turn failed: {line}")
            self.log.info(f"[acp] turn done: {failure.stats.line()}")
            raise RpcError.internal_error(line, data={"error": line}) from None
        finally:
            self._save(session)
        self.log.info(f"[acp] turn done: {stats.line()}")
        return {"stopReason": stop}

    def _command_new(self, session: Session) -> dict:
        conv = session.conv
        forgotten = len(conv.messages) - 1
        if self.cfg.sessions.enabled and forgotten > 0:
            kept_as = sessions.new_id()
            self._save(session, kept_as, list(conv.messages))
            self.log.info(f"[acp] session {session.id}: previous conversation kept as {kept_as}")
        conv.messages[:] = conv.messages[:1]
        conv.last_input_tokens = None
        self._update(session.id, p.agent_chunk(f"🆕 New session: {forgotten} message(s) forgotten."))
        self.log.info(f"[acp] session {session.id}: new session, {forgotten} message(s) forgotten")
        self._save(session)
        return {"stopReason": p.END_TURN}

    def _command_compact(self, session: Session, cancel: threading.Event) -> dict:
        conv = session.conv
        if self.provider is None:
            line = "[compact: failed, history kept: no model is configured]"
        else:
            try:
                outcome = compress.compress(conv.messages, self.provider, self.cfg.context.keepLastTurns, cancel)
            except Cancelled:
                return {"stopReason": p.CANCELLED}
            if outcome.changed:
                conv.messages[:] = outcome.messages
                conv.last_input_tokens = None
            line = outcome.line
        self._update(session.id, p.agent_chunk(line))
        self.log.info(f"[acp] session {session.id}: /compact — {line}")
        self._save(session)
        return {"stopReason": p.END_TURN}

    # ---- load ----------------------------------------------------------------------------------

    def load_session(self, params: dict) -> dict:
        self._require_ready()
        sid = _required_str(params, "sessionId")
        cwd = _cwd_param(params)
        _mcp_servers(params)
        if not sessions.valid_id(sid):
            raise RpcError.invalid_params("sessionId: not a valid session id", data={"sessionId": sid, "error": "not a valid session id"})
        held = self.sessions.get(sid) or self.draining.get(sid)
        if held is not None and (held.running or held.cancels):
            raise RpcError.invalid_request(f"session {sid} has a turn running; cancel it or wait")
        store = self._store(cwd)
        try:
            stored = store.load(sid)
        except sessions.SessionLoadError as exc:
            raise RpcError.invalid_params(f"sessionId: cannot load session {sid}: {exc.reason}",
                                          data={"sessionId": sid, "error": exc.reason}) from None
        session = self._make_session(sid, cwd, stored.messages)
        with self.sessions_lock:
            self.sessions.pop(sid, None)
        self._admit(session)
        replayed = self._replay(session)
        self._send_commands(session)
        self.log.info(f"[acp] session {sid} loaded from {store.folder}: {replayed} message(s) replayed")
        return {}

    def _replay(self, session: Session) -> int:
        items = sessions.replay_items(session.conv.messages)
        engine.reserve_refs([item.ref for item in items if item.kind == "tool"])
        for item in items:
            self._update(session.id, _replay_update(item))
        return sum(1 for m in session.conv.messages if m["role"] != "system")


class TurnSink:
    """The engine's events as ACP frames for one session."""

    def __init__(self, server: AgentServer, session: Session):
        self.server = server
        self.sid = session.id

    def text(self, chunk: str) -> None:
        self.server._update(self.sid, p.agent_chunk(chunk))

    def tool_pending(self, call: engine.Call) -> None:
        self.server._update(self.sid, p.tool_call(call.ref, call.title, call.kind, call.arguments, call.locations))

    def permission(self, call: engine.Call, cancel: threading.Event) -> str:
        options = p.permission_options(call.name)
        params = {
            "sessionId": self.sid,
            "toolCall": p.tool_request(call.ref, call.title, call.kind, call.arguments, call.locations),
            "options": options,
        }
        outcome = self.server.endpoint.request(p.REQUEST_PERMISSION, params, cancel)
        choice = chosen_option(outcome, {o["optionId"] for o in options})
        if choice == p.REJECT and not outcome.ok:
            self.server.log.info(f"[acp] session {self.sid}: permission for {call.ref} counted as rejected: {outcome.error or 'no answer'}")
        return choice

    def tool_running(self, call: engine.Call) -> None:
        self.server._update(self.sid, p.tool_call_update(call.ref, "in_progress"))

    def tool_finished(self, call: engine.Call, result: Any) -> None:
        if result.diff is not None:
            content = [p.diff_content(result.diff.path, result.diff.old_text, result.diff.new_text)]
        else:
            content = [p.text_content(result.output)]
        status = "failed" if result.failed else "completed"
        self.server._update(self.sid, p.tool_call_update(call.ref, status, content, {"output": result.output}))


def chosen_option(outcome: Outcome, offered: set[str]) -> str:
    """The option the user selected, or reject: anything but a well-formed selection of an
    offered option (an error, a cancelled outcome, a wrong shape) never reads as approval."""
    if not outcome.ok or not isinstance(outcome.result, dict):
        return p.REJECT
    selected = outcome.result.get("outcome")
    if not isinstance(selected, dict) or selected.get("outcome") != "selected":
        return p.REJECT
    option = selected.get("optionId")
    return option if isinstance(option, str) and option in offered else p.REJECT


def _replay_update(item: Any) -> dict:
    if item.kind == "user":
        return p.user_chunk(item.text)
    if item.kind == "agent":
        return p.agent_chunk(item.text)
    tool = tools.get(item.name)
    try:
        title = tool.title(item.arguments) if tool else item.name
    except Exception:
        title = item.name
    kind = tool.kind if tool else "execute"
    if item.output is None:
        return p.tool_call(item.ref, title, kind, item.arguments, [], status="failed")
    frame = p.tool_call(item.ref, title, kind, item.arguments, [], status="completed")
    frame["content"] = [p.text_content(item.output)]
    frame["rawOutput"] = {"output": item.output}
    return frame


def _required_str(params: dict, name: str) -> str:
    value = params.get(name)
    if not isinstance(value, str):
        raise RpcError.invalid_params(f"{name}: {'required' if value is None else 'must be a string'}")
    return value


def _cwd_param(params: dict) -> str:
    cwd = _required_str(params, "cwd")
    if not os.path.isabs(cwd):
        raise RpcError.invalid_params(f"cwd: must be an absolute path, got {cwd!r}")
    if "\0" in cwd or not os.path.isdir(cwd):
        raise RpcError.invalid_params(f"cwd: not a directory: {cwd!r}")
    return os.path.normpath(cwd)


def _mcp_servers(params: dict) -> list:
    servers = params.get("mcpServers", [])
    if not isinstance(servers, list):
        raise RpcError.invalid_params("mcpServers: must be an array")
    return servers
