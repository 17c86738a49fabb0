"""The agent side of ACP: the method table, initialize/authenticate, session/new and the session
table; turns and commands are in turns.py, saved sessions in saved.py, selectors in selectors.py.
Handlers marked worker=True run on worker threads; the others on the dispatcher, which must never
block on anything without a bound."""

from __future__ import annotations

import collections
import sys
import threading

from bob_acp import __version__, workspace
from bob_acp.acp import auth
from bob_acp.acp import protocol as p
from bob_acp.acp.params import cwd_param, mcp_servers, more_roots, required_str, unknown_session
from bob_acp.acp.session import Session
from bob_acp.jsonrpc import codec
from bob_acp.jsonrpc.endpoint import Endpoint, Reply, Route
from bob_acp.jsonrpc.errors import AUTH_REQUIRED, RpcError
from bob_acp.lazy import LazyModule, warm

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only: typing is not imported at start-up
    from typing import Any, Callable

    from bob_acp.workspace import Workspace

# Not needed to answer `initialize`: loaded on first use, or warmed once initialize is answered.
engine = LazyModule("bob_acp.engine", globals(), "engine")
sessions = LazyModule("bob_acp.sessions", globals(), "sessions")
skills = LazyModule("bob_acp.skills", globals(), "skills")
tools = LazyModule("bob_acp.tools", globals(), "tools")
turns_module = LazyModule("bob_acp.acp.turns", globals(), "turns_module")
saved_module = LazyModule("bob_acp.acp.saved", globals(), "saved_module")
selectors_module = LazyModule("bob_acp.acp.selectors", globals(), "selectors_module")
mcp_module = LazyModule("bob_acp.mcp", globals(), "mcp_module")
children_module = LazyModule("bob_acp.children", globals(), "children_module")

DEFAULT_MAX_SESSIONS = 1024


class AgentServer:
    def __init__(self, cfg: Any, log: Any, provider: Any, no_model_message: str, env: dict | None = None,
                 redact: Callable[[Any], Any] | None = None, config_problem: str | None = None,
                 hidden_env: tuple[str, ...] = ()):
        self.cfg = cfg
        self.log = log
        self.provider = provider
        self.no_model_message = no_model_message
        self.env = env  # what tools and MCP servers start with (secrets dropped)
        self.redact = redact  # applied to a conversation before it is written to disk
        self.auth_methods: list[dict] = []  # advertised at initialize (acp.auth)
        self.config_problem = config_problem  # the config error Bob serves with the defaults, if any
        self.endpoint: Endpoint | None = None
        self.sessions: collections.OrderedDict[str, Session] = collections.OrderedDict()
        self.draining: dict[str, Session] = {}  # dropped sessions whose turn has not returned yet
        self.sessions_lock = threading.Lock()
        self.closing = threading.Event()
        self.initialized = False
        # With acp.auth, "authenticated" means a usable model is configured: nothing else to sign in to.
        self.authenticated = not cfg.acp.auth or provider is not None
        self.terminal_output = False  # the client renders bash output as a terminal (Zed's _meta)
        self.client_fs = (False, False)  # the client reads / writes text files for Bob (fs capabilities)
        self.client_terminal = False  # the client runs commands for Bob (terminal capability)
        self.hidden_env = hidden_env  # variables an editor's terminal must not pass on (the model's key)
        self._engine: Any = None
        self._parts: dict[str, Any] = {}

    @property
    def engine(self) -> Any:
        if self._engine is None:
            self._engine = engine.Engine(self.cfg, self.provider, self.no_model_message, self.log,
                                         engine.Refs(), self.env, self.redact)
        return self._engine

    def part(self, name: str) -> Any:
        """The handlers of one room (turns, saved, selectors), made on first use."""
        if name not in self._parts:
            module = {"turns": turns_module, "saved": saved_module, "selectors": selectors_module}[name]
            self._parts[name] = module.Handlers(self)
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
        with self.sessions_lock:
            held = list(self.sessions.values()) + list(self.draining.values())
        for session in held:
            session.cancel_all()
        if "bob_acp.tools" in sys.modules:  # no tool ran if they were never loaded
            tools.kill_all()
        for session in held:
            if session.conv.sandbox is not None:
                session.conv.sandbox.remove_cache()
        if "bob_acp.mcp" in sys.modules:  # every server, those of sessions still opening too
            mcp_module.close_all()

    def _unsupported(self, method: str):
        def handler(_params: dict) -> None:
            if method.startswith("session/"):
                self.require_ready()
            raise RpcError.method_not_found(method)
        return handler

    def ask_client(self, method: str, params: dict, cancel: Any) -> Any:
        """One request to the client (a permission question, a file): its Outcome. A cancel of
        the turn ends the wait at once, and a request given up so is withdrawn (with
        acp.cancelRequest), so the editor can close what it shows for it."""
        pending = self.endpoint.request(method, params, cancel.is_set)
        unsubscribe = cancel.subscribe(pending.abandon)
        try:
            outcome = pending.wait()
        finally:
            unsubscribe()
        if outcome.closed and cancel.is_set():
            self.endpoint.cancel_request(pending)
        return outcome

    def update(self, sid: str, update: dict, give_up: Callable[[], bool] | None = None) -> None:
        self.endpoint.notify(p.SESSION_UPDATE, {"sessionId": sid, "update": update}, give_up)

    # ---- initialize / authenticate ---------------------------------------------------------

    def initialize(self, params: dict) -> Any:
        version = params.get("protocolVersion")
        if isinstance(version, bool) or not isinstance(version, int):
            raise RpcError.invalid_params("protocolVersion: must be an integer")
        info = params.get("clientInfo") if isinstance(params.get("clientInfo"), dict) else {}
        name, client_version = str(info.get("name", "unknown"))[:100], str(info.get("version", ""))[:100]
        client = " ".join(part for part in (name, client_version) if part)
        self.log.info(f"[acp] initialize: client {client}, protocol {version}")
        capabilities = params.get("clientCapabilities") if isinstance(params.get("clientCapabilities"), dict) else {}
        meta = capabilities.get("_meta") if isinstance(capabilities.get("_meta"), dict) else {}
        self.terminal_output = meta.get("terminal_output") is True
        fs = capabilities.get("fs") if isinstance(capabilities.get("fs"), dict) else {}
        self.client_fs = (fs.get("readTextFile") is True, fs.get("writeTextFile") is True)
        self.client_terminal = capabilities.get("terminal") is True
        if self.cfg.acp.auth:
            self.auth_methods = auth.methods(auth.terminal_auth_wanted(capabilities))
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
            return Reply(result, after=lambda: warm(codec.use_orjson, engine, sessions, skills, tools, turns_module))
        return result

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

    # ---- sessions ---------------------------------------------------------------------------

    def new_session(self, params: dict) -> Reply:
        self.require_ready()
        ws = workspace.of(cwd_param(params), more_roots(params, self.cfg.acp.additionalDirectories) or ())
        servers = mcp_servers(params)
        self.check_room()  # refuse before building anything (skills, system prompt)
        sid = sessions.new_id()
        session = self.make_session(sid, ws, None, servers)
        try:
            self.admit(session)
        except BaseException:  # refused after all (the bound, a race): its servers end with it
            if session.mcp is not None:
                session.mcp.close()
            raise
        also = f" (and {len(ws.more)} more folder(s))" if ws.more else ""
        self.log.info(f"[acp] session {sid}: new in {ws.cwd}{also}; {len(servers)} MCP server(s) "
                      f"{'started' if self.cfg.mcp.enabled else 'ignored'}")
        self.save(session)
        return Reply(self.session_result(session, {"sessionId": sid}), after=lambda: self.send_commands(session))

    def send_commands(self, session: Session) -> None:
        self.update(session.id, p.commands_update(skills.available_commands(session.catalog)))
        self.report_mcp(session)

    def report_mcp(self, session: Session) -> None:
        """Once, a line to the user for each of the session's MCP servers that could not be used."""
        if session.mcp is None:
            return
        problems, session.mcp.problems = session.mcp.problems, []
        for line in problems:
            self.update(session.id, p.agent_chunk(f"⚠️ {line}\n"))

    def make_session(self, sid: str, ws: Workspace, stored: list[dict] | None, servers: list | None = None) -> Session:
        cwd = ws.cwd
        if self.engine.models.lists:
            self.engine.models.refresh()  # (choices: auto) the servers' models, for the selector
        catalog = skills.discover(cwd, self.cfg, more=ws.more)
        for warning in catalog.warnings:
            self.log.warning(f"[acp] session {sid}: {warning}")
        mcp = None
        toolset: Any = tools.for_config(self.cfg)
        if self.cfg.mcp.enabled and servers:
            mcp = mcp_module.start_servers(servers, cwd, self.cfg, self.env, self.log, sid)
            toolset = mcp_module.SessionTools(tools.for_config(self.cfg), mcp)
        conv = self.engine.new_conversation(ws, catalog, stored, toolset)
        conv.client = self.client_port(sid)
        session = Session(sid, conv, catalog)
        session.mcp = mcp
        return session

    def client_port(self, sid: str) -> Any:
        """The editor's files and terminals for one session, as far as the configuration and the
        client's capabilities allow (None: neither)."""
        files = self.client_fs if self.cfg.tools.clientFs else (False, False)
        run = self.cfg.tools.clientTerminal and self.client_terminal
        if not (any(files) or run):
            return None
        from bob_acp.acp.client import EditorClient

        return EditorClient(self.ask_client, self.log, sid, files[0], files[1], run, self.hidden_env)

    def session_result(self, session: Session, result: dict) -> dict:
        """A session/new, load or resume result, with the selectors when they are on. A session
        that asks less than `ask` always says so (its mode), so the client can show it."""
        if self.cfg.acp.configOptions:
            result.update(self.part("selectors").state(session))
        elif session.conv.mode != "ask":
            result["modes"] = selectors_module.modes_state(session.conv.mode, self.part("selectors").modes())
        return result

    def tell(self, session: Session, line: str) -> None:
        """One message to the user in the session, outside any turn."""
        self.update(session.id, p.agent_chunk(line + "\n", engine.new_message_id()))

    def _limit(self) -> int:
        return self.cfg.limits.maxSessions or DEFAULT_MAX_SESSIONS  # 0: the default; negative: no bound

    def check_room(self) -> None:
        limit = self._limit()
        if self.cfg.limits.sessionOverflow != "evict_oldest" and 0 < limit <= len(self.sessions):
            raise RpcError.invalid_params(f"too many sessions: this connection holds {limit} (limits.maxSessions)")

    def admit(self, session: Session, replacing: Session | None = None) -> None:
        """Seat a session within the bound (refuse, or evict the oldest)."""
        limit = self._limit()
        with self.sessions_lock:
            held = self.sessions.get(session.id)
            if (held is not None and held is not replacing) or session.id in self.draining:
                raise RpcError.internal_error(f"session id {session.id} is already held by this connection")
            self.sessions.pop(session.id, None)
            while limit > 0 and len(self.sessions) >= limit:
                if self.cfg.limits.sessionOverflow != "evict_oldest":
                    raise RpcError.invalid_params(f"too many sessions: this connection holds {limit} (limits.maxSessions)")
                _, oldest = self.sessions.popitem(last=False)
                self._drop(oldest)
                self.log.info(f"[acp] session {oldest.id}: evicted (limits.maxSessions {limit})")
            self.sessions[session.id] = session

    def drop(self, session: Session) -> None:
        """Forget a session (close): its turn is cancelled, its MCP servers stopped."""
        with self.sessions_lock:
            if self.sessions.get(session.id) is session:
                del self.sessions[session.id]
            self._drop(session)

    def _drop(self, session: Session) -> None:
        """Called with sessions_lock held."""
        if session.turns:
            self.draining[session.id] = session
        session.cancel_all()
        if session.conv.sandbox is not None:
            session.conv.sandbox.remove_cache()
        if session.conv.owner and "bob_acp.children" in sys.modules:
            # What its commands left running on purpose (bg-jobs, setsid) ends with the session.
            threading.Thread(target=children_module.end_orphans, args=(session.conv.owner,),
                             name="bob-session-orphans", daemon=True).start()
        if session.mcp is not None:
            threading.Thread(target=session.mcp.close, name="bob-mcp-close", daemon=True).start()

    def session(self, params: dict) -> Session:
        sid = required_str(params, "sessionId")
        session = self.sessions.get(sid)
        if session is None:
            raise unknown_session(sid)
        return session

    def store(self, cwd: str) -> Any:
        return sessions.SessionStore(cwd, self.cfg.sessions.dir, self.redact, self.log)

    def save(self, session: Session, sid: str | None = None, messages: list[dict] | None = None) -> None:
        if not self.cfg.sessions.enabled:
            return
        conv = session.conv
        choices = {"model": conv.model, "mode": conv.mode, "reasoning": conv.reasoning} if self.cfg.acp.configOptions else {}
        # A copy: a save from the dispatcher (a mode change) can come while the turn appends.
        messages = list(conv.messages if messages is None else messages)
        title = sessions.title_of(messages)
        try:
            written = self.store(session.cwd).save(sid or session.file_id, messages, title,
                                                   {k: v for k, v in choices.items() if v}, session.workspace.more)
        except Exception as exc:  # the session goes on; the user learns why it is not kept
            self.log.warning(f"[acp] session {session.id}: not saved: {exc}")
            return
        if sid is None and written != session.file_id:
            session.file_id = written
            self.tell(session, f"⚠️ This conversation's file was changed by another Bob (the same session open "
                               f"twice?). That file is kept as it is, and this conversation continues under the new "
                               f"id {written} (titled “{sessions.fork_title(title)}”).")
