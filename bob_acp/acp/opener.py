"""Opening a session: its skills, tools, MCP servers, conversation and way to the editor; what
session/new, load and resume answer with it; the slash menu and MCP problems sent after."""

from __future__ import annotations

from bob_acp.acp import protocol as p
from bob_acp.acp.lazy import LazyModule
from bob_acp.acp.session import Session
from bob_acp.acp.updates import say_news

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable

    from bob_acp.acp.channel import ClientChannel
    from bob_acp.acp.client import EditorClient
    from bob_acp.acp.runtime import Runtime
    from bob_acp.acp.selectors import Handlers as Selectors
    from bob_acp.config import Config
    from bob_acp.engine import Refs
    from bob_acp.engine.conversation import Conversation
    from bob_acp.files.workspace import Workspace
    from bob_acp.log import Logger
    from bob_acp.tools.base import ToolSet

skills = LazyModule("bob_acp.context.skills", globals(), "skills")
system_prompt = LazyModule("bob_acp.context.system_prompt", globals(), "system_prompt")
tools = LazyModule("bob_acp.tools.builtin", globals(), "tools")
mcp = LazyModule("bob_acp.mcp", globals(), "mcp")
selectors_module = LazyModule("bob_acp.acp.selectors", globals(), "selectors_module")


class Opener:
    def __init__(self, cfg: Config, log: Logger, channel: ClientChannel, selectors: Callable[[], Selectors],
                 refs: Callable[[], Refs]):
        self.cfg = cfg  # the connection's (mcp.enabled, acp.configOptions)
        self.log = log
        self.channel = channel
        self.selectors = selectors
        self.refs = refs  # the connection's tool-call numbering (made on first use: an engine import)

    def make(self, sid: str, ws: Workspace, stored: list[dict[str, Any]] | None, servers: list[Any] | None,
             runtime: Runtime, records: list[Any] | None = None) -> Session:
        """A session with the configuration `runtime` (its skills, tools, system prompt, as the
        folders are now), its conversation, its checkpoints (`records`: those of its file) and its
        way to the editor."""
        cfg = runtime.cfg
        engine = runtime.engine(self.log, self.refs())
        if engine.models.lists:
            engine.models.refresh()  # (choices: auto) the servers' models, for the selector
        catalog = skills.discover(ws.cwd, cfg, runtime.child_env, ws.more)
        started = None
        toolset: ToolSet = tools.for_config(cfg)
        if self.cfg.mcp.enabled and servers:
            started = mcp.start_servers(servers, ws.cwd, cfg, runtime.child_env, self.log, sid)
            toolset = mcp.SessionTools(toolset, started)
        prompt = system_prompt.build(ws, catalog, tools=toolset.names())
        for warning in catalog.warnings:
            self.log.warning(f"[acp] session {sid}: {warning}")
        conv = engine.new_conversation(ws, catalog, stored, toolset, prompt)
        for path in system_prompt.doubted_agents(ws):
            conv.notices.append(f"{path} was not read: a sandboxed command or a job it left running may have written "
                                "it since you last saved it. Look at it; if it says what you want, save it again and "
                                "start a new session.")
            self.log.warning(f"[acp] session {sid}: {path} not read (doubted: a sandboxed command may have written it)")
        conv.client = self.client_port(sid, runtime)
        if cfg.tools.checkpoints:
            self._checkpoints(sid, conv, cfg, records)
        session = Session(sid, conv, catalog, runtime, engine)
        session.mcp = started
        if started is not None:
            started.on_problem = lambda: self.report_mcp(session)
        if conv.sandbox is not None:
            conv.sandbox.on_planted = lambda said: self.planted(session, said)
        return session

    def planted(self, session: Session, said: list[str]) -> None:
        """What a job a sandboxed command left running planted between turns, taken out: the
        user hears it now (a notice), or at the start of the next turn."""
        from bob_acp.sandbox import PLANTED_TITLE

        session.news.add((PLANTED_TITLE, ", ".join(said), "warning"))
        say_news(self.channel, session)

    def _checkpoints(self, sid: str, conv: Conversation, cfg: Config, records: list[Any] | None) -> None:
        from bob_acp import checkpoints

        if checkpoints.git_missing():
            conv.notices.append("Checkpoints (tools.checkpoints) need git, which is not installed here: this session "
                                "offers no /undo or /redo.")
            return
        conv.checkpoints = checkpoints.Checkpoints(conv.workspace, sid, cfg.tools.checkpointTurns,
                                                   cfg.tools.checkpointMaxBytes, self.log,
                                                   store_limit=cfg.tools.checkpointStoreLimit,
                                                   own=(cfg.log.file,) if cfg.log.file else ())
        conv.checkpoints.prewarm()
        if records and conv.checkpoints.load(records):
            conv.notices.append("Some checkpoints in this session's file were not made by you, were edited, or come "
                                "from an older Bob: /undo leaves them out.")
        conv.notices += conv.checkpoints.others_unfinished()
        interrupted = conv.checkpoints.interrupted()
        if interrupted:
            conv.notices.append(interrupted)

    def client_port(self, sid: str, runtime: Runtime) -> EditorClient | None:
        """The editor's files and terminals for one session, as far as its configuration and the
        client's capabilities allow (None: neither)."""
        cfg = runtime.cfg
        offered = self.channel.capabilities
        read = cfg.tools.clientFs and offered.read_files
        write = cfg.tools.clientFs and offered.write_files
        run = cfg.tools.clientTerminal and offered.terminals
        if not (read or write or run):
            return None
        from bob_acp.acp.client import EditorClient

        return EditorClient(self.channel.ask, self.log, sid, read, write, run, runtime.hidden,
                            float(self.cfg.acp.clientTimeout))

    def result(self, session: Session, result: dict[str, Any]) -> dict[str, Any]:
        """A session/new, load or resume result, with the selectors when they are on. A session
        that asks less than `ask` always says so (its mode), so the client can show it."""
        if self.cfg.acp.configOptions:
            result.update(self.selectors().state(session))
        elif session.conv.mode != "ask":
            result["modes"] = selectors_module.modes_state(session.conv.mode, self.selectors().modes(session))
        return result

    def send_commands(self, session: Session) -> None:
        """What follows a session/new, load or resume answer: the slash menu, then what the user
        must know of the session (MCP servers that failed, modes it cannot have, a failed save)."""
        self.channel.update(session.id, p.commands_update(
            skills.available_commands(session.catalog, undo=session.conv.checkpoints is not None,
                                      rules=session.engine.gate.store is not None)))
        session.news.announce()
        self.report_mcp(session)
        lines, session.conv.notices = session.conv.notices, []
        for line in lines:  # (what the session cannot have here, and why)
            self.channel.notice(session.id, line)
        say_news(self.channel, session)

    def report_mcp(self, session: Session) -> None:
        """Once, a line to the user for each of the session's MCP servers that could not be used."""
        if session.mcp is None:
            return
        problems, session.mcp.problems = session.mcp.problems, []
        for line in problems:
            self.channel.notice(session.id, line)
