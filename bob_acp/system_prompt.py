"""The system prompt of a session: Bob's instructions, the environment, the skills, AGENTS.md."""

from __future__ import annotations

import datetime
import os
import platform

from bob_acp import skills

MAX_AGENTS_MD = 64 * 1024

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


def build(cwd: str, catalog: "skills.Catalog", now: datetime.datetime | None = None) -> str:
    now = now or datetime.datetime.now(datetime.timezone.utc)
    parts = [INSTRUCTIONS, _environment(cwd, now)]
    catalogue = skills.catalogue_text(catalog)
    if catalogue:
        parts.append(catalogue)
    agents = _agents_md(cwd)
    if agents:
        parts.append("Project instructions (AGENTS.md in the working directory):\n\n" + agents)
    return "\n\n".join(parts)


def _environment(cwd: str, now: datetime.datetime) -> str:
    system = platform.system()
    release = platform.release()
    shell = os.environ.get("SHELL", "/bin/sh")
    return (
        "Environment:\n"
        f"- working directory: {cwd}\n"
        f"- operating system: {system} {release}\n"
        f"- shell for the bash tool: bash (the user's login shell is {shell})\n"
        f"- date: {now.strftime('%Y-%m-%d')} (UTC)"
    )


def _agents_md(cwd: str) -> str:
    path = os.path.join(cwd, "AGENTS.md")
    try:
        with open(path, "rb") as handle:
            data = handle.read(MAX_AGENTS_MD + 1)
    except OSError:
        return ""
    text = data[:MAX_AGENTS_MD].decode("utf-8", errors="replace").strip()
    if len(data) > MAX_AGENTS_MD:
        text += f"\n[AGENTS.md cut at {MAX_AGENTS_MD} bytes]"
    return text
