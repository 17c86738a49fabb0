"""Starting Bob's threads where the machine may refuse one (a low `ulimit -u`, a cgroup's
pids.max): a refusal is ThreadLimit, with words that name the limit, never a bare RuntimeError
escaping as "Internal error". (The transport, which imports nothing of Bob, words its own.)"""

from __future__ import annotations

import threading

from bob_acp.exceptions import BobError

TYPE_CHECKING = False
if TYPE_CHECKING:  # (typing is not loaded before Bob's first answer: Live is generic to mypy alone)
    from typing import Any, Callable, Generic, Hashable, TypeVar

    T = TypeVar("T", bound=Hashable)

    class _Items(Generic[T]):
        pass
else:
    class _Items:
        def __class_getitem__(cls, item: object) -> type:
            return cls

LIMIT = "the limit on processes and threads (ulimit -u) is reached"
STACK_SIZE = 1024 * 1024  # bytes of stack a thread reserves (not 8 MiB: `ulimit -v` counts it)


class ThreadLimit(BobError):
    """A thread (or a process) could not be started: the machine's limit is reached."""


def _address_space_bounded() -> bool:
    """Whether `ulimit -v` bounds this process's address space."""
    import resource

    try:
        return resource.getrlimit(resource.RLIMIT_AS)[0] != resource.RLIM_INFINITY
    except (OSError, ValueError):
        return False


def cgroup_pids_limit() -> str | None:
    """The pids cgroup Bob is in, in words, when its limit (pids.max) is what is reached, or None."""
    try:
        folder = None
        with open("/proc/self/cgroup", encoding="utf-8") as handle:
            for line in handle:  # (cgroup v1: "N:pids:/path"; v2: "0::/path")
                _number, controllers, path = line.strip().split(":", 2)
                if "pids" in controllers.split(","):
                    folder = "/sys/fs/cgroup/pids" + path.rstrip("/")
                    break
                if not controllers:
                    folder = "/sys/fs/cgroup" + path.rstrip("/")
        if folder is None:
            return None
        with open(folder + "/pids.max", encoding="utf-8") as handle:
            limit = handle.read().strip()
        with open(folder + "/pids.current", encoding="utf-8") as handle:
            current = int(handle.read().strip())
    except (OSError, ValueError, IndexError):
        return None
    if limit == "max" or current < int(limit) - 1:
        return None
    return f"the process limit of the cgroup Bob runs in is reached (pids.max = {limit} in {folder})"


def limit_words() -> str:
    """Which of the machine's limits a thread that cannot start met, in words: a pids cgroup's
    when that is full, `ulimit -v` (the address space, when it is bounded: a thread's stack is
    taken from it) or `ulimit -u`."""
    cgroup = cgroup_pids_limit()
    if cgroup:
        return cgroup
    if _address_space_bounded():
        return "the limit on memory (ulimit -v) or on processes and threads (ulimit -u) is reached"
    return LIMIT


def start(target: Callable[..., Any], name: str, *args: Any) -> threading.Thread:
    """A daemon thread running `target(*args)`, started; ThreadLimit when it cannot be."""
    thread = threading.Thread(target=target, args=args, name=name, daemon=True)
    try:
        thread.start()
    except RuntimeError:
        raise ThreadLimit(f"cannot start a thread: {limit_words()}") from None
    return thread


def timer(seconds: float, action: Callable[[], Any]) -> threading.Timer:
    """A started daemon Timer; ThreadLimit when it cannot be started."""
    clock = threading.Timer(seconds, action)
    clock.daemon = True
    try:
        clock.start()
    except RuntimeError:
        raise ThreadLimit(f"cannot start a thread: {limit_words()}") from None
    return clock


def economise() -> None:
    """What Bob's threads take of the address space, bounded (`ulimit -v` counts reservations,
    not use): each thread's stack is STACK_SIZE (not `ulimit -s`, 8 MiB by default), and where
    the address space is limited, glibc keeps two malloc arenas (not 8 per core, 64 MiB each)."""
    try:
        threading.stack_size(STACK_SIZE)
    except (ValueError, RuntimeError):
        pass
    import sys

    if _address_space_bounded() and sys.platform.startswith("linux"):
        try:
            import ctypes

            ctypes.CDLL(None).mallopt(-8, 2)  # M_ARENA_MAX
        except (OSError, AttributeError):
            pass


class Doing:
    """What each of Bob's threads does, and for whom (its session, its request, the state of its
    turn): set by the thread itself, read by the stack dump of SIGUSR1, so that a stuck turn can
    be tied to its session. Plain dict operations: safe beside the signal handler."""

    def __init__(self) -> None:
        self._notes: dict[int, dict[str, str]] = {}

    def note(self, **fields: str | None) -> None:
        """This thread's notes updated (a field given None is taken away)."""
        notes = self._notes.setdefault(threading.get_ident(), {})
        for name, value in fields.items():
            if value is None:
                notes.pop(name, None)
            else:
                notes[name] = value

    def clear(self) -> None:
        self._notes.pop(threading.get_ident(), None)

    def snapshot(self) -> dict[int, dict[str, str]]:
        return {ident: dict(notes) for ident, notes in list(self._notes.items())}


doing = Doing()


class Live(_Items["T"]):
    """What runs now (commands, connections), for the end of Bob to end it all: added and
    discarded by the threads that run it, taken at once by the one that ends Bob. Once ended,
    nothing is added (what comes late is its adder's to end)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._items: set[T] = set()
        self._ended = False

    def add(self, item: T) -> bool:
        """False: Bob is ending, and `item` was not added."""
        with self._lock:
            if self._ended:
                return False
            self._items.add(item)
            return True

    def discard(self, item: T) -> None:
        with self._lock:
            self._items.discard(item)

    def all(self) -> list[T]:
        with self._lock:
            return list(self._items)

    def end(self) -> list[T]:
        """No more is added; what is held is returned."""
        with self._lock:
            self._ended = True
            return list(self._items)
