"""Finding processes through /proc (to prove none of Bob's children survive)."""

from __future__ import annotations

import os
import time


def with_marker(marker: str) -> list[int]:
    """Pids whose command line contains `marker`."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/cmdline", "rb") as handle:
                cmdline = handle.read().replace(b"\0", b" ").decode(errors="replace")
            with open(f"/proc/{name}/stat") as handle:
                state = handle.read().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if marker in cmdline and state != "Z" and int(name) != os.getpid():
            found.append(int(name))
    return found


def wait_gone(marker: str, timeout: float = 3.0) -> list[int]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        left = with_marker(marker)
        if not left:
            return []
        time.sleep(0.05)
    return with_marker(marker)


def wait_present(marker: str, count: int = 1, timeout: float = 10.0) -> list[int]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = with_marker(marker)
        if len(found) >= count:
            return found
        time.sleep(0.05)
    raise AssertionError(f"no process with {marker!r} appeared")
