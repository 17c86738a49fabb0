"""The system prompt of a session: Bob's instructions, the environment, the tools beyond the
built-in ones, the skills, and the project's AGENTS.md files.

AGENTS.md is project content, hence untrusted: each one is read only when it is a regular file
whose real path (links resolved) lies inside the project (the git root, else the cwd), without
ever blocking on it (a FIFO named AGENTS.md), within its cap; read again at every session/new.
One that a sandboxed command or its job may have written since the user last saved it is not
read at all (`doubted`): the session says so instead.
"""

from __future__ import annotations

import datetime
import os
import platform

from bob_acp.context import skills
from bob_acp.files.workspace import Workspace
from bob_acp.jsontext import clean
from bob_acp.tools import builtin as tools

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


def build(ws: Workspace, catalog: "skills.Catalog", now: datetime.datetime | None = None,
          tools: list[str] | tuple[str, ...] = BUILTIN_TOOLS) -> str:
    """The prompt, made from the folders as they are now (AGENTS.md read again each time)."""
    agents = agents_files(ws.cwd)
    for root in ws.more:
        agents += [found for found in agents_files(root) if found not in agents]
    return _build(ws, catalog, now or datetime.datetime.now(datetime.timezone.utc), tools, agents)


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


def agents_files(cwd: str) -> list[tuple[str, str]]:
    """(path, text) of each AGENTS.md from the project root (the git root, else cwd) down to
    cwd, the nearest last; looked at anew each time (a removed rule is gone from the next session)."""
    root, holding = _walk(cwd)
    real_root = os.path.realpath(root)
    found = []
    for folder in reversed(holding):
        path = os.path.join(folder, "AGENTS.md")
        if path in doubted([path]):
            continue
        text = _agents_md(path, real_root)
        if text:
            found.append((path, text))
    return found


def doubted(paths: list[str]) -> list[str]:
    """Those of these AGENTS.md files that a sandboxed command or its job may have written since
    the user last saved them (bob_acp.sandbox.reserve): not read."""
    from bob_acp.files import bobdir
    from bob_acp.sandbox import reserve

    state = bobdir.user_state()
    return [path for path in paths if reserve.doubted(state, path)]


def doubted_agents(ws: Workspace) -> list[str]:
    """The AGENTS.md files a session in `ws` would read but does not, being doubted (said)."""
    found = []
    for root in (ws.cwd, *ws.more):
        found += [os.path.join(folder, "AGENTS.md") for folder in _walk(root)[1]]
    return doubted(list(dict.fromkeys(found)))


def _walk(cwd: str) -> tuple[str, list[str]]:
    """(the project root, the folders from cwd up to it that hold an AGENTS.md)."""
    folder, holding = cwd, []
    for _ in range(MAX_LEVELS):
        if os.path.lexists(os.path.join(folder, "AGENTS.md")):
            holding.append(folder)
        if _repository(os.path.join(folder, ".git")):
            return folder, holding
        parent = os.path.dirname(folder)
        if parent == folder:
            break
        folder = parent
    return cwd, [f for f in holding if f == cwd]


def _repository(dot_git: str) -> bool:
    """Whether a `.git` is there and is not an empty folder (a sandbox's placeholder, which git
    itself looks past)."""
    if not os.path.lexists(dot_git):
        return False
    try:
        return os.path.islink(dot_git) or not os.path.isdir(dot_git) or bool(os.listdir(dot_git))
    except OSError:
        return True


def _agents_md(path: str, real_root: str) -> str:
    import stat

    try:
        real = os.path.realpath(path)
        info = os.stat(real)
    except OSError:
        return ""
    if not stat.S_ISREG(info.st_mode) or os.path.commonpath([real, real_root]) != real_root:
        return ""  # a device, a FIFO, /proc/self/environ, or a file outside the project
    from bob_acp.files.atomic import read_regular

    try:
        data, _size = read_regular(real, MAX_AGENTS_MD)
    except OSError:
        return ""
    text = data[:MAX_AGENTS_MD].decode("utf-8", errors="replace").strip()
    if len(data) > MAX_AGENTS_MD:
        text += f"\n[AGENTS.md cut at {MAX_AGENTS_MD} bytes]"
    return text
