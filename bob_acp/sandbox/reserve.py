"""Names no command may create at a root, reserved while a session's sandbox lives (the way
Codex reserves its protected paths, openai/codex #15067, #17734, #18446): a missing `.git`,
`.gitmodules` or `AGENTS.md` at a root is made on the machine as an empty placeholder (a folder
for `.git`, an empty file for the others) and bound read-only inside the sandbox, so that no
command or job of it can create, replace or write one. An empty `.git` folder is no repository:
git looks past it to a parent one, as it would without it.

Each sandbox writes a ledger in Bob's state folder (hidden from commands) before it makes a
placeholder: Bob's pid and start time, the roots, when the sandbox began, and each placeholder's
device and inode. When the sandbox ends its placeholders go, each only while it is still the
empty thing Bob made (what the user wrote into one, or saved over it, is theirs and stays),
removed by name through its folder's descriptor; the ledger of a Bob that died is swept at the
next sandbox's start. The ledgers of live sandboxes also tell a new session which AGENTS.md a
job may be writing now (`live`)."""

from __future__ import annotations

import contextlib
import os
import stat
import time

from bob_acp.sandbox.names import PLANTED_NAMES

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator
    from typing import Any

LEDGERS = "sandboxes"  # the folder of the ledgers, in Bob's state folder
Made = tuple[str, str, int, int]  # (root, name, device, inode)


class Reservation:
    """The placeholders one sandbox made, and its ledger."""

    def __init__(self, ledger: str, roots: list[str] | tuple[str, ...]):
        self.ledger = ledger
        self.roots = list(roots)
        self.since = time.time_ns()
        self.made: list[Made] = []
        self.missed: list[str] = []  # names that could not be reserved (said: the sandbox is incomplete)

    def make(self) -> None:
        """Each missing name at each root reserved (the ledger written first: it also says that
        this sandbox lives, and since when)."""
        self._write(self.made)
        for root in self.roots:
            for name in PLANTED_NAMES:
                try:
                    self._reserve(root, name)
                except OSError as exc:
                    self.missed.append(f"{os.path.join(root, name)} ({exc.strerror or exc})")

    def _reserve(self, root: str, name: str) -> None:
        with _folder(root) as fd:
            try:
                os.stat(name, dir_fd=fd, follow_symlinks=False)
                return  # (there: protected as it is)
            except FileNotFoundError:
                pass
            self._write([*self.made, (root, name, 0, 0)])  # (the intent, before the name exists)
            if name == ".git":
                os.mkdir(name, 0o755, dir_fd=fd)
                info = os.stat(name, dir_fd=fd, follow_symlinks=False)
            else:
                made = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644,
                               dir_fd=fd)
                info = os.fstat(made)
                os.close(made)
            self.made.append((root, name, info.st_dev, info.st_ino))
            self._write(self.made)

    def paths(self) -> list[str]:
        return [os.path.join(root, name) for root, name, _dev, _ino in self.made]

    def release(self) -> list[str]:
        """The sandbox has ended: each placeholder still as Bob made it removed; the names left
        because someone wrote to one (said to the user)."""
        left = release(self.made)
        self.made = []
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.ledger)
        return left

    def _write(self, made: list[Made]) -> None:
        import json

        from bob_acp.files.atomic import atomic_write

        os.makedirs(os.path.dirname(self.ledger), mode=0o700, exist_ok=True)
        atomic_write(self.ledger, json.dumps({"pid": os.getpid(), "start": _start_time(os.getpid()),
                                              "since": self.since, "roots": self.roots,
                                              "made": [list(item) for item in made]}).encode())


def reserve(state: str, owner: str, roots: list[str] | tuple[str, ...]) -> Reservation:
    """The ledger of a sandbox about to start, the placeholders made; what a Bob that died left
    swept first."""
    sweep(state)
    safe = "".join(c if c.isalnum() or c in "-_" else "_" for c in owner)[:80]
    reservation = Reservation(os.path.join(state, LEDGERS, f"{os.getpid()}-{safe}.json"), roots)
    reservation.make()
    return reservation


def release(made: list[Made]) -> list[str]:
    """Each placeholder removed while it is still the empty thing Bob made (same device and
    inode; an empty folder, or an empty file), by name through its folder's descriptor; the
    paths left."""
    left = []
    for root, name, device, inode in made:
        if not device:
            continue  # (the intent only: nothing was made)
        try:
            with _folder(root) as fd:
                info = os.stat(name, dir_fd=fd, follow_symlinks=False)
                if (info.st_dev, info.st_ino) != (device, inode):
                    continue  # (replaced since: the user's, or Bob's own write)
                if stat.S_ISDIR(info.st_mode):
                    os.rmdir(name, dir_fd=fd)  # (only an empty one: what is in it is somebody's)
                elif stat.S_ISREG(info.st_mode) and info.st_size == 0:
                    os.unlink(name, dir_fd=fd)
                else:
                    left.append(os.path.join(root, name))
        except FileNotFoundError:
            continue
        except OSError:
            left.append(os.path.join(root, name))
    return left


def sweep(state: str) -> None:
    """The ledgers of Bobs no longer running: their placeholders released, the ledgers gone."""
    for path, ledger in _ledgers(state):
        if _alive(ledger):
            continue
        made = [tuple(item) for item in ledger.get("made") or [] if isinstance(item, list) and len(item) == 4]
        release([(str(a), str(b), int(c), int(d)) for a, b, c, d in made if b in PLANTED_NAMES])
        with contextlib.suppress(OSError):
            os.unlink(path)


def live(state: str) -> list[tuple[list[str], int]]:
    """(roots, when it began in ns) of each sandbox of a running Bob of this user."""
    return [([str(r) for r in ledger.get("roots") or []], int(ledger.get("since") or 0))
            for _path, ledger in _ledgers(state) if _alive(ledger)]


def _ledgers(state: str) -> Iterator[tuple[str, dict[str, Any]]]:
    import json

    folder = os.path.join(state, LEDGERS)
    try:
        names = sorted(os.listdir(folder))
    except OSError:
        return
    for name in names:
        if not name.endswith(".json"):
            continue
        path = os.path.join(folder, name)
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
            try:
                if not stat.S_ISREG(os.fstat(fd).st_mode):
                    continue
                data = json.loads(os.read(fd, 1 << 20))
            finally:
                os.close(fd)
        except (OSError, ValueError):
            continue
        if isinstance(data, dict):
            yield path, data


def _alive(ledger: dict[str, Any]) -> bool:
    pid, start = ledger.get("pid"), ledger.get("start")
    return isinstance(pid, int) and start is not None and _start_time(pid) == start


def _start_time(pid: int) -> int | None:
    """When process `pid` started (clock ticks since boot): a pid reused later differs."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            return int(handle.read().rsplit(b")", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return None


@contextlib.contextmanager
def _folder(root: str) -> Iterator[int]:
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        yield fd
    finally:
        os.close(fd)


# ---- AGENTS.md a command may have written ------------------------------------------------------

DOUBTED = "doubted-agents.json"  # AGENTS.md files a sandboxed command or job may have written
MAX_DOUBTED = 4096


def doubt(state: str, paths: list[str]) -> None:
    """These AGENTS.md files may be a sandboxed command's or job's: no session reads one while it
    is as it is now (the user saving it again, or removing it, ends the doubt)."""
    import fcntl
    import json

    from bob_acp.files.atomic import atomic_write

    if not paths:
        return
    os.makedirs(state, mode=0o700, exist_ok=True)
    path = os.path.join(state, DOUBTED)
    lock = os.open(path + ".lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)  # (two Bobs doubting at once lose neither)
        known = {p: s for p, s in _doubted(state).items() if _now(p) == s}
        known.update({p: s for p in paths if (s := _now(p)) is not None})
        kept = dict(list(known.items())[-MAX_DOUBTED:])
        atomic_write(path, json.dumps(kept).encode())
    finally:
        os.close(lock)


def doubted(state: str, path: str) -> bool:
    """Whether the AGENTS.md at `path` may have been written by a sandboxed command or job since
    the user last saved it: doubted when it was seen changed, or below a root of a sandbox that
    lives now (its jobs may be writing it) and changed since that sandbox began. The roots' own
    AGENTS.md is read-only to commands: never doubted for a live sandbox."""
    now = _now(path)
    if now is None:
        return False
    if _doubted(state).get(path) == now:
        return True
    folder = os.path.dirname(path)
    for roots, since in live(state):
        for root in roots:
            if folder != root and folder.startswith(root.rstrip("/") + "/") and max(now[3], now[4]) >= since:
                return True
    return False


def _doubted(state: str) -> dict[str, list[int]]:
    import json

    try:
        fd = os.open(os.path.join(state, DOUBTED), os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return {}
    try:
        data = json.loads(os.read(fd, 1 << 22)) if stat.S_ISREG(os.fstat(fd).st_mode) else {}
    except (OSError, ValueError):
        return {}
    finally:
        os.close(fd)
    return {str(p): list(s) for p, s in data.items() if isinstance(s, list)} if isinstance(data, dict) else {}


def _now(path: str) -> list[int] | None:
    try:
        info = os.lstat(path)
    except OSError:
        return None
    return [info.st_mode, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns]
