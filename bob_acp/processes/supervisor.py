"""Bob's supervisor: the parent of every process Bob runs, and what ends them all when Bob ends.

Run as `python -I -S supervisor.py FD` (standard library only, nothing of Bob imported), FD its
end of a UNIX socket pair with Bob (see children.py). It is the *child subreaper* of its
tree, so a process that leaves its group (`setsid`), double-forks or drops Bob's owner tag from
its environment is still its descendant: when its parent ends, it is reparented here, never to
init. When the socket closes (Bob exited, or was killed, even with SIGKILL), it kills every
process it started and every one reparented to it, round after round, removes the folders Bob
asked it to, and ends.

Messages, each a header (4-byte magic, 4-byte length) and a JSON body; a spawn request carries
the child's stdin, stdout and stderr as descriptors (SCM_RIGHTS) with its header:

    Bob → {"op": "spawn", "id": N, "argv": [...], "env": {...}, "cwd": "..."}
        ← {"op": "spawned", "id": N, "pid": P} | {"op": "failed", "id": N, "errno": E, "error": "..."}
        ← {"op": "exit", "pid": P, "status": S}   (S as subprocess's returncode: -signal when killed)
    Bob → {"op": "end", "label": L}                kill what carries BOB_ACP_OWNER=…:L and is no
                                                   longer a running child of Bob's (a session ended)
    Bob → {"op": "cleanup", "path": D} / {"op": "forget", "path": D}   remove D when Bob ends / not
"""

from __future__ import annotations

import json
import os
import select
import shutil
import signal
import socket
import struct
import sys
import time

TYPE_CHECKING = False
if TYPE_CHECKING:  # (annotations only: nothing more is imported at run time)
    from typing import Any, Callable, NoReturn

HEADER = struct.Struct("!4sI")
MAGIC = b"BOB1"
MAX_FDS = 3
ROUNDS = 50  # rounds of killing at the end (each round's kills reparent the next generation here)
OWNER_VAR = "BOB_ACP_OWNER"
PR_SET_PDEATHSIG, PR_SET_DUMPABLE, PR_SET_CHILD_SUBREAPER = 1, 4, 36


def prctl(option: int, value: int) -> bool:
    try:
        import ctypes

        done: bool = ctypes.CDLL(None, use_errno=True).prctl(option, value, 0, 0, 0) == 0
        return done
    except (OSError, AttributeError):
        return False


def send(sock: socket.socket, message: dict[str, Any]) -> None:
    body = json.dumps(message).encode()
    sock.sendall(HEADER.pack(MAGIC, len(body)) + body)


def receive(sock: socket.socket) -> tuple[dict[str, Any], list[int]] | None:
    """(message, descriptors) or None at the end of the socket."""
    fds: list[int] = []
    header = b""
    while len(header) < HEADER.size:
        data, ancillary, _flags, _addr = sock.recvmsg(HEADER.size - len(header),
                                                      socket.CMSG_SPACE(MAX_FDS * 4))
        for level, kind, payload in ancillary:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                fds += list(struct.unpack(f"{len(payload) // 4}i", payload[:len(payload) // 4 * 4]))
        if not data:
            return None
        header += data
    magic, size = HEADER.unpack(header)
    if magic != MAGIC:
        return None
    body = b""
    while len(body) < size:
        chunk = sock.recv(size - len(body))
        if not chunk:
            return None
        body += chunk
    message: dict[str, Any] = json.loads(body)
    return message, fds


class Supervisor:
    def __init__(self, sock: socket.socket):
        self.sock = sock
        self.me = os.getpid()
        self.running: dict[int, bool] = {}  # pid -> True: children Bob asked for that have not been reaped
        self.folders: set[str] = set()
        wake_r, wake_w = os.pipe()
        os.set_blocking(wake_w, False)
        os.set_blocking(wake_r, False)
        self.wake = wake_r
        signal.set_wakeup_fd(wake_w)
        signal.signal(signal.SIGCHLD, lambda *_: None)
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGPIPE):
            signal.signal(sig, signal.SIG_IGN)  # it ends when Bob does, not before

    def serve(self) -> None:
        while True:
            try:
                watched: list[socket.socket | int] = [self.sock, self.wake]
                ready = select.select(watched, [], [])[0]
            except InterruptedError:
                continue
            if self.wake in ready:
                try:
                    os.read(self.wake, 512)
                except BlockingIOError:
                    pass
                self.reap()
            if self.sock in ready:
                try:
                    received = receive(self.sock)
                except (OSError, ValueError):
                    received = None
                if received is None:
                    return
                self.handle(*received)

    def handle(self, message: dict[str, Any], fds: list[int]) -> None:
        op = message.get("op")
        try:
            if op == "spawn":
                self.spawn(message, fds)
            elif op == "end":
                self.end(str(message.get("label", "")))
            elif op == "cleanup":
                self.folders.add(message["path"])
            elif op == "forget":
                self.folders.discard(message["path"])
        finally:
            for fd in fds:
                try:
                    os.close(fd)
                except OSError:
                    pass

    def spawn(self, message: dict[str, Any], fds: list[int]) -> None:
        report_r, report_w = os.pipe2(os.O_CLOEXEC)
        try:
            pid = os.fork()
        except OSError as exc:
            os.close(report_r)
            os.close(report_w)
            send(self.sock, {"op": "failed", "id": message["id"], "errno": exc.errno, "error": exc.strerror})
            return
        if pid == 0:
            self.become(message, fds, report_w)
        os.close(report_w)
        failure = b""
        while True:
            chunk = os.read(report_r, 1024)
            if not chunk:
                break
            failure += chunk
        os.close(report_r)
        if failure:
            os.waitpid(pid, 0)
            number, _, text = failure.decode(errors="replace").partition(":")
            send(self.sock, {"op": "failed", "id": message["id"], "errno": int(number or 0), "error": text})
            return
        self.running[pid] = True
        send(self.sock, {"op": "spawned", "id": message["id"], "pid": pid})

    def become(self, message: dict[str, Any], fds: list[int], report: int) -> NoReturn:
        """In the child: its own session, its descriptors, its folder, then exec (or say why not)."""
        try:
            os.setsid()
            prctl(PR_SET_PDEATHSIG, signal.SIGKILL)  # the supervisor killed: its children go with it
            if os.getppid() != self.me:
                os._exit(1)
            for sig in range(1, signal.NSIG):
                try:
                    signal.signal(sig, signal.SIG_DFL)
                except (OSError, ValueError, RuntimeError):
                    pass
            signal.pthread_sigmask(signal.SIG_SETMASK, set())
            for target, fd in enumerate(fds[:3]):
                os.dup2(fd, target, inheritable=True)
            keep = max(report, 3)
            os.closerange(3, report)
            os.closerange(keep + 1, 65536)
            os.chdir(message["cwd"])
            os.execvpe(message["argv"][0], message["argv"], message["env"])
        except OSError as exc:
            os.write(report, f"{exc.errno}:{exc.strerror or exc}".encode())
        except BaseException as exc:  # noqa: BLE001  (any failure is the spawn's, said to Bob)
            os.write(report, f"0:{exc}".encode())
        os._exit(127)

    def pause_and_reap(self) -> None:
        time.sleep(0.01)  # (the killed are gone in a moment; their children are ours then)
        self.reap()

    def reap(self) -> None:
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            if self.running.pop(pid, None):
                code = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
                try:
                    send(self.sock, {"op": "exit", "pid": pid, "status": code})
                except OSError:
                    pass

    def end(self, label: str) -> None:
        """Kill the processes carrying `label` that are not running children of Bob's (the orphans
        of a session: jobs it left on purpose, setsid), with their groups."""
        tag = f"{OWNER_VAR}={os.getppid()}:{label}".encode()
        end_rounds(lambda: [pid for pid in children() if pid not in self.running and tagged(pid, tag)],
                   lambda _killed: self.pause_and_reap())

    def finish(self) -> None:
        """Bob has ended: everything below goes, then the folders it named."""
        def left() -> list[int]:
            self.reap()
            return list(set(children()) | set(self.running))

        end_rounds(left, lambda _killed: time.sleep(0.01))
        for folder in self.folders:
            shutil.rmtree(folder, ignore_errors=True)


def end_rounds(found: Callable[[], list[int]], reap: Callable[[list[int]], None], rounds: int = ROUNDS) -> None:
    """Kill what `found()` names, with their process groups, round after round (each round's
    kills reparent the next generation to this process, a subreaper) until it names nothing;
    `reap(killed)` after each round. Bob's own orphans are ended the same way (children.py)."""
    for _ in range(rounds):
        pids = found()
        if not pids:
            return
        for pid in pids:
            kill(pid)
        reap(pids)


def children() -> list[int]:
    """This process's children (adopted ones included): /proc/self/task/*/children."""
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


def tagged(pid: int, tag: bytes) -> bool:
    """Whether `pid`'s environment holds `tag` (`BOB_ACP_OWNER=<Bob's pid>:<label>`)."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as handle:
            return tag in handle.read().split(b"\0")
    except OSError:
        return False


def kill(pid: int) -> None:
    """SIGKILL to `pid` and, when it leads one, its process group."""
    try:
        if os.getpgid(pid) == pid:
            os.killpg(pid, signal.SIGKILL)
    except OSError:
        pass
    try:
        os.kill(pid, signal.SIGKILL)
    except OSError:
        pass


def main() -> None:
    sock = socket.socket(fileno=int(sys.argv[1]))
    prctl(PR_SET_CHILD_SUBREAPER, 1)
    prctl(PR_SET_DUMPABLE, 0)
    supervisor = Supervisor(sock)
    try:
        supervisor.serve()
    finally:
        supervisor.finish()


if __name__ == "__main__":
    main()
