"""Opening a session: its skills, tools, MCP servers, conversation and way to the editor; what
session/new, load and resume answer with it; the slash menu and MCP problems sent after."""

from __future__ import annotations

from bob_acp import fswatch
from bob_acp.acp import protocol as p
from bob_acp.acp.session import Session
from bob_acp.lazy import LazyModule

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Callable

    from bob_acp.acp.channel import ClientChannel
    from bob_acp.acp.client import EditorClient
    from bob_acp.acp.selectors import Handlers as Selectors
    from bob_acp.config import Config
    from bob_acp.engine import Engine
    from bob_acp.log import Logger
    from bob_acp.skills import Catalog
    from bob_acp.tools.base import ToolSet
    from bob_acp.workspace import Workspace

skills = LazyModule("bob_acp.skills", globals(), "skills")
system_prompt = LazyModule("bob_acp.system_prompt", globals(), "system_prompt")
tools = LazyModule("bob_acp.tools", globals(), "tools")
mcp = LazyModule("bob_acp.mcp", globals(), "mcp")
selectors_module = LazyModule("bob_acp.acp.selectors", globals(), "selectors_module")


class Opener:
    def __init__(self, cfg: Config, log: Logger, channel: ClientChannel, engine: Callable[[], Engine],
                 selectors: Callable[[], Selectors], env: dict | None, hidden_env: tuple[str, ...]):
        self.cfg = cfg
        self.log = log
        self.channel = channel
        self.engine = engine  # made on first use (its imports are not paid for at start-up)
        self.selectors = selectors
        self.env = env  # what MCP servers start with (secrets dropped)
        self.hidden_env = hidden_env  # variables an editor's terminal must not pass on (the model's key)
        self._openings: fswatch.Kept[Workspace, tuple[Catalog, ToolSet, str]] = fswatch.Kept(256)  # at (generation, day)
        self._spares: dict[Workspace, tuple] = {}  # ws -> (prompt, tools, a conversation made ahead: prepare())

    def make(self, sid: str, ws: Workspace, stored: list[dict] | None, servers: list | None = None) -> Session:
        engine = self.engine()
        if engine.models.lists:
            engine.models.refresh()  # (choices: auto) the servers' models, for the selector
        started = None
        if self.cfg.mcp.enabled and servers:
            catalog = skills.discover(ws.cwd, self.cfg, self.env, ws.more)
            started = mcp.start_servers(servers, ws.cwd, self.cfg, self.env, self.log, sid)
            toolset: ToolSet = mcp.SessionTools(tools.for_config(self.cfg), started)
            prompt = system_prompt.build(ws, catalog, tools=toolset.names())
        else:
            catalog, toolset, prompt = self.opening(ws)
        for warning in catalog.warnings:
            self.log.warning(f"[acp] session {sid}: {warning}")
        spare = self._spares.pop(ws, None) if stored is None and started is None else None
        if spare is not None and spare[0] is prompt and spare[1] is toolset:
            conv = spare[2]  # made ahead, from what is still the workspace's opening
        else:
            conv = engine.new_conversation(ws, catalog, stored, toolset, prompt)
        conv.client = self.client_port(sid)
        session = Session(sid, conv, catalog)
        session.mcp = started
        return session

    def prepare(self, ws: Workspace) -> None:
        """Once a session/new is answered: the conversation of the next one in this workspace,
        made ahead while the client reads (an editor that opened one session often opens
        another: a new thread, a subagent). Taken only while the opening it was made from is
        still the workspace's (the same prompt and tools); never shared."""
        kept = self._openings.last(ws)  # (made by the session/new just answered; stale: never taken)
        if kept is None or ws in self._spares:
            return
        catalog, toolset, prompt = kept
        if len(self._spares) >= 64:
            self._spares.clear()
        self._spares[ws] = (prompt, toolset, self.engine().new_conversation(ws, catalog, None, toolset, prompt))

    def opening(self, ws: Workspace) -> tuple[Catalog, ToolSet, str]:
        """A workspace's skills, tools and system prompt (without MCP servers), kept while its
        folders are unchanged (fswatch) on the same day: the next session/new in the same
        folder takes them as they are."""
        generation = fswatch.generation()
        stamp = None if generation is None else (generation, system_prompt.today())
        kept = self._openings.get(ws, stamp)
        if kept is not None:
            return kept
        catalog = skills.discover(ws.cwd, self.cfg, self.env, ws.more)
        toolset: ToolSet = tools.for_config(self.cfg)
        prompt = system_prompt.build(ws, catalog, tools=toolset.names())
        if stamp is not None:
            self._openings.keep(ws, stamp, (catalog, toolset, prompt))
        return catalog, toolset, prompt

    def client_port(self, sid: str) -> EditorClient | None:
        """The editor's files and terminals for one session, as far as the configuration and the
        client's capabilities allow (None: neither)."""
        offered = self.channel.capabilities
        read = self.cfg.tools.clientFs and offered.read_files
        write = self.cfg.tools.clientFs and offered.write_files
        run = self.cfg.tools.clientTerminal and offered.terminals
        if not (read or write or run):
            return None
        from bob_acp.acp.client import EditorClient

        return EditorClient(self.channel.ask, self.log, sid, read, write, run, self.hidden_env)

    def result(self, session: Session, result: dict) -> dict:
        """A session/new, load or resume result, with the selectors when they are on. A session
        that asks less than `ask` always says so (its mode), so the client can show it."""
        if self.cfg.acp.configOptions:
            result.update(self.selectors().state(session))
        elif session.conv.mode != "ask":
            result["modes"] = selectors_module.modes_state(session.conv.mode, self.selectors().modes(session))
        return result

    def send_commands(self, session: Session) -> None:
        self.channel.update(session.id, p.commands_update(skills.available_commands(session.catalog)))
        self.report_mcp(session)
        notices, session.conv.notices = session.conv.notices, []
        for line in notices:  # (what the session cannot have here, and why)
            self.channel.tell(session.id, line)

    def report_mcp(self, session: Session) -> None:
        """Once, a line to the user for each of the session's MCP servers that could not be used."""
        if session.mcp is None:
            return
        problems, session.mcp.problems = session.mcp.problems, []
        for line in problems:
            self.channel.update(session.id, p.agent_chunk(f"⚠️ {line}\n"))
