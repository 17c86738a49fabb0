"""A session's folders: the working directory, where commands run and relative paths start, and
any further roots the client added (`acp.additionalDirectories`). "This project's files", for
the permission modes, the sandbox and the skills, means the files under any of its roots.
"""

from __future__ import annotations

import os

PRIVATE_FOLDERS = (".git", ".bob")  # a project's own state: a change there runs code or changes Bob
PROTECTED_FILES = ("AGENTS.md",)  # instructions Bob trusts: never changed unasked


class Workspace:
    """(A plain class, not a dataclass: session/new's module imports it, and start-up does not
    import dataclasses.)"""

    __slots__ = ("cwd", "more")

    def __init__(self, cwd: str, more: tuple[str, ...] = ()):
        self.cwd = cwd  # absolute
        self.more = more  # further absolute roots, in the client's order, without cwd

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Workspace) and self.cwd == other.cwd and self.more == other.more

    def __hash__(self) -> int:
        return hash((self.cwd, self.more))

    def __repr__(self) -> str:
        return f"Workspace({self.cwd!r}, {self.more!r})"

    @property
    def roots(self) -> tuple[str, ...]:
        return (self.cwd, *self.more)

    def root_of(self, path: str) -> str | None:
        """The root an absolute, normalised `path` lies under, as written (links not followed)."""
        return next((root for root in self.roots if path.startswith(root.rstrip(os.sep) + os.sep)), None)

    def resolve(self, path: str) -> str:
        """`path` (relative to cwd, absolute, or ~/…) as an absolute, normalised path."""
        return os.path.normpath(os.path.join(self.cwd, os.path.expanduser(path)))

    def contains(self, path: str) -> bool:
        """True when `path`, with every link followed as the kernel would, lies inside one of the
        roots, under none of that root's private folders (.git, .bob) at any depth, and is no
        AGENTS.md."""
        real = os.path.realpath(self.resolve(path))
        if os.path.basename(real) in PROTECTED_FILES:
            return False
        for root in self.roots:
            base = os.path.realpath(root)
            if real == base or not real.startswith(base.rstrip(os.sep) + os.sep):
                continue
            if not any(part in PRIVATE_FOLDERS for part in os.path.relpath(real, base).split(os.sep)):
                return True
        return False


def too_broad(ws: Workspace, home: str | None = None) -> str | None:
    """A root of `ws` that is the whole disk, the home folder or a folder above it (where "this
    project's files" would be all of the user's), or None."""
    home = os.path.realpath(home or os.path.expanduser("~"))
    for root in ws.roots:
        real = os.path.realpath(root)
        if real == os.sep or real == home or home.startswith(real.rstrip(os.sep) + os.sep):
            return root
    return None


def of(cwd: str, more: list[str] | tuple[str, ...] = ()) -> Workspace:
    """The workspace of `cwd` and `more`, duplicates (and cwd itself) left out of `more`."""
    return Workspace(cwd, tuple(dict.fromkeys(root for root in more if root != cwd)))  # (the first of each, in order)
