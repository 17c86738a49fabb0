"""Bob's own folder in a project, `.bob/`: its skills (`.bob/skills`, which a team may commit),
and Bob's state (sessions, background jobs, checkpoints), which its .gitignore keeps out of the
project's history; and the user's own state folder, outside every project (user_state)."""

from __future__ import annotations

import errno
import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Mapping

NAME = ".bob"


def user_state(env: Mapping[str, str] | None = None) -> str:
    """The user's Bob state folder (the checkpoint key, the chat's history): $XDG_STATE_HOME/bob,
    else ~/.local/state/bob."""
    variables = os.environ if env is None else env
    base = variables.get("XDG_STATE_HOME") or os.path.join(variables.get("HOME") or os.path.expanduser("~"),
                                                           ".local", "state")
    return os.path.join(base, "bob")
STATE = ("sessions/", "jobs/", "checkpoints/", ".gitignore")  # (this file too: Bob writes it in every clone)
GITIGNORE = ("# Bob's own state: not part of the project. (.bob/skills is: commit it to share the skills.)\n"
             + "".join(f"{entry}\n" for entry in STATE))
OLD_GITIGNORE = "# Bob's own state (sessions): not part of the project\n*\n"  # (0.15 and before: everything)


def ensure(root: str) -> str:
    """`<root>/.bob`, made with its .gitignore when it is missing; a .gitignore Bob wrote before
    0.16 (which ignored everything, skills included) is brought up to date. OSError when the
    folder cannot be made."""
    folder = os.path.join(root, NAME)
    if not os.path.isdir(folder):
        if os.path.lexists(folder):  # (a file there: said as such, not as "File exists")
            raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), folder)
        os.makedirs(folder, exist_ok=True)
    ignore = os.path.join(folder, ".gitignore")
    try:
        with open(ignore, encoding="utf-8") as handle:
            current: str | None = handle.read()
    except FileNotFoundError:
        current = None
    except OSError:
        return folder
    if current is None or current == OLD_GITIGNORE:
        try:
            with open(ignore, "w", encoding="utf-8") as handle:
                handle.write(GITIGNORE)
        except OSError:
            pass
    return folder
