"""Bob's watchdog: run as `python -I -S watchdog.py <Bob's pid> <owner variable>`, its stdin a pipe
from Bob (see bob_acp/children.py). Standard library only, nothing of Bob imported.

Bob writes `+<pgid>` when it starts a process group and `-<pgid>` when that one has ended. When
the pipe closes (Bob exited, or was killed, even with SIGKILL), every group still listed is
killed, then every process whose environment carries Bob's owner tag, round after round.
"""

import os
import signal
import sys
import time

ROUNDS = 10


def tagged(prefix: bytes) -> list[int]:
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == os.getpid():
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as handle:
                environ = handle.read()
        except OSError:
            continue
        if any(item.startswith(prefix) for item in environ.split(b"\0")):
            found.append(int(name))
    return found


def kill(pid: int, group: bool) -> None:
    try:
        if group:
            os.killpg(pid, signal.SIGKILL)
        else:
            os.kill(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def main() -> None:
    owner, variable = sys.argv[1], sys.argv[2]
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)  # it ends when Bob does, not before
    groups: set[int] = set()
    pending = b""
    while True:
        try:
            data = os.read(0, 4096)
        except InterruptedError:
            continue
        except OSError:
            break
        if not data:
            break
        pending += data
        *lines, pending = pending.split(b"\n")
        for line in lines:
            if line[:1] == b"+" and line[1:].isdigit():
                groups.add(int(line[1:]))
            elif line[:1] == b"-" and line[1:].isdigit():
                groups.discard(int(line[1:]))
    for pgid in groups:
        kill(pgid, group=True)
    prefix = f"{variable}={owner}:".encode()
    for _ in range(ROUNDS):
        found = tagged(prefix)
        if not found:
            break
        for pid in found:
            try:
                leader = os.getpgid(pid) == pid
            except OSError:
                leader = False
            kill(pid, group=leader)
            kill(pid, group=False)
        time.sleep(0.02)  # their children, reparented, are looked for in the next round


if __name__ == "__main__":
    main()
