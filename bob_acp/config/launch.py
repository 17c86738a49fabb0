"""How this Bob was started, and so how its user runs `setup`: `bob-acp setup` where that is the
command on their PATH, `uvx bob-acp setup` for the ACP Registry's uvx launch (a command they do not
have on their PATH), else the program's own path."""

from __future__ import annotations

import os
import shlex
import sys

UV_PARTS = ("/uv/", "/.cache/uv", "/uv-cache/", "/uvx/")  # where uvx keeps the tools it runs


def launch_command() -> list[str]:
    """How this Bob was started, for clients that run the terminal sign-in from `_meta` alone."""
    program = os.path.abspath(sys.argv[0]) if sys.argv and sys.argv[0] else ""
    if not program or program.endswith(("__main__.py", "-c")):
        program_args = [sys.executable, "-m", "bob_acp"]
    else:
        program_args = [program]
    return program_args + [arg for arg in sys.argv[1:] if arg != "--acp"]


def setup_words() -> str:
    """The command a person types to run this Bob's setup."""
    program = launch_command()[0]
    if any(part in program for part in UV_PARTS):
        return "uvx bob-acp setup"
    if program == sys.executable:
        return f"{shlex.quote(sys.executable)} -m bob_acp setup"
    found = _on_path("bob-acp")
    if os.path.basename(program) != "bob-acp" or (found and os.path.realpath(found) == os.path.realpath(program)):
        return "bob-acp setup"  # (on the PATH; or Bob inside another program, which knows its own command)
    return f"{shlex.quote(program)} setup"


def _on_path(name: str) -> str | None:
    """shutil.which(name), without importing shutil (and the compression modules it loads)
    before Bob's first answer."""
    for folder in os.environ.get("PATH", os.defpath).split(os.pathsep):
        candidate = os.path.join(folder or ".", name)
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    return None
