"""A session's MCP servers: started together (in parallel, bounded by mcp.timeout), their
tools offered to the model through the same Tool interface as bash, ended with the session."""

from __future__ import annotations

import functools
import hashlib
import re
import threading
import time
from typing import TYPE_CHECKING, Any, Callable

from bob_acp import __version__, jsontext
from bob_acp.cancel import Cancel
from bob_acp.files.workspace import Workspace
from bob_acp.jsontext import mapping
from bob_acp.mcp.connection import Connection, McpError
from bob_acp.mcp.http import HttpConnection
from bob_acp.mcp.sse import SseConnection
from bob_acp.mcp.stdio import StdioConnection
from bob_acp.tools.base import Tool, ToolContext, ToolResult, ToolSet
from bob_acp.tools.builtin import BUILTIN_NAMES

if TYPE_CHECKING:
    from bob_acp.config import Config
    from bob_acp.log import Logger


PROTOCOL_VERSION = "2025-11-25"  # the newest revision with the initialize handshake
ACCEPTED_VERSIONS = ("2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05")
MAX_NAME = 64  # the longest tool name model APIs take
MAX_PAGES = 100  # tools/list pages followed before the list is taken as it is
MAX_TOOLS = 128  # tools offered to the model in all, built-in ones included: OpenAI's chat API takes no more


class McpServer:
    """One server: its connection, its tools as the server named them."""

    def __init__(self, name: str, connection: Connection, cfg: Config, log: Logger):
        self.name = name
        self.connection = connection
        self.timeout = float(cfg.mcp.timeout)
        self.log = log
        self.listed: list[dict[str, Any]] = []
        self.changed = threading.Event()  # the server said its tools changed
        connection.on_notification = self._notified

    def _notified(self, method: str, params: dict[str, Any]) -> None:
        if method == "notifications/tools/list_changed":
            self.changed.set()

    def start(self) -> None:
        result = self.connection.request("initialize", {
            "protocolVersion": PROTOCOL_VERSION, "capabilities": {},
            "clientInfo": {"name": "bob", "title": "Bob (bash-first agent)", "version": __version__}}, self.timeout)
        version = result.get("protocolVersion")
        if version not in ACCEPTED_VERSIONS:
            raise McpError(f"speaks MCP {str(version)[:40]!r}, not one of {', '.join(ACCEPTED_VERSIONS)}")
        self.connection.notify("notifications/initialized")
        self.list_tools()

    def list_tools(self, cancel: Cancel | None = None) -> None:
        """The server's tools, page after page, within mcp.timeout in all (a server that pages
        for ever is cut off there) and ended at once by `cancel`."""
        found: list[dict[str, Any]] = []
        cursor = None
        deadline = time.monotonic() + self.timeout
        for _ in range(MAX_PAGES):
            left = deadline - time.monotonic()
            if left <= 0:
                raise McpError(f"tools/list: not done within {self.timeout:g} s (mcp.timeout)")
            result = self.connection.request("tools/list", {"cursor": cursor} if cursor else {}, left, cancel)
            tools = result.get("tools")
            if not isinstance(tools, list):
                raise McpError("tools/list: no list of tools")
            found += [t for t in tools if isinstance(t, dict) and isinstance(t.get("name"), str) and t["name"]]
            cursor = result.get("nextCursor")
            if not isinstance(cursor, str) or not cursor:
                break
        self.changed.clear()
        self.listed = found

    def call(self, tool: str, arguments: dict[str, Any], cancel: Cancel) -> dict[str, Any]:
        return self.connection.request("tools/call", {"name": tool, "arguments": arguments}, self.timeout, cancel)


class McpTool(Tool):
    """A server's tool, as the model and the client see it."""

    def __init__(self, name: str, server: McpServer, spec: dict[str, Any]):
        self.name = name
        self.server = server
        self.tool = spec["name"]
        self.description = str(spec.get("description") or spec.get("title") or f"{spec['name']} (from {server.name})")
        schema = spec.get("inputSchema")
        self.parameters = schema if isinstance(schema, dict) and schema.get("type") == "object" else {
            "type": "object", "properties": {}}
        annotations = mapping(spec.get("annotations"))
        self.kind = "read" if annotations.get("readOnlyHint") is True else "execute"

    def title(self, args: dict[str, Any]) -> str:
        return f"{self.server.name}: {self.tool}"

    @property
    def grant_key(self) -> str:
        # The server's name and the tool's own: the display name can be rebuilt for another tool.
        return f"mcp:{self.server.name}\0{self.tool}"

    def grant(self, args: dict[str, Any], ws: Workspace) -> str:
        return f"{self.grant_key}: {jsontext.dumps(args, option=None).decode()}"

    def run(self, args: dict[str, Any], ctx: ToolContext, cancel: Cancel) -> ToolResult:
        if not self.server.connection.alive:
            return ToolResult(f"error: the MCP server '{self.server.name}' is gone; its tools are unavailable",
                              failed=True)
        try:
            result = self.server.call(self.tool, args, cancel)
        except McpError as exc:
            if not self.server.connection.alive:
                self.server.log.warning(f"[mcp] {self.server.name}: the server went away")
            return ToolResult(f"error: MCP server '{self.server.name}': {exc}", failed=True)
        return ToolResult(result_text(result), failed=result.get("isError") is True)


def result_text(result: dict[str, Any]) -> str:
    """A tools/call result as the model reads it: text joined; other content said in a line."""
    parts = []
    for item in result.get("content") or []:
        if not isinstance(item, dict):
            continue
        kind = item.get("type")
        if kind == "text" and isinstance(item.get("text"), str):
            parts.append(item["text"])
        elif kind in ("image", "audio"):
            size = jsontext.decoded_size(jsontext.text_or(item.get("data")))
            parts.append(f"[{kind}: {item.get('mimeType', 'unknown type')}, about {size} bytes, not shown]")
        elif kind == "resource_link":
            parts.append(f"[resource link: {item.get('uri', '?')}" + (f" ({item['name']})" if item.get("name") else "") + "]")
        elif kind == "resource" and isinstance(item.get("resource"), dict):
            resource = item["resource"]
            text = resource.get("text")
            parts.append(f"[resource: {resource.get('uri', '?')}]" + (f"\n{text}" if isinstance(text, str) else ""))
    if not parts and result.get("structuredContent") is not None:
        parts.append(jsontext.dumps(result["structuredContent"]).decode())
    return jsontext.clean("\n".join(parts)) or "(no output)"


def tool_name(server: str, tool: str, taken: set[str]) -> str:
    """mcp__<server>__<tool>: characters outside [A-Za-z0-9_-] replaced, at most 64, unique."""
    raw = f"mcp__{re.sub(r'[^A-Za-z0-9_-]', '_', server)}__{re.sub(r'[^A-Za-z0-9_-]', '_', tool)}"
    name = raw if len(raw) <= MAX_NAME else raw[:MAX_NAME - 9] + "_" + hashlib.sha1(raw.encode()).hexdigest()[:8]
    base, n = name, 2
    while name in taken:
        suffix = f"_{n}"
        name = base[:MAX_NAME - len(suffix)] + suffix
        n += 1
    taken.add(name)
    return name


class McpSet:
    """A session's servers. problems: one line per server that could not be used."""

    def __init__(self, servers: list[McpServer], problems: list[str], log: Logger):
        self.servers = servers
        self.problems = problems
        self.log = log
        self._tools: list[McpTool] = []
        self._lock = threading.Lock()
        self.generation = 0
        # A display name, once given to a (server, tool), is never given to another for the
        # whole session: what the model and the user saw under a name stays that tool.
        self._names: dict[tuple[str, str], str] = {}
        self._used: set[str] = set(BUILTIN_NAMES)
        self._left_out: set[str] = set()
        self.on_problem: Callable[[], None] = lambda: None  # a new problem to say now (a server gone)
        for server in servers:
            server.connection.on_gone = functools.partial(self._gone, server.name)
        self._rebuild()

    def _gone(self, name: str, why: str) -> None:
        """A server went away by itself (its stream ended, its process died): said at once."""
        line = f"MCP server '{name}' went away ({why}): its tools are no longer available in this session."
        self.log.warning(f"[mcp] {line}")
        self.problems.append(line)
        self.on_problem()

    def _name(self, server: str, tool: str) -> str:
        key = (server, tool)
        if key not in self._names:
            self._names[key] = tool_name(server, tool, self._used)
        return self._names[key]

    def _rebuild(self) -> None:
        tools: list[McpTool] = []
        room = MAX_TOOLS - len(BUILTIN_NAMES)
        left_out = []
        for server in self.servers:
            if server.connection.alive:
                for spec in server.listed:
                    if len(tools) < room:
                        tools.append(McpTool(self._name(server.name, spec["name"]), server, spec))
                    else:
                        left_out.append(f"{server.name}: {jsontext.clean(spec['name'])[:64]}")
        new = [name for name in left_out if name not in self._left_out]
        if new:
            self._left_out.update(new)
            shown = ", ".join(new[:10]) + (f" and {len(new) - 10} more" if len(new) > 10 else "")
            line = f"MCP tools past the limit of {MAX_TOOLS} tools in all were left out: {shown}."
            self.log.warning(f"[mcp] {line}")
            self.problems.append(line)
        self._tools = tools
        self.generation += 1

    def tools(self) -> list[McpTool]:
        return list(self._tools)

    def refresh(self, cancel: Cancel | None = None) -> bool:
        """Before a model call: list again the tools of servers that said theirs changed, and
        drop those of servers that went away. True when the set changed. A cancel ends it at
        once (Cancelled)."""
        with self._lock:
            changed = False
            for server in self.servers:
                if server.changed.is_set() and server.connection.alive:
                    try:
                        server.list_tools(cancel)
                    except McpError as exc:
                        self.log.warning(f"[mcp] {server.name}: tools/list failed: {exc}")
                    changed = True
            alive = {id(t.server) for t in self._tools if t.server.connection.alive}
            if changed or alive != {id(t.server) for t in self._tools}:
                self._rebuild()
                return True
            return False

    def close(self) -> None:
        threads = [threading.Thread(target=s.connection.close, name=f"bob-mcp-close-{s.name}", daemon=True)
                   for s in self.servers]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(5)


class SessionTools:
    """The built-in tools plus the session's MCP tools, as they are at each model call."""

    def __init__(self, builtin: ToolSet, mcp: McpSet):
        self._builtin = builtin
        self._mcp = mcp
        self._generation = -1
        self._current = builtin
        self.current()

    def current(self, cancel: Cancel | None = None) -> ToolSet:
        self._mcp.refresh(cancel)
        if self._generation != self._mcp.generation:
            self._current = self._builtin.plus(self._mcp.tools())
            self._generation = self._mcp.generation
        return self._current

    def names(self) -> list[str]:
        return self._current.names()

    def get(self, name: str) -> Tool | None:
        return self._current.get(name)

    def specs(self) -> list[dict[str, Any]]:
        return self._current.specs()


def start_servers(specs: list[Any], cwd: str, cfg: Config, env: dict[str, Any] | None, log: Logger, sid: str) -> McpSet:
    """Connect to every server the client gave, in parallel; those not ready within mcp.timeout
    are closed and reported. Never raises: a server that fails is a problem line, not an error."""
    import os

    base_env = dict(os.environ if env is None else env)
    results: list[tuple[McpServer | None, str | None]] = [(None, None)] * len(specs)
    servers_made: list[McpServer | None] = [None] * len(specs)

    def connect(index: int, spec: object) -> None:
        name = names[index]
        try:
            connection = _connection(spec, name, cwd, base_env, log, float(cfg.mcp.timeout))
            server = McpServer(name, connection, cfg, log)
            servers_made[index] = server
            server.start()
            results[index] = (server, None)
        except McpError as exc:
            results[index] = (None, f"MCP server '{name}': {exc}")
        except (OSError, ValueError) as exc:
            results[index] = (None, f"MCP server '{name}' could not start: {jsontext.clean(str(exc))[:200]}")

    threads = [threading.Thread(target=connect, args=(i, spec), name=f"bob-mcp-start-{i}", daemon=True)
               for i, spec in enumerate(specs)]
    names = _unique_names(specs)
    deadline = time.monotonic() + float(cfg.mcp.timeout)
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()))
    servers, problems = [], []
    for index, (server, problem) in enumerate(results):
        if server is not None and threads[index].is_alive() is False:
            servers.append(server)
            log.info(f"[mcp] session {sid}: {server.name}: {len(server.listed)} tool(s)")
            continue
        made = servers_made[index]
        if made is not None:
            made.connection.close()
        line = problem or f"MCP server '{names[index]}' did not answer within {cfg.mcp.timeout:g} s"
        log.warning(f"[mcp] session {sid}: {line}")
        problems.append(line + "; its tools are not available in this session.")
    return McpSet(servers, problems, log)


def _unique_names(specs: list[Any]) -> list[str]:
    """Each server's name, made unique in the session (a grant names its server)."""
    names: list[str] = []
    for index, spec in enumerate(specs):
        name, n = _name_of(spec, index), 2
        base = name
        while name in names:
            name, n = f"{base}#{n}", n + 1
        names.append(name)
    return names


def _name_of(spec: object, index: int) -> str:
    name = spec.get("name") if isinstance(spec, dict) else None
    return jsontext.clean(name)[:64] if isinstance(name, str) and name else f"server{index + 1}"


def _connection(spec: object, name: str, cwd: str, env: dict[str, Any], log: Logger, timeout: float) -> Connection:
    if not isinstance(spec, dict):
        raise McpError("is not an object")
    kind = spec.get("type", "stdio")
    if kind in ("http", "sse"):
        url = spec.get("url")
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            raise McpError("needs an http(s) url")
        if kind == "sse":  # (its handshake, the endpoint event, within mcp.timeout)
            return SseConnection(name, url, _pairs(spec.get("headers")), log, timeout)
        return HttpConnection(name, url, _pairs(spec.get("headers")), log, timeout)
    command = spec.get("command")
    if not isinstance(command, str) or not command:
        raise McpError("needs a command")
    args = spec.get("args") or []
    if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
        raise McpError("args must be a list of strings")
    return StdioConnection(name, command, args, {**env, **_pairs(spec.get("env"))}, cwd, log)


def _pairs(items: object) -> dict[str, str]:
    """ACP's [{name, value}] lists (env, headers) as a mapping; malformed entries are skipped."""
    found: dict[str, str] = {}
    for item in items if isinstance(items, list) else []:
        if isinstance(item, dict) and isinstance(item.get("name"), str) and isinstance(item.get("value"), str):
            found[item["name"]] = item["value"]
    return found
