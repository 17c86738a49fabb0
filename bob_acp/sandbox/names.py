"""The names a sandbox guards in a project: what stays read-only to commands (.git, .bob,
AGENTS.md, the git directory a .git file names, the repositories inside), what no command may
create at a root (reserved while the sandbox lives: reserve.py), what is looked for at any depth
(a repository or an AGENTS.md a command makes deeper down, which no kernel can refuse by name),
and Bob's own secrets that commands must not see.

Everything here reads what a command may have written: through descriptors, never following a
link, never opening anything but a regular file, and that without waiting (O_NONBLOCK)."""

from __future__ import annotations

import os
import stat

TYPE_CHECKING = False
if TYPE_CHECKING:
    from bob_acp.config import Config

PROTECTED_NAMES = (".git", ".bob", "AGENTS.md")
PLANTED_TITLE = ("A sandboxed command or a job it left running made files that run code or instruct Bob later")
PLANTED_NAMES = (".git", ".gitmodules", "AGENTS.md")  # what a command must not create (.bob: Bob makes it)

NESTED_WALK = 20000  # folders a look for planted names inside a root reads at most
SKIPPED_FOLDERS = frozenset({".git", ".bob", "node_modules", ".venv", "venv", "__pycache__", ".tox", "target"})
Signature = tuple[int, int, int, int, int]  # (mode, inode, size, mtime_ns, ctime_ns)


def signature(info: os.stat_result) -> Signature:
    return info.st_mode, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns


def planted_names(roots: list[str] | tuple[str, ...]) -> dict[str, Signature]:
    """Every `.git`, `.gitmodules` and `AGENTS.md` beneath the roots (the roots' own included),
    with what shows it changed; walked through descriptors without following a link; the
    heaviest folders that hold none are skipped, and at most NESTED_WALK folders are read."""
    found: dict[str, Signature] = {}
    read = 0
    for root in roots:
        try:
            top = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError:
            continue
        pending = [(top, root)]
        try:
            while pending:
                fd, folder = pending.pop()
                try:
                    if read < NESTED_WALK:
                        read += 1
                        _look_in(fd, folder, found, pending)
                finally:
                    os.close(fd)
        finally:
            for fd, _folder in pending:
                os.close(fd)
    return found


def _look_in(fd: int, folder: str, found: dict[str, Signature], pending: list[tuple[int, str]]) -> None:
    try:
        entries = list(os.scandir(fd))
    except OSError:
        return
    for entry in entries:
        if entry.name in PLANTED_NAMES:
            try:
                found[os.path.join(folder, entry.name)] = signature(entry.stat(follow_symlinks=False))
            except OSError:
                pass
        if entry.name in SKIPPED_FOLDERS or not entry.is_dir(follow_symlinks=False):
            continue
        try:
            pending.append((os.open(entry.name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC,
                                    dir_fd=fd), os.path.join(folder, entry.name)))
        except OSError:
            continue


def nested_repositories(root: str) -> list[str]:
    """The `.git` (folder, or file naming a git directory) of each repository inside `root`,
    submodules included (the root's own left out)."""
    own = os.path.join(root, ".git")
    return [path for path in planted_names([root]) if os.path.basename(path) == ".git" and path != own]


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
    """The git directory a `.git` file names (a worktree, a submodule), or None; the file read
    as data (a link, a FIFO, a folder: None)."""
    try:
        fd = os.open(dot_git, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        first = os.read(fd, 4096).decode("utf-8", "replace").splitlines()[0]
    except (OSError, IndexError):
        return None
    finally:
        os.close(fd)
    if not first.startswith("gitdir:"):
        return None
    return os.path.normpath(os.path.join(os.path.dirname(dot_git), first[len("gitdir:"):].strip()))
