"""The agent side of ACP: the method table, initialize and authenticate, session/new, and the
wiring of the rooms: the client channel (channel.py), the session table (table.py), opening a
session (opener.py), turns (turns.py), saved sessions (saved.py), selectors (selectors.py).
Each room is given the collaborators it uses; none calls back into this one. Handlers marked
worker=True run on worker threads; the others on the dispatcher, which must never block on
anything without a bound."""

from __future__ import annotations

import sys
import threading

from bob_acp import __version__, jsontext, workspace
from bob_acp.acp import auth
from bob_acp.acp import protocol as p
from bob_acp.acp.channel import ClientCapabilities, ClientChannel
from bob_acp.acp.opener import Opener
from bob_acp.acp.params import cwd_param, mcp_servers, more_roots, required_str
from bob_acp.acp.table import SessionTable
from bob_acp.jsonrpc.endpoint import Reply, Route
from bob_acp.jsonrpc.errors import AUTH_REQUIRED, RpcError
from bob_acp.jsontext import mapping
from bob_acp.lazy import LazyModule, warm

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable

    from bob_acp.config import Config
    from bob_acp.engine import Engine
    from bob_acp.log import Logger
    from bob_acp.providers.base import Provider
    from bob_acp.providers.models import ModelSet

# Not needed to answer `initialize`: loaded on first use, or warmed once initialize is answered.
engine = LazyModule("bob_acp.engine", globals(), "engine")
sessions = LazyModule("bob_acp.sessions", globals(), "sessions")
skills = LazyModule("bob_acp.skills", globals(), "skills")
tools = LazyModule("bob_acp.tools", globals(), "tools")
turns_module = LazyModule("bob_acp.acp.turns", globals(), "turns_module")
saved_module = LazyModule("bob_acp.acp.saved", globals(), "saved_module")
selectors_module = LazyModule("bob_acp.acp.selectors", globals(), "selectors_module")
mcp_module = LazyModule("bob_acp.mcp", globals(), "mcp_module")


class AgentServer:
    def __init__(self, cfg: Config, log: Logger, provider: Provider | ModelSet | None, no_model_message: str,
                 env: dict | None = None, redact: Callable[[Any], Any] | None = None,
                 config_problem: str | None = None, hidden_env: tuple[str, ...] = ()):
        self.cfg = cfg
        self.log = log
        self.provider = provider
        self.no_model_message = no_model_message
        self.env = env  # what tools and MCP servers start with (secrets dropped)
        self.redact = redact
        self.auth_methods: list[dict] = []  # advertised at initialize (acp.auth)
        self.config_problem = config_problem  # the config error Bob serves with the defaults, if any
        self.closing = threading.Event()
        self.initialized = False
        # With acp.auth, "authenticated" means a usable model is configured: nothing else to sign in to.
        self.authenticated = not cfg.acp.auth or provider is not None
        self.channel = ClientChannel()
        self.table = SessionTable(cfg, log, self.channel, redact)
        self.opener = Opener(cfg, log, self.channel, lambda: self.engine, lambda: self.part("selectors"), env,
                             hidden_env)
        self._engine: Engine | None = None
        self._parts: dict[str, Any] = {}
        self._parts_lock = threading.Lock()

    @property
    def engine(self) -> Engine:
        if self._engine is None:
            with self._parts_lock:
                if self._engine is None:
                    self._engine = engine.Engine(self.cfg, self.provider, self.no_model_message, self.log,
                                                 engine.Refs(), self.env, self.redact)
        return self._engine

    def part(self, name: str) -> Any:
        """The handlers of one room (turns, saved, selectors), made once, on first use, each with
        the collaborators it uses."""
        made = self._parts.get(name)
        if made is not None:
            return made
        engine_of = lambda: self.engine  # noqa: E731  (made on first use)
        with self._parts_lock:
            if name not in self._parts:
                if name == "turns":
                    made = turns_module.Handlers(self.cfg, self.log, self.table, self.channel, engine_of,
                                                 self.opener, self.require_ready, self.closing)
                elif name == "saved":
                    made = saved_module.Handlers(self.cfg, self.log, self.table, self.channel, engine_of,
                                                 self.opener, self.require_ready)
                else:
                    made = selectors_module.Handlers(self.cfg, self.log, self.table, self.channel, engine_of)
                self._parts[name] = made
            return self._parts[name]

    # ---- wiring ---------------------------------------------------------------------------

    def routes(self) -> dict[str, Route]:
        # With MCP servers to start (bounded by mcp.timeout), or model servers to ask for their
        # models (choices: auto, bounded), opening a session is long work.
        slow = bool(self.cfg.mcp.enabled) or any(entry.choices == "auto" for entry in self.cfg.entries)
        table = {
            p.INITIALIZE: Route(self.initialize),
            p.AUTHENTICATE: Route(self.authenticate),
            p.SESSION_NEW: Route(self.new_session, worker=slow),
            p.SESSION_PROMPT: Route(lambda params, prepared=None: self.part("turns").prompt(params, prepared),
                                    worker=True, prepare=lambda params: self.part("turns").prepare(params),
                                    cancel=lambda prepared: prepared[1].cancel_now()),  # ($/cancel_request)
        }
        unsupported = list(p.NOT_SUPPORTED)
        if self.cfg.sessions.enabled:
            table[p.SESSION_LOAD] = Route(lambda params, prepared=None: self.part("saved").load(params, prepared),
                                          worker=True, prepare=lambda params: self.part("saved").prepare_load(params))
        else:
            unsupported.append(p.SESSION_LOAD)
        if self.cfg.acp.sessionHistory:
            for method, name in ((p.SESSION_LIST, "list"), (p.SESSION_RESUME, "resume"),
                                 (p.SESSION_CLOSE, "close"), (p.SESSION_DELETE, "delete")):
                table[method] = Route(self._delegate("saved", name), worker=slow and name == "resume")
        if self.cfg.acp.configOptions:
            table[p.SESSION_SET_CONFIG_OPTION] = Route(self._delegate("selectors", "set_config_option"))
            table[p.SESSION_SET_MODE] = Route(self._delegate("selectors", "set_mode"))
        for method in unsupported:
            if method not in table:
                table[method] = Route(self._unsupported(method))
        return table

    def _delegate(self, part: str, name: str) -> Callable[[dict], Any]:
        def handler(params: dict) -> Any:
            self.require_ready()
            return getattr(self.part(part), name)(params)
        return handler

    def notifications(self) -> dict:
        return {p.SESSION_CANCEL: lambda params: self.part("turns").cancel(params)}

    def on_close(self) -> None:
        """Input ended or a signal came: cancel every turn, kill every tool process and server."""
        self.closing.set()
        held = self.table.all()
        for session in held:
            session.cancel_all()
        if "bob_acp.tools" in sys.modules:  # no tool ran if they were never loaded
            tools.kill_all()
        for session in held:
            if session.conv.sandbox is not None:
                session.conv.sandbox.end()
        if "bob_acp.mcp" in sys.modules:  # every server, those of sessions still opening too
            mcp_module.close_all()

    def _unsupported(self, method: str) -> Callable[[dict], None]:
        def handler(_params: dict) -> None:
            if method.startswith("session/"):
                self.require_ready()
            raise RpcError.method_not_found(method)
        return handler

    # ---- initialize / authenticate ---------------------------------------------------------

    def initialize(self, params: dict) -> Any:
        version = params.get("protocolVersion")
        if isinstance(version, bool) or not isinstance(version, int):
            raise RpcError.invalid_params("protocolVersion: must be an integer")
        info = mapping(params.get("clientInfo"))
        name, client_version = str(info.get("name", "unknown"))[:100], str(info.get("version", ""))[:100]
        client = " ".join(part for part in (name, client_version) if part)
        self.log.info("[acp] initialize: client {client}, protocol {protocol}", client=client, protocol=version)
        offered = params.get("clientCapabilities")
        offered = mapping(offered)
        self.channel.capabilities = ClientCapabilities(offered)
        if self.cfg.acp.auth:
            self.auth_methods = auth.methods(auth.terminal_auth_wanted(offered))
        first = not self.initialized
        self.initialized = True
        agent: dict[str, Any] = {
            "loadSession": bool(self.cfg.sessions.enabled),
            "promptCapabilities": {"image": bool(self.cfg.acp.images), "audio": False,
                                   "embeddedContext": bool(self.cfg.acp.embeddedContext)},
            "mcpCapabilities": {"http": bool(self.cfg.mcp.enabled), "sse": False},
        }
        if self.cfg.acp.sessionHistory:
            agent["sessionCapabilities"] = {"list": {}, "resume": {}, "close": {}, "delete": {}}
        if self.cfg.acp.additionalDirectories:
            agent.setdefault("sessionCapabilities", {})["additionalDirectories"] = {}
        result = {
            "protocolVersion": p.PROTOCOL_VERSION,
            "agentCapabilities": agent,
            "agentInfo": {"name": "bob", "title": "Bob (bash-first agent)", "version": __version__},
            "authMethods": self.auth_methods,
        }
        if first:
            return Reply(result, after=lambda: warm(jsontext.use_orjson, engine, sessions, skills, tools, turns_module,
                                                    self._sandbox_probe))
        return result

    def _sandbox_probe(self) -> None:
        """What this machine gives a sandbox, asked once before the first session needs it."""
        if self.cfg.tools.sandbox != "off":
            from bob_acp import children, sandbox

            children.protect()
            sandbox.machine(bool(self.cfg.tools.sandboxNetwork))

    def authenticate(self, params: dict) -> dict:
        if not self.initialized:
            raise RpcError.invalid_request("initialize first")
        method_id = required_str(params, "methodId")
        if not self.cfg.acp.auth:
            return {}  # no methods advertised: an empty answer (the default profile)
        if method_id == auth.SETUP_METHOD:
            raise RpcError.invalid_params("methodId: bob-setup is a terminal sign-in: the client runs it, "
                                          "it is not passed to authenticate")
        if method_id != auth.MODEL_METHOD:
            raise RpcError.invalid_params(f"methodId: unknown authentication method {method_id[:100]!r}")
        if not self.authenticated:
            raise self._auth_required()
        return {}

    def _auth_required(self) -> RpcError:
        if self.config_problem:
            return RpcError(AUTH_REQUIRED, f"Authentication required: Bob could not use its configuration: "
                                           f"{self.config_problem}; fix it, or run `bob-acp setup` in a terminal")
        return RpcError(AUTH_REQUIRED, f"Authentication required: {auth.required_message(self.cfg)}")

    def require_ready(self) -> None:
        if not self.initialized:
            raise RpcError.invalid_request("initialize first")
        if not self.authenticated:
            raise self._auth_required()

    # ---- session/new ----------------------------------------------------------------------------

    def new_session(self, params: dict) -> Reply:
        self.require_ready()
        ws = workspace.of(cwd_param(params), more_roots(params, self.cfg.acp.additionalDirectories) or ())
        servers = mcp_servers(params)
        self.table.check_room()  # refuse before building anything (skills, system prompt)
        sid = sessions.new_id()
        session = self.opener.make(sid, ws, None, servers)
        try:
            self.table.admit(session)
        except BaseException:  # refused after all (the bound, a race): its servers end with it
            if session.mcp is not None:
                session.mcp.close()
            raise
        self.table.save(session)

        def after() -> None:  # (once the answer is written: its round trip does not wait for these)
            self.opener.send_commands(session)
            also = f" (and {len(ws.more)} more folder(s))" if ws.more else ""
            self.log.info("[acp] session {session}: new in {cwd}{more_roots}; {mcp_servers} MCP server(s) {mcp}",
                          session=sid, cwd=ws.cwd, more_roots=also, mcp_servers=len(servers),
                          mcp="started" if self.cfg.mcp.enabled else "ignored")
            if session.mcp is None:
                self.opener.prepare(ws)

        return Reply(self.opener.result(session, {"sessionId": sid}), after=after)
