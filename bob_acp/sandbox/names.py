"""The names a sandbox guards in a project: what stays read-only to commands (.git, .bob,
AGENTS.md, the git directory a .git file names, the repositories inside), what a command must
not create (taken out when it does), and Bob's own secrets that commands must not see."""

from __future__ import annotations

import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from bob_acp.config import Config

PROTECTED_NAMES = (".git", ".bob", "AGENTS.md")
PLANTED_TITLE = ("A job a sandboxed command left running created files that run code or instruct Bob later: taken "
                 "out of the project")
PLANTED_NAMES = (".git", ".gitmodules", "AGENTS.md")  # what a command must not create at a root (.bob: Bob makes it)

NESTED_WALK = 20000  # folders a look for repositories inside a root reads at most
SKIPPED_FOLDERS = frozenset({".git", ".bob", "node_modules", ".venv", "venv", "__pycache__", ".tox", "target"})


def nested_repositories(root: str) -> list[str]:
    """The `.git` (folder, or file naming a git directory) of each repository inside `root`,
    submodules included, without following links; the heaviest folders that hold none are
    skipped, and at most NESTED_WALK folders are read."""
    found: list[str] = []
    pending = [root]
    read = 0
    while pending and read < NESTED_WALK:
        folder = pending.pop()
        read += 1
        try:
            with os.scandir(folder) as entries:
                for entry in entries:
                    if entry.name == ".git" and folder != root:
                        found.append(entry.path)
                    elif entry.name not in SKIPPED_FOLDERS and entry.is_dir(follow_symlinks=False):
                        pending.append(entry.path)
        except OSError:
            continue
    return found


def secrets_of(cfg: Config) -> list[str]:
    """Bob's own secrets outside its config folder: the key files the configuration names, the
    configuration file itself (headers may hold keys), and Bob's state folder (the checkpoint
    key, the chat's history)."""
    base = os.path.dirname(cfg.source) if cfg.source else os.getcwd()
    found = [cfg.model.apiKeyFile, cfg.source,
             *(entry.get("apiKeyFile") for entry in cfg.models if isinstance(entry, dict))]
    from bob_acp.files import bobdir

    return [os.path.join(base, os.path.expanduser(p)) for p in found if isinstance(p, str) and p] + [
        bobdir.user_state()]


def gitdir(dot_git: str) -> str | None:
    """The git directory a `.git` file names (a worktree, a submodule), or None."""
    try:
        if not os.path.isfile(dot_git) or os.path.islink(dot_git):
            return None
        with open(dot_git, encoding="utf-8", errors="replace") as handle:
            first = handle.read(4096).splitlines()[0]
    except (OSError, IndexError):
        return None
    if not first.startswith("gitdir:"):
        return None
    return os.path.normpath(os.path.join(os.path.dirname(dot_git), first[len("gitdir:"):].strip()))
