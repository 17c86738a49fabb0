"""The agent side of ACP: the method table, initialize and authenticate, session/new, and the
wiring of the rooms: the client channel (channel.py), the session table (table.py), opening a
session (opener.py), turns (turns.py), saved sessions (saved.py), selectors (selectors.py).

Every method is routed from one table (`routes`) straight to the method of the room that
holds it, with what must hold first (initialized, or a usable model) said beside it. The rooms
that import the engine are made at their first call (`Rooms.late`), so answering `initialize`
never waits for those imports.
Handlers marked worker=True run on worker threads; the others on the dispatcher, which must
never block on anything without a bound.

The configuration is read again when its file changed (runtime.Reader): session/new, load,
resume and authenticate use it as it is now; an open session keeps the one it was opened with.
"""

from __future__ import annotations

import functools
import threading

from bob_acp import __version__, jsontext
from bob_acp.acp import auth
from bob_acp.acp import protocol as p
from bob_acp.acp.channel import ClientCapabilities, ClientChannel
from bob_acp.acp.lazy import LazyModule, loaded, warm
from bob_acp.acp.opener import Opener
from bob_acp.acp.params import cwd_param, mcp_servers, more_roots
from bob_acp.acp.table import SessionTable
from bob_acp.cancel import SHUTDOWN
from bob_acp.files import workspace
from bob_acp.jsonrpc.endpoint import Reply, Route
from bob_acp.jsonrpc.errors import AUTH_REQUIRED, RpcError
from bob_acp.jsontext import mapping

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable

    from bob_acp.acp.runtime import Reader, Runtime
    from bob_acp.acp.saved import Handlers as SavedHandlers
    from bob_acp.acp.selectors import Handlers as SelectorHandlers
    from bob_acp.acp.session import Session, Turn
    from bob_acp.acp.turns import Handlers as TurnHandlers
    from bob_acp.config import Config
    from bob_acp.engine import Refs
    from bob_acp.log import Logger

# Not needed to answer `initialize`: loaded on first use, or warmed once initialize is answered.
engine = LazyModule("bob_acp.engine", globals(), "engine")
sessions = LazyModule("bob_acp.sessions", globals(), "sessions")
skills = LazyModule("bob_acp.context.skills", globals(), "skills")
tools = LazyModule("bob_acp.tools.builtin", globals(), "tools")
turns_module = LazyModule("bob_acp.acp.turns", globals(), "turns_module")
saved_module = LazyModule("bob_acp.acp.saved", globals(), "saved_module")
selectors_module = LazyModule("bob_acp.acp.selectors", globals(), "selectors_module")
mcp_module = LazyModule("bob_acp.mcp", globals(), "mcp_module")


def agent_capabilities(cfg: Config) -> dict[str, Any]:
    """What `initialize` advertises for this configuration (also shown by `--check`)."""
    agent: dict[str, Any] = {
        "loadSession": bool(cfg.sessions.enabled),
        "promptCapabilities": {"image": bool(cfg.acp.images), "audio": False,
                               "embeddedContext": bool(cfg.acp.embeddedContext)},
        "mcpCapabilities": {"http": bool(cfg.mcp.enabled), "sse": bool(cfg.mcp.enabled)},
    }
    if cfg.acp.sessionHistory:
        agent["sessionCapabilities"] = {"list": {}, "resume": {}, "close": {}, "delete": {}}
    if cfg.acp.fork and cfg.sessions.enabled:
        agent.setdefault("sessionCapabilities", {})["fork"] = {}  # (unstable: the draft schema's)
    if cfg.acp.additionalDirectories:
        agent.setdefault("sessionCapabilities", {})["additionalDirectories"] = {}
    if cfg.acp.auth:  # (signed in means a usable model: logout forgets the key bob-acp setup stored)
        agent["auth"] = {"logout": {}}
    return agent


class Rooms:
    """The handlers of the rooms that import the engine, each made once, at its first use, with
    the collaborators it uses; `late(room, method)` routes to one before it is made."""

    def __init__(self, server: AgentServer):
        self._server = server
        self._lock = threading.Lock()
        self._made: dict[str, Any] = {}

    def _room(self, name: str, make: Callable[[], Any]) -> Any:
        room = self._made.get(name)
        if room is None:
            with self._lock:
                room = self._made.get(name)
                if room is None:
                    room = self._made[name] = make()
        return room

    @property
    def turns(self) -> TurnHandlers:
        server = self._server
        made: type[TurnHandlers] = turns_module.Handlers  # (typed: mypy checks what it is given)
        return self._room("turns", lambda: made(server.cfg, server.log, server.table, server.channel, server.opener,
                                                server.require_ready, server.closing))

    @property
    def saved(self) -> SavedHandlers:
        server = self._server
        made: type[SavedHandlers] = saved_module.Handlers
        return self._room("saved", lambda: made(server.cfg, server.log, server.table, server.channel, server.opener,
                                                server.refs(), server.require_ready))

    @property
    def selectors(self) -> SelectorHandlers:
        server = self._server
        made: type[SelectorHandlers] = selectors_module.Handlers
        return self._room("selectors", lambda: made(server.cfg, server.log, server.table, server.channel))

    def late(self, room: str, method: str) -> Callable[..., Any]:
        """`method` of the handlers of `room`, which are made (their imports done) at its first call."""
        def call(*args: Any) -> Any:
            return getattr(getattr(self, room), method)(*args)

        call.__name__ = f"{room}.{method}"
        return call


class AgentServer:
    def __init__(self, reader: Reader, log: Logger):
        self.reader = reader
        # The connection's configuration: what initialize advertises and which methods are
        # answered. A session's own (its model, tools, permissions) is the reading it opened with.
        self.cfg = reader.current.cfg
        self.log = log
        self.auth_methods: list[dict[str, Any]] = []  # advertised at initialize (acp.auth)
        self.closing = threading.Event()
        self.initialized = False
        self.signed_out = False  # logout forgot the only key of the model (cleared once there is one again)
        self.channel = ClientChannel()
        self.table = SessionTable(self.cfg, log, self.channel)
        self.opener = Opener(self.cfg, log, self.channel, lambda: self.rooms.selectors, self.refs)
        self.rooms = Rooms(self)
        self._refs: Refs | None = None

    def refs(self) -> Refs:
        """ACP's tool-call ids (call_1, call_2, …): one numbering for the whole connection (made at
        first use: an engine import)."""
        if self._refs is None:
            self._refs = engine.Refs()
        return self._refs

    def fresh(self, wait: bool = True) -> Runtime:
        """The configuration as it is now (read again when its file has changed; `wait`: a moment
        for that reading, which a prompt never waits for)."""
        return self.reader.fresh(wait)

    # ---- the method table -------------------------------------------------------------------

    def routes(self) -> dict[str, Route]:
        # With MCP servers to start (bounded by mcp.timeout), or model servers to ask for their
        # models (choices: auto, bounded), opening a session is long work.
        slow = bool(self.cfg.mcp.enabled) or any(entry.choices == "auto" for entry in self.cfg.entries)
        turns, saved, selectors = (functools.partial(self.rooms.late, room) for room in ("turns", "saved", "selectors"))
        initialized, ready = self.require_initialized, self.require_ready
        table = {
            p.INITIALIZE: Route(self.initialize),
            p.AUTHENTICATE: Route(self.authenticate, check=initialized),
            **({p.LOGOUT: Route(self.logout, worker=True, check=initialized)} if self.cfg.acp.auth else {}),
            p.SESSION_NEW: Route(self.new_session, worker=slow),
            p.SESSION_PROMPT: Route(turns("prompt"), worker=True, prepare=turns("prepare"), cancel=self.cancel_request,
                                    abandon=turns("abandon")),
        }
        if self.cfg.sessions.enabled:
            table[p.SESSION_LOAD] = Route(saved("load"), worker=True, prepare=saved("prepare_load"),
                                          abandon=saved("abandon_load"))
            if self.cfg.acp.fork:
                table[p.SESSION_FORK] = Route(saved("fork"), worker=slow, check=ready)
        if self.cfg.acp.sessionHistory:  # (no model needed to list, close or delete what is on disk)
            table[p.SESSION_LIST] = Route(saved("list"), check=initialized)
            table[p.SESSION_RESUME] = Route(saved("resume"), worker=slow, check=ready)
            table[p.SESSION_CLOSE] = Route(saved("close"), check=initialized)
            table[p.SESSION_DELETE] = Route(saved("delete"), check=initialized)
        if self.cfg.acp.steering:
            table[p.SESSION_STEERING] = Route(turns("steer"), worker=True, check=initialized)
        if self.cfg.acp.configOptions:
            table[p.SESSION_SET_CONFIG_OPTION] = Route(selectors("set_config_option"), check=initialized)
            table[p.SESSION_SET_MODE] = Route(selectors("set_mode"), check=initialized)
        for method in (*p.NOT_SUPPORTED, *(() if self.cfg.sessions.enabled else (p.SESSION_LOAD,))):
            table.setdefault(method, Route(self.unsupported(method)))
        return table

    def notifications(self) -> dict[str, Any]:
        return {p.SESSION_CANCEL: self.rooms.late("turns", "cancel")}

    @staticmethod
    def cancel_request(prepared: tuple[Session, Turn]) -> None:
        """$/cancel_request of a prompt: as its session/cancel would."""
        prepared[1].cancel_now()

    def unsupported(self, method: str) -> Callable[[dict[str, Any]], None]:
        def handler(_params: dict[str, Any]) -> None:
            if method.startswith("session/"):
                self.require_initialized()
            raise RpcError.method_not_found(method)
        return handler

    # ---- the end ------------------------------------------------------------------------------

    def on_close(self) -> None:
        """Input ended or a signal came: cancel every turn, kill every tool process and server."""
        self.closing.set()
        held = self.table.all()
        for session in held:
            session.cancel_all(SHUTDOWN)  # (what runs now is recorded as stopped by the shutdown)
            if session.conv.checkpoints is not None:
                session.conv.checkpoints.close()
        bash, mcp = loaded("bob_acp.tools.bash"), loaded("bob_acp.mcp")
        if bash is not None:  # (no command ran if it was never loaded)
            bash.kill_all()
        for session in held:
            if session.conv.sandbox is not None:
                session.conv.sandbox.end()
        if mcp is not None:  # every server, those of sessions still opening too
            mcp.close_all()

    # ---- initialize / authenticate ---------------------------------------------------------

    def initialize(self, params: dict[str, Any]) -> Any:
        version = params.get("protocolVersion")
        if isinstance(version, bool) or not isinstance(version, int):
            raise RpcError.invalid_params("protocolVersion: must be an integer")
        info = mapping(params.get("clientInfo"))
        name, client_version = str(info.get("name", "unknown"))[:100], str(info.get("version", ""))[:100]
        client = " ".join(part for part in (name, client_version) if part)
        self.log.info("[acp] initialize: client {client}, protocol {protocol}", client=client, protocol=version)
        offered = mapping(params.get("clientCapabilities"))
        self.channel.capabilities = ClientCapabilities(offered)
        if self.cfg.acp.auth:
            self.auth_methods = auth.methods(auth.terminal_auth_wanted(offered), self.reader.current.usable)
        first = not self.initialized
        self.initialized = True
        result = {
            "protocolVersion": p.PROTOCOL_VERSION,
            "agentCapabilities": agent_capabilities(self.cfg),
            "agentInfo": {"name": "bob", "title": "Bob (bash-first agent)", "version": __version__},
            "authMethods": self.auth_methods,
        }
        if self.cfg.acp.steering:  # (as codex-acp and claude-agent-acp advertise it)
            result["_meta"] = {"steering": {"supported": True}}
        if first:
            return Reply(result, after=lambda: warm(jsontext.use_orjson, engine, sessions, skills, tools, turns_module,
                                                    self._sandbox_probe))
        return result

    def _sandbox_probe(self) -> None:
        """What this machine gives a sandbox, asked once before the first session needs it."""
        if self.cfg.tools.sandbox != "off":
            from bob_acp import sandbox
            from bob_acp.processes import children

            children.protect()
            sandbox.machine(bool(self.cfg.tools.sandboxNetwork))

    def authenticate(self, params: dict[str, Any]) -> dict[str, Any]:
        from bob_acp.acp.params import required_str

        method_id = required_str(params, "methodId")
        if not self.cfg.acp.auth:
            return {}  # no methods advertised: an empty answer (the default profile)
        if method_id == auth.SETUP_METHOD:
            raise RpcError.invalid_params("methodId: bob-setup is a terminal sign-in: the client runs it, "
                                          "it is not passed to authenticate")
        if method_id != auth.MODEL_METHOD:
            raise RpcError.invalid_params(f"methodId: unknown authentication method {method_id[:100]!r}")
        self.require_ready()  # (the configuration as it is now: set up in a terminal meanwhile)
        return {}

    def logout(self, _params: dict[str, Any]) -> dict[str, Any]:
        """logout (acp.auth): the key `bob-acp setup` stored for the configured model is
        forgotten, so that Bob asks for sign-in again (new sessions and prompts: -32000); a key
        file of the user's own, or one in the environment, is left, and the answer says which
        (`_meta.bob`), as does the log."""
        from bob_acp.config import written

        runtime = self.fresh()
        try:
            forgotten, kept = written.forget(runtime.cfg, self.reader.env)
        except OSError as exc:
            raise RpcError.internal_error(f"logout: the stored key could not be forgotten: {exc}") from None
        self.reader.read_now()  # (before the answer: what comes after it asks for sign-in)
        # Signed out while the model has no key but the one forgotten: a model behind a baseUrl
        # (a gateway, LiteLLM) stays "usable" without a key, yet the user asked to sign out.
        self.signed_out = bool(forgotten) and not self._keyed(self.reader.current)
        signed_in = self.reader.current.usable and not self.signed_out
        self.log.info("[acp] logout: forgot {forgotten}; kept {kept}; {state}",
                      forgotten="; ".join(forgotten) or "nothing (no key bob-acp setup stored is in use)",
                      kept="; ".join(kept) or "nothing",
                      state="still signed in (a model is usable)" if signed_in else "sign-in is asked again")
        return {"_meta": {"bob": {"forgotten": forgotten, "kept": kept, "signedIn": signed_in}}}

    def _keyed(self, runtime: Runtime) -> bool:
        """Whether the configured model has a key of its own now (from its variable or key file)."""
        from bob_acp.config import keys
        from bob_acp.exceptions import ConfigError

        try:
            return keys.key_of(runtime.cfg.model, self.reader.env) is not None
        except ConfigError:
            return False

    def require_initialized(self) -> None:
        if not self.initialized:
            raise RpcError.invalid_request("initialize first")

    def require_ready(self, wait: bool = True) -> Runtime:
        """The configuration as it is now, for work that needs a model; with acp.auth, -32000
        (authentication required) while no model is usable."""
        self.require_initialized()
        runtime = self.fresh(wait)
        if self.cfg.acp.auth and self.signed_out:
            if not self._keyed(runtime):  # (no request goes out with the key forgotten, or with none)
                raise RpcError(AUTH_REQUIRED, "Authentication required: you signed out of Bob; sign in again (run "
                                              "`bob-acp setup` in a terminal, or your editor's sign-in)")
            self.signed_out = False  # (a key again: set up meanwhile)
        if self.cfg.acp.auth and not runtime.usable:
            if runtime.problem:
                raise RpcError(AUTH_REQUIRED, f"Authentication required: Bob could not use its configuration: "
                                              f"{runtime.problem}; fix it, or run `bob-acp setup` in a terminal")
            raise RpcError(AUTH_REQUIRED, f"Authentication required: {auth.required_message(runtime.cfg)}")
        return runtime

    # ---- session/new ----------------------------------------------------------------------------

    def new_session(self, params: dict[str, Any]) -> Reply:
        runtime = self.require_ready()
        ws = workspace.of(cwd_param(params), more_roots(params, self.cfg.acp.additionalDirectories) or ())
        servers = mcp_servers(params)
        self.table.check_room()  # refuse before building anything (skills, system prompt)
        sid = sessions.new_id()
        session = self.opener.make(sid, ws, None, servers, runtime)
        if self.reader.unreadable:
            session.conv.notices.append(f"{self.reader.unreadable}: this session uses the configuration as it was "
                                        "last read.")
        self.table.admit(session)  # (refused after all, the bound or a race: it ends, its servers with it)
        self.table.save(session)

        def after() -> None:  # (once the answer is written: its round trip does not wait for these)
            self.opener.send_commands(session)
            also = f" (and {len(ws.more)} more folder(s))" if ws.more else ""
            self.log.info("[acp] session {session}: new in {cwd}{more_roots}; {mcp_servers} MCP server(s) {mcp}",
                          session=sid, cwd=ws.cwd, more_roots=also, mcp_servers=len(servers),
                          mcp="started" if self.cfg.mcp.enabled else "ignored")

        return Reply(self.opener.result(session, {"sessionId": sid}), after=after)

