"""Every process Bob starts ends with what started it: a tool call, a session, or Bob itself.

Three mechanisms, because a process can leave its process group (`setsid`), and Bob itself can
be killed with SIGKILL, which runs none of its own clean-up:

- Bob is the *child subreaper* of its tree (Linux `prctl`): a process whose parent died is
  reparented to Bob, not to init, so Bob can find it in its own children list.
- Every process Bob starts carries `BOB_ACP_OWNER=<Bob's pid>:<label>` in its environment, and
  so does everything it starts in turn: when a call or a session ends, the orphans carrying its
  label are killed (with their process groups), round after round as their own children are
  reparented in turn; at exit, every orphan goes.
- A small watchdog process (`bob_acp/watchdog.py`, in a session of its own) holds a pipe from
  Bob. When Bob ends in any way, even by SIGKILL, the pipe closes and the watchdog kills every
  process group Bob still had running and every process carrying Bob's tag.

Nothing here polls: the look-ups run when a call, a session or Bob ends.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

OWNER_VAR = "BOB_ACP_OWNER"
ROUNDS = 8  # rounds of orphan killing (each round's kills reparent the next generation to Bob)

_lock = threading.RLock()  # a child is started and registered, or orphans looked up, under it
_known: set[int] = set()  # children Bob started and will wait for itself
_labels = iter(range(1, 1 << 62))
_watchdog: Any = None
_subreaper = False
_tried: list[bool] = []


def become_subreaper() -> bool:
    """Make this process the child subreaper of its tree (Linux); False where that cannot be."""
    global _subreaper
    if not sys.platform.startswith("linux"):
        return False
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        _subreaper = libc.prctl(36, 1, 0, 0, 0) == 0  # PR_SET_CHILD_SUBREAPER
    except (OSError, AttributeError):
        _subreaper = False
    return _subreaper


def new_label(kind: str) -> str:
    return f"{kind}-{next(_labels)}"


def tag(env: dict | None, label: str) -> dict:
    """`env` (None: Bob's own) with the owner tag of `label`."""
    base = dict(os.environ if env is None else env)
    base[OWNER_VAR] = f"{os.getpid()}:{label}"
    return base


def spawn(argv: list[str], label: str, env: dict | None = None, **popen: Any) -> subprocess.Popen:
    """subprocess.Popen with the owner tag, in a process group of its own, registered as Bob's
    own child (never taken for an orphan) and watched by the watchdog."""
    with _lock:
        if not _tried:
            _tried.append(True)  # (here, not at start-up: ctypes costs start-up time, and only
            become_subreaper()  # the children Bob starts can leave orphans)
        proc = subprocess.Popen(argv, env=tag(env, label), start_new_session=True, **popen)
        _known.add(proc.pid)
    _tell_watchdog(f"+{proc.pid}\n")
    return proc


def ended(proc: subprocess.Popen) -> None:
    """A child from spawn() has been waited for."""
    with _lock:
        _known.discard(proc.pid)
    _tell_watchdog(f"-{proc.pid}\n")


def end_orphans(label: str | None) -> int:
    """Kill the processes reparented to Bob that carry `label` (None: every orphan, at exit),
    with their process groups; reap them. Returns how many were killed."""
    if not _subreaper:
        return 0
    killed = 0
    with _lock:
        for _ in range(ROUNDS):
            found = []
            for pid in _children():
                if pid in _known:
                    continue
                if _zombie(pid):
                    _reap(pid)
                elif label is None or _owner(pid) == label:
                    found.append(pid)
            if not found:
                break
            for pid in found:
                _kill(pid)
            for pid in found:
                _reap(pid, block=True)
            killed += len(found)
    return killed


def _children() -> list[int]:
    found: list[int] = []
    try:
        tasks = os.listdir("/proc/self/task")
    except OSError:
        return found
    for task in tasks:
        try:
            with open(f"/proc/self/task/{task}/children", "rb") as handle:
                found += [int(pid) for pid in handle.read().split()]
        except (OSError, ValueError):
            continue
    return found


def _owner(pid: int) -> str | None:
    """The label of Bob's that `pid` carries, or None (another owner, or none)."""
    prefix = f"{OWNER_VAR}={os.getpid()}:".encode()
    try:
        with open(f"/proc/{pid}/environ", "rb") as handle:
            environ = handle.read()
    except OSError:
        return None
    for item in environ.split(b"\0"):
        if item.startswith(prefix):
            return item[len(prefix):].decode("ascii", "replace")
    return None


def _zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            return handle.read().rsplit(b")", 1)[1].split()[0] == b"Z"
    except (OSError, IndexError):
        return False


def _kill(pid: int) -> None:
    try:
        if os.getpgid(pid) == pid:
            os.killpg(pid, signal.SIGKILL)
        os.kill(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _reap(pid: int, block: bool = False) -> None:
    try:
        os.waitpid(pid, 0 if block else os.WNOHANG)
    except ChildProcessError:
        pass


def _tell_watchdog(line: str) -> None:
    global _watchdog
    with _lock:
        if _watchdog is None:
            _watchdog = _start_watchdog()
        fd = _watchdog
    if fd < 0:
        return
    try:
        os.write(fd, line.encode())
    except OSError:  # the watchdog is gone: what it would do at Bob's end, Bob's own exit does
        pass


def _start_watchdog() -> int:
    """The write end of the watchdog's pipe; -1 when it could not be started."""
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "watchdog.py")
    read_end, write_end = os.pipe()
    try:
        # Its own session: a signal to Bob's process group does not end it before it has done its work.
        proc = subprocess.Popen([sys.executable, "-I", "-S", script, str(os.getpid()), OWNER_VAR], stdin=read_end,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
                                close_fds=True)
    except OSError:
        os.close(write_end)
        return -1
    finally:
        os.close(read_end)
    _known.add(proc.pid)
    os.set_inheritable(write_end, False)
    return write_end
