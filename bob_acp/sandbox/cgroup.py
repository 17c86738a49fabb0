"""A session sandbox's memory cgroup: one bound for all its commands together, /dev/shm and
tmpfs pages included (the kernel charges those to the cgroup of the process that wrote them,
which no per-process limit sees).

Made below Bob's own memory cgroup where Bob may make one: cgroup v1's memory controller (a
container's root, a CI runner), or cgroup v2 where memory is delegated to Bob's children. Where
neither holds (an ordinary desktop session under systemd gives no delegation), commands keep
the per-process limit and a /dev/shm sized by it, and `--check` says so.
"""

from __future__ import annotations

import os
import time

V1_ROOT = "/sys/fs/cgroup/memory"
V2_ROOT = "/sys/fs/cgroup"
PREFIX = "bob-sandbox-"
EMPTY_WAIT = 2.0  # seconds a removal waits for the processes of an ended sandbox to be gone


def parent() -> tuple[str, str] | None:
    """(folder, version) where a session's cgroup can be made, or None."""
    try:
        with open("/proc/self/cgroup", encoding="utf-8") as handle:
            lines = handle.read().splitlines()
    except OSError:
        return None
    for line in lines:
        number, controllers, path = (line.split(":", 2) + ["", ""])[:3]
        if "memory" in controllers.split(","):
            folder = os.path.join(V1_ROOT, path.lstrip("/"))
            if os.path.isfile(os.path.join(folder, "memory.limit_in_bytes")) and os.access(folder, os.W_OK):
                return folder, "v1"
        elif number == "0" and not controllers:
            folder = os.path.join(V2_ROOT, path.lstrip("/"))
            try:
                with open(os.path.join(folder, "cgroup.subtree_control"), encoding="utf-8") as handle:
                    delegated = "memory" in handle.read().split()
            except OSError:
                continue
            if delegated and os.access(folder, os.W_OK):
                return folder, "v2"
    return None


class Cgroup:
    """One session's cgroup, made at its sandbox's first command and removed with the session."""

    def __init__(self, folder: str, version: str):
        self.folder = folder
        self.version = version

    @classmethod
    def make(cls, owner: str, memory: int) -> Cgroup | None:
        """The cgroup, bounded to `memory` bytes; None where none can be made (said by --check)."""
        found = parent()
        if found is None:
            return None
        base, version = found
        sweep(base)
        folder = os.path.join(base, f"{PREFIX}{os.getpid()}-{owner or 'session'}")
        try:
            os.mkdir(folder)
        except FileExistsError:
            pass
        except OSError:
            return None
        made = cls(folder, version)
        limits = ({"memory.limit_in_bytes": memory} if version == "v1"
                  else {"memory.max": memory, "memory.swap.max": 0})
        for name, value in limits.items():
            try:
                with open(os.path.join(folder, name), "w") as handle:
                    handle.write(str(value))
            except OSError:
                if name != "memory.swap.max":  # (no swap accounting: the bound holds on memory alone)
                    made.remove(wait=0)
                    return None
        return made

    def kills(self) -> int:
        """How many of its processes the kernel has killed for its bound, so far."""
        name = "memory.oom_control" if self.version == "v1" else "memory.events"
        try:
            with open(os.path.join(self.folder, name), encoding="utf-8") as handle:
                for line in handle:
                    key, _, value = line.partition(" ")
                    if key == "oom_kill":
                        return int(value)
        except (OSError, ValueError):
            pass
        return 0

    def remove(self, wait: float = EMPTY_WAIT) -> bool:
        """Removed once its processes are gone (they end with the sandbox's init, a moment
        after it); False when some were still there after `wait` seconds."""
        deadline = time.monotonic() + wait
        while True:
            try:
                os.rmdir(self.folder)
                return True
            except FileNotFoundError:
                return True
            except OSError:
                if time.monotonic() >= deadline:
                    return False
            time.sleep(0.02)


def sweep(base: str) -> None:
    """The cgroups a Bob that was killed left behind (its pid gone), removed when empty."""
    try:
        names = os.listdir(base)
    except OSError:
        return
    for name in names:
        if not name.startswith(PREFIX):
            continue
        pid = name[len(PREFIX):].split("-", 1)[0]
        if pid.isdigit() and int(pid) != os.getpid() and not os.path.exists(f"/proc/{pid}"):
            try:
                os.rmdir(os.path.join(base, name))
            except OSError:
                continue
