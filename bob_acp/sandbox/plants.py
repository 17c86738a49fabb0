"""What a session's commands make that no kernel refuses by name (`Plants`): a repository or an
AGENTS.md below a root. A command's own is taken out of the project when it ends (the name
itself, moved beneath its root through descriptors: a link as the link); one that appears while
only a job of the sandbox runs is left where it is (the user may have made it meanwhile),
doubted (reserve.doubt: no session reads such an AGENTS.md until the user saves it again) and
said. The names at a root the sandbox holds read-only or reserved are the host's concern
(`held`): what changes there is the user's or Bob's own."""

from __future__ import annotations

import contextlib
import os
import threading

from bob_acp.sandbox.names import Signature, planted_names

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    Held = Callable[[list[str], dict[str, Signature]], list[str]]  # those of the paths a command could write


class Plants:
    """The planted names of a session's roots as the last command left them, and what changed."""

    def __init__(self, roots: list[str] | tuple[str, ...], cwd: str, say: Callable[[str], None]):
        self.roots = roots
        self.cwd = cwd
        self._say = say
        self.last_look: dict[str, Signature] | None = None  # the planted names after the last command
        self.jobs_after = False  # whether jobs of the sandbox still ran after the last command
        self._lock = threading.Lock()  # one look at a time (a command's, Bob's own write, the sandbox's end)

    def before(self, unheld: Held) -> tuple[list[str], dict[str, Signature]]:
        """At a command's start: (what appeared or changed since the last command ended, while a
        job it left ran, doubted and said; the look the command's end compares with). What
        appeared while nothing of the sandbox ran is the user's, and is not said."""
        with self._lock:
            now = planted_names(self.roots)
            said = []
            if self.last_look is not None and self.jobs_after:
                said = self._doubted(unheld(_differ(self.last_look, now), self.last_look))
            self.last_look = now
            return said, now

    def after(self, before: dict[str, Signature], unheld: Held, jobs_running: Callable[[], bool]) -> list[str]:
        """At a command's end: what it made (a repository, an AGENTS.md, at any depth) taken out
        of the project; what it changed that it did not make doubted; each said (one line)."""
        with self._lock:
            now = planted_names(self.roots)
            made = unheld(sorted(path for path in now if path not in before), before)
            stamp = _stamp()
            said = [self._take_out(path, stamp) for path in made]
            said += self._doubted(unheld([path for path in _differ(before, now) if path not in made], before))
            self.last_look = planted_names(self.roots) if made else now
            self.jobs_after = jobs_running()
        return said

    def final(self, unheld: Held) -> list[str]:
        """Once the sandbox has ended (nothing of it can write any more): what its jobs made since
        the last command, doubted and said."""
        with self._lock:
            said = []
            if self.last_look is not None and self.jobs_after:
                said = self._doubted(unheld(_differ(self.last_look, planted_names(self.roots)), self.last_look))
            self.last_look, self.jobs_after = None, False
        return said

    @contextlib.contextmanager
    def own_write(self) -> Iterator[None]:
        """Around a write of Bob's own file tools (asked, or in a mode the user chose): an
        AGENTS.md it writes while a job runs is Bob's, not the job's."""
        with self._lock:
            yield
            if self.last_look is not None:
                self.last_look = {**self.last_look, **planted_names(self.roots)}

    def _doubted(self, paths: list[str]) -> list[str]:
        """Names a sandboxed command or its job may have written, left where they are: an
        AGENTS.md is not read by a session until the user has saved it again; each said."""
        from bob_acp.files import bobdir
        from bob_acp.sandbox import reserve

        if not paths:
            return []
        reserve.doubt(bobdir.user_state(), [p for p in paths if os.path.basename(p) == "AGENTS.md"])
        said = []
        for path in sorted(paths):
            self._say(f"{path} may have been written by a sandboxed command or its job: left in place, doubted")
            said.append(f"{self.relative(path)} (may be a sandboxed command's: left in place; "
                        + ("no session reads it until the user saves it again)" if path.endswith("AGENTS.md")
                           else "Bob never runs git in it; check it before you do)"))
        return said

    def _take_out(self, path: str, stamp: str) -> str:
        """The planted name moved into the root's .bob/planted/<stamp> (the name itself, never a
        link's target; never outside the root, never through a .bob that is a link)."""
        from bob_acp.files import bobdir
        from bob_acp.files.beneath import move_beneath

        root = self._root_of(path)
        relative = os.path.relpath(path, root)
        kept = "/".join([bobdir.NAME, "planted", stamp, relative])
        try:
            move_beneath(root, relative, kept)
        except OSError as exc:
            self._say(f"{path} was created by a sandboxed command and could not be taken out: {exc.strerror or exc}")
            return f"{relative} (could not be taken out: {exc.strerror or exc}; check it)"
        self._say(f"{path} was created by a sandboxed command: taken out to {os.path.join(root, kept)}")
        return f"{relative} (taken out to {kept})"

    def _root_of(self, path: str) -> str:
        return next((r for r in self.roots if path == r or path.startswith(r.rstrip("/") + "/")), self.cwd)

    def relative(self, path: str) -> str:
        """A path as the user reads it: from the session's folder, else whole."""
        root = self._root_of(path)
        return os.path.relpath(path, root) if root == self.cwd else path


def _stamp() -> str:
    """The folder of one round of names taken out (a time, and a few random digits)."""
    import secrets

    from bob_acp.timestamps import utc_now

    return f"{utc_now().replace(':', '')}-{secrets.token_hex(3)}"


def _differ(before: dict[str, Signature], now: dict[str, Signature]) -> list[str]:
    """The names there now that were not, or not so, before."""
    return sorted(path for path, seen in now.items() if before.get(path) != seen)
