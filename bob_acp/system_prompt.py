"""The system prompt of a session: Bob's instructions, the environment, the tools beyond the
built-in ones, the skills, and the project's AGENTS.md files.

AGENTS.md is project content, hence untrusted: each one is read only when it is a regular file
whose real path (links resolved) lies inside the project (the git root, else the cwd), without
ever blocking on it (a FIFO named AGENTS.md), within its cap, and cached by its change time,
since this runs on the dispatcher at every session/new.
"""

from __future__ import annotations

import datetime
import os
import platform
import threading
import time

from bob_acp import fswatch, skills, tools
from bob_acp.jsontext import clean
from bob_acp.workspace import Workspace

MAX_AGENTS_MD = 64 * 1024
MAX_LEVELS = 64  # folders searched upwards for the git root

INSTRUCTIONS = """\
You are Bob, a bash-first coding agent working in the user's project through tools.

How you work:
- Prefer the bash tool: inspect with ls, find, grep, git, run the tests, build, try things.
- Read a file (read_file, or bash) before you edit it; change it with edit_file for small, exact
  replacements, write_file for new files or complete rewrites.
- Take small steps and check each one (run the code or the tests) before the next.
- The user approves each tool call; a rejected call means: stop and ask, or take another way.
- Commands run non-interactively with no input (stdin is /dev/null) and a time limit; start
  long-running processes (servers, watchers) as background jobs, never in the foreground.
- Be brief in your answers: say what you did and what you found, not what you are about to do."""

BUILTIN_TOOLS = tools.BUILTIN.names()
PLAN_TOOL = tools.PLAN.name  # (with tools.plan)
_platform = f"{platform.system()} {platform.release()}"
_cache: dict[str, tuple[tuple, str]] = {}
_cache_lock = threading.Lock()


_built: dict[tuple, tuple] = {}
_EPOCH_DAY = datetime.date(1970, 1, 1).toordinal()


def build(ws: Workspace, catalog: "skills.Catalog", now: datetime.datetime | None = None,
          tools: list[str] | tuple[str, ...] = BUILTIN_TOOLS) -> str:
    """The prompt; the same inputs (the same catalogue object, unchanged AGENTS.md files, the
    same day) give the same string without building it again (session/new is on the dispatcher)."""
    day = now.toordinal() if now else today()
    agents = agents_files(ws.cwd)
    for root in ws.more:
        agents += [found for found in agents_files(root) if found not in agents]
    key = (ws, id(catalog), day, tuple(tools), tuple(agents))
    cached = _built.get(key)
    if cached is not None and cached[0] is catalog:
        return cached[1]
    text = _build(ws, catalog, now or datetime.datetime.now(datetime.timezone.utc), tools, agents)
    if len(_built) > 256:
        _built.clear()
    _built[key] = (catalog, text)  # the catalogue is kept alive with its entry: its id stays its own
    return text


def today() -> int:
    """The UTC day's ordinal (the prompt says the date), without datetime.now's cost."""
    return _EPOCH_DAY + int(time.time() // 86400)


def _build(ws: Workspace, catalog: "skills.Catalog", now: datetime.datetime, tools: list[str] | tuple[str, ...],
           agents: list[tuple[str, str]]) -> str:
    parts = [INSTRUCTIONS, _environment(ws, now)]
    more = [name for name in tools if name not in BUILTIN_TOOLS and name != PLAN_TOOL]
    if PLAN_TOOL in tools:
        parts.append("For work of several steps, set a plan with update_plan first (the user sees it as a "
                     "checklist), and keep it current as you go: mark each step in_progress when you start it and "
                     "completed when it is done. A one-step request needs no plan.")
    if more:
        parts.append("More tools, from the editor's MCP servers (each asks the user first): " + ", ".join(more))
    catalogue = skills.catalogue_text(catalog)
    if catalogue:
        parts.append(catalogue)
    for path, text in agents:
        parts.append(f"Project instructions ({clean(path)}):\n\n{text}")
    return "\n\n".join(parts)


def _environment(ws: Workspace, now: datetime.datetime) -> str:
    shell = clean(os.environ.get("SHELL", "/bin/sh"))
    more = "".join(f"- also part of this workspace (absolute paths; the same rules as the working directory): "
                   f"{clean(root)}\n" for root in ws.more)
    return (
        "Environment:\n"
        f"- working directory: {clean(ws.cwd)}\n{more}"
        f"- operating system: {_platform}\n"
        f"- shell for the bash tool: bash (the user's login shell is {shell})\n"
        f"- date: {now.strftime('%Y-%m-%d')} (UTC)"
    )


_levels: dict[str, tuple[int, bool, bool]] = {}


def _level(folder: str) -> tuple[bool, bool]:
    """(has .git, has AGENTS.md) for one folder: one stat of the folder, whose change time moves
    when either appears or goes, and a look inside only then."""
    try:
        mtime = os.stat(folder).st_mtime_ns
    except OSError:
        return False, False
    cached = _levels.get(folder)
    if cached is None or cached[0] != mtime:
        cached = (mtime, os.path.lexists(os.path.join(folder, ".git")),
                  os.path.lexists(os.path.join(folder, "AGENTS.md")))
        if len(_levels) > 4096:
            _levels.clear()
        _levels[folder] = cached
    return cached[1], cached[2]


AGENT_NAMES = (".git", "AGENTS.md")  # what a folder of the walk is looked at for
_found: fswatch.Kept[str, list[tuple[str, str]]] = fswatch.Kept(1024)  # cwd -> agents_files


def agents_files(cwd: str) -> list[tuple[str, str]]:
    """(path, text) of each AGENTS.md from the project root down to cwd, the nearest last.
    Looked at again only when a folder of the walk changed (fswatch), else with stats."""
    generation = fswatch.generation()
    if generation is None:
        return _agents_files(cwd, False)[0]
    cached = _found.get(cwd, generation)
    if cached is not None:
        return cached
    found, watched = _agents_files(cwd, True)
    if watched:
        _found.keep(cwd, generation, found)
    return found


def _agents_files(cwd: str, watch: bool) -> tuple[list[tuple[str, str]], bool]:
    """(the files, whether every folder they depend on is watched). `watch`: each folder and
    file is watched before it is read, so a change after the read is an event."""
    root, holding, watched = _walk(cwd, watch)
    found = []
    real_root = None
    for folder in reversed(holding):
        path = os.path.join(folder, "AGENTS.md")
        if watch:
            watched = fswatch.watch_path(path) and watched  # (and where a link leads)
        real_root = real_root or os.path.realpath(root)
        text = _agents_md(path, real_root)
        if text:
            found.append((path, text))
    return found, watch and watched


def _walk(cwd: str, watch: bool = False) -> tuple[str, list[str], bool]:
    """(the project root, the folders from cwd up to it that hold an AGENTS.md, whether each
    folder looked at was watched first)."""
    folder, holding, watched = cwd, [], watch
    dirname, level = os.path.dirname, _level
    for _ in range(MAX_LEVELS):
        if watch:  # (the folders above cwd were watched with it, for the name leading down)
            ok = fswatch.watch_path(cwd, AGENT_NAMES) if folder == cwd else fswatch.watch(folder, AGENT_NAMES)
            watched = ok and watched
        has_git, has_agents = level(folder)
        if has_agents:
            holding.append(folder)
        if has_git:
            return folder, holding, watched
        parent = dirname(folder)
        if parent == folder:
            break
        folder = parent
    return cwd, [f for f in holding if f == cwd], watched


def _agents_md(path: str, real_root: str) -> str:
    import stat

    try:
        real = os.path.realpath(path)
        info = os.stat(real)
    except OSError:
        return ""
    if not stat.S_ISREG(info.st_mode) or os.path.commonpath([real, real_root]) != real_root:
        return ""  # a device, a FIFO, /proc/self/environ, or a file outside the project
    signature = (real, info.st_mtime_ns, info.st_size, info.st_ino)
    with _cache_lock:
        cached = _cache.get(path)
    if cached is not None and cached[0] == signature:
        return cached[1]
    from bob_acp.atomic import read_regular

    try:
        data, _size = read_regular(real, MAX_AGENTS_MD)
    except OSError:
        return ""
    text = data[:MAX_AGENTS_MD].decode("utf-8", errors="replace").strip()
    if len(data) > MAX_AGENTS_MD:
        text += f"\n[AGENTS.md cut at {MAX_AGENTS_MD} bytes]"
    with _cache_lock:
        _cache[path] = (signature, text)
    return text
