"""Every process Bob starts ends with what started it: a tool call, a session, or Bob itself.

The processes of tool calls, of sessions' sandboxes and of MCP servers are started by Bob's
supervisor (supervisor.py, a small process of its own), never by Bob directly; Bob starts
only short helpers it waits for, each with a time limit (git for checkpoints, the sandbox's
probe and its cover runs). The supervisor is the *child subreaper* of all of them: a process
that leaves its group (`setsid`), double-forks or unsets Bob's owner tag is still below it, and
when Bob ends in any way (even SIGKILL: the socket between them closes) it kills every one of
them. What a child cannot drop is its ancestry, so the guarantee holds against all of that.

- A call's process group is killed when the call ends (bob_acp.tools.bash).
- A session's orphans (what its commands left running on purpose, such as bg-jobs) carry
  `BOB_ACP_OWNER=<Bob's pid>:<label>` and end with the session; one that dropped the tag ends
  with Bob instead.
- If the supervisor itself is killed, its children are reparented to Bob (a subreaper too),
  which ends them all at once and starts a new supervisor for the next command.
- Where the supervisor cannot run (no /proc to find the reparented, a process limit too low),
  Bob starts processes itself as before 0.16 and says so: then a process that left its group
  can outlive a Bob killed with SIGKILL.

Bob itself is made non-dumpable before it starts anything (PR_SET_DUMPABLE 0): no process of the
user's, sandboxed or not, can read its memory or environment through /proc, or make it dump core.
"""

from __future__ import annotations

import array
import itertools
import os
import signal
import socket
import subprocess
import sys
import threading
import time

from bob_acp.processes import supervisor as wire

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import IO, Any

OWNER_VAR = wire.OWNER_VAR
ROUNDS = 8  # rounds of orphan killing in Bob (each round's kills reparent the next generation to Bob)
SPAWN_WAIT = 30.0  # seconds a spawn waits for the supervisor's answer
EXIT_WAIT = 0.5  # seconds a killed process's exit may take to come before the supervisor is looked at
SUPERVISOR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "supervisor.py")
# How Bob's helper Pythons run (the supervisor, the sandbox's launcher): isolated (no site, no
# PYTHON* variables: a project cannot put code in them), and UTF-8 whatever the locale.
PYTHON_FLAGS = ("-X", "utf8", "-I", "-S")
PR_SET_DUMPABLE, PR_SET_CHILD_SUBREAPER = 4, 36


class _Processes:
    """What this module keeps for the life of Bob, in one owner."""

    def __init__(self) -> None:
        self.lock = threading.RLock()  # a child is started and registered, or orphans looked up, under it
        self.known: set[int] = set()  # Bob's own direct children (never taken for an orphan)
        self.labels = itertools.count(1)
        self.supervisor: Supervisor | None = None
        self.problem: str | None = None  # why there is no supervisor
        self.protected = False  # protect() ran
        self.subreaper = False  # Bob is its tree's child subreaper
        self.closing = False  # Bob is ending
        self.folders: set[str] = set()  # what the supervisor removes when Bob ends (told again to a new one)


_own = _Processes()


class ProcessLimit(OSError):
    """A process or thread could not be started: the machine's limit (ulimit -u) is reached."""


def protect() -> None:
    """Once, before anything is started on Bob's behalf: Bob non-dumpable (its memory, its
    environment and a core dump refused to every other process of the user) and the child
    subreaper of its tree."""
    with _own.lock:
        if _own.protected:
            return
        _own.protected = True
        if not sys.platform.startswith("linux"):
            return
        try:
            import ctypes
            import resource

            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
            _own.subreaper = libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
            resource.setrlimit(resource.RLIMIT_CORE, (0, resource.getrlimit(resource.RLIMIT_CORE)[1]))
        except (OSError, AttributeError, ValueError):
            pass


def new_label(kind: str) -> str:
    return f"{kind}-{next(_own.labels)}"


def tag(env: dict[str, Any] | None, label: str) -> dict[str, Any]:
    """`env` (None: Bob's own) with the owner tag of `label`."""
    base = dict(os.environ if env is None else env)
    base[OWNER_VAR] = f"{os.getpid()}:{label}"
    return base


class Child:
    """A process the supervisor started for Bob: the part of subprocess.Popen that Bob uses.
    Its exit comes from the supervisor (its parent), not from waitpid."""

    def __init__(self, pid: int, argv: list[str], stdin: IO[bytes] | None, stdout: IO[bytes] | None,
                 stderr: IO[bytes] | None):
        self.pid = pid
        self.args = argv
        self.stdin, self.stdout, self.stderr = stdin, stdout, stderr
        self.returncode: int | None = None
        self._done = threading.Event()

    def poll(self) -> int | None:
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if not self._done.wait(timeout):
            raise subprocess.TimeoutExpired(self.args, timeout or 0)
        return self.returncode  # type: ignore[return-value]

    def exited(self, status: int) -> None:
        if self.returncode is None:
            self.returncode = status
        self._done.set()


class Supervisor:
    """Bob's end of the socket to its supervisor; a reader thread takes its answers and the
    exits of the processes it started."""

    def __init__(self) -> None:
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self.proc = subprocess.Popen([sys.executable, *PYTHON_FLAGS, SUPERVISOR, str(theirs.fileno())],
                                         pass_fds=[theirs.fileno()], stdin=subprocess.DEVNULL,
                                         stdout=subprocess.DEVNULL, start_new_session=True, close_fds=True)
        except BaseException:
            mine.close()
            raise
        finally:
            theirs.close()
        _own.known.add(self.proc.pid)
        self.sock = mine
        self._send_lock = threading.Lock()
        self._ids = itertools.count(1)
        self._answers: dict[int, list[Any]] = {}  # id -> [event, answer]
        self._children: dict[int, Child] = {}
        self._early: dict[int, int] = {}  # exits that came before their spawn's answer was taken
        self.alive = True
        self.ended_by_bob = False  # Bob ended it (it was stopped): said already
        self._reader = threading.Thread(target=self._read, name="bob-supervisor", daemon=True)
        try:
            self._reader.start()
        except RuntimeError:
            self.close()
            raise

    def spawn(self, argv: list[str], env: dict[str, Any], cwd: str, fds: list[int]) -> int:
        """Start `argv`; its pid. OSError with the errno of a failed exec or fork."""
        request_id = next(self._ids)
        waiting: list[Any] = [threading.Event(), None]
        self._answers[request_id] = waiting
        self.send({"op": "spawn", "id": request_id, "argv": argv, "env": env, "cwd": cwd}, fds)
        deadline = time.monotonic() + SPAWN_WAIT
        while not waiting[0].wait(EXIT_WAIT):  # (a look at the supervisor every EXIT_WAIT: no busy wait)
            if self.stopped():  # (the program it just started stopped it before it answered)
                self.kill_stopped()
            elif time.monotonic() > deadline:
                self._answers.pop(request_id, None)
                raise OSError(0, "the supervisor did not answer")
        answer = waiting[1]
        if answer is None:
            raise OSError(0, "the supervisor ended")
        if answer.get("op") == "failed":
            number = int(answer.get("errno") or 0)
            raise OSError(number, answer.get("error") or os.strerror(number))
        return int(answer["pid"])

    def watch(self, child: Child) -> None:
        with _own.lock:
            early = self._early.pop(child.pid, None)
            gone = not self.alive
            if early is None and not gone:
                self._children[child.pid] = child
        if gone and early is None:  # (the supervisor ended before this child was watched)
            wire.kill(child.pid)
            early = -signal.SIGKILL
        if early is not None:
            child.exited(early)

    def send(self, message: dict[str, Any], fds: list[int] | None = None) -> None:
        import json

        body = json.dumps(message).encode()
        header = wire.HEADER.pack(wire.MAGIC, len(body))
        with self._send_lock:
            if fds:
                self.sock.sendmsg([header], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))])
                self.sock.sendall(body)
            else:
                self.sock.sendall(header + body)

    def _read(self) -> None:
        try:
            while True:
                received = wire.receive(self.sock)
                if received is None:
                    break
                message = received[0]
                op = message.get("op")
                if op in ("spawned", "failed"):
                    waiting = self._answers.pop(message.get("id", -1), None)
                    if waiting is not None:
                        waiting[1] = message
                        waiting[0].set()
                elif op == "exit":
                    with _own.lock:
                        child = self._children.pop(message["pid"], None)
                        if child is None:
                            self._early[message["pid"]] = message["status"]
                    if child is not None:
                        child.exited(message["status"])
        except (OSError, ValueError):
            pass
        finally:
            self._gone()

    def _gone(self) -> None:
        """The supervisor ended (killed, or Bob is closing): its processes were reparented to
        Bob, which ends them all now; every wait on them ends."""
        with _own.lock:
            self.alive = False
        for waiting in list(self._answers.values()):
            waiting[0].set()
        # Reaped first: a process's descriptors close before its children are reparented, so
        # only once it is a zombie are they all Bob's to find.
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            pass
        _own.known.discard(self.proc.pid)
        if _own.supervisor is self:
            _own.supervisor = None
            if not _own.closing and not self.ended_by_bob:
                from bob_acp import log

                log.get("bob").warning("[acp] Bob's supervisor of commands ended unexpectedly: every command it "
                                       "ran is ended; the next command starts a new one")
        with _own.lock:
            waiting_children = list(self._children.values())
            self._children.clear()
        for child in waiting_children:
            wire.kill(child.pid)
        end_orphans(None)
        for child in waiting_children:
            child.exited(-signal.SIGKILL)

    def stopped(self) -> bool:
        """Whether the supervisor is stopped (SIGSTOP, or traced), so that it answers nothing."""
        try:
            with open(f"/proc/{self.proc.pid}/stat", "rb") as handle:
                fields = handle.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            return False
        return bool(fields) and fields[0] in (b"T", b"t")

    def kill_stopped(self) -> None:
        """End a stopped supervisor now, said once: its socket closes, and the reader ends what it
        held (_gone), which ends every wait on it."""
        if self.ended_by_bob:
            return
        self.ended_by_bob = True
        from bob_acp import log

        log.get("bob").warning("[acp] Bob's supervisor of commands was stopped (by a command?): it is ended, with "
                               "every process it held; the next command starts a new one")
        try:
            self.proc.kill()
        except OSError:
            pass

    def close(self, timeout: float = 0.0) -> None:
        """Bob ends: the supervisor kills what is left, removes its folders and ends; wait for
        that up to `timeout` seconds. A stopped one is continued first (or it would never see
        the socket close, and what it holds would stay)."""
        try:
            os.kill(self.proc.pid, signal.SIGCONT)
        except OSError:
            pass
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()
        if timeout:
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                pass


def _supervisor() -> Supervisor | None:
    with _own.lock:
        current = _own.supervisor
        if current is not None and current.alive:
            return current
        if not os.path.isdir("/proc/self/task"):
            _own.problem = "there is no /proc, where the supervisor finds the processes reparented to it"
            return None
        try:
            current = _own.supervisor = Supervisor()
            _own.problem = None
        except (OSError, RuntimeError) as exc:
            _own.problem = f"the supervisor could not start: {exc}"
            return None
        for folder in _own.folders:  # (a supervisor that was killed took the list with it)
            try:
                current.send({"op": "cleanup", "path": folder})
            except OSError:
                break
        return current


def orphan_guard() -> str | None:
    """Why no process Bob starts is sure to end with Bob here (None: it is)."""
    if not sys.platform.startswith("linux"):
        return "this system has no child subreaper"
    if not os.path.isdir("/proc/self/task"):
        return "there is no /proc, where the supervisor finds the processes reparented to it"
    return _own.problem


def spawn(argv: list[str], label: str, env: dict[str, Any] | None = None, cwd: str | None = None,
          stdin: int = subprocess.DEVNULL, stdout: int = subprocess.PIPE, stderr: int = subprocess.STDOUT) -> Any:
    """Start `argv` (its own session and process group) through the supervisor, with the owner
    tag of `label`: a Child (or, where the supervisor cannot run, a subprocess.Popen). `stdin`,
    `stdout`, `stderr`: subprocess.PIPE, DEVNULL or (stderr) STDOUT. ProcessLimit when the
    machine's process limit is reached; OSError for anything else."""
    protect()
    env = tag(env, label)
    cwd = cwd or os.getcwd()
    current = _supervisor()
    if current is None:
        return _popen(argv, env, cwd, stdin, stdout, stderr)
    ours: list[int] = []  # our ends of the pipes
    theirs: list[int] = []  # the child's descriptors, closed here once it has them
    try:
        fds = [_end(stdin, False, ours, theirs), _end(stdout, True, ours, theirs)]
        fds.append(fds[1] if stderr == subprocess.STDOUT else _end(stderr, True, ours, theirs))
        try:
            pid = current.spawn(argv, env, cwd, fds)
        except OSError as exc:
            raise _limit(exc) from None
    except BaseException:
        for fd in ours:
            os.close(fd)
        raise
    finally:
        for fd in theirs:
            os.close(fd)
    files = iter(ours)
    child = Child(pid, argv, os.fdopen(next(files), "wb") if stdin == subprocess.PIPE else None,
                  os.fdopen(next(files), "rb") if stdout == subprocess.PIPE else None,
                  os.fdopen(next(files), "rb") if stderr == subprocess.PIPE else None)
    current.watch(child)
    return child


def _end(kind: int, output: bool, ours: list[int], theirs: list[int]) -> int:
    """The child's descriptor for one of its standard streams (our end kept in `ours`)."""
    if kind == subprocess.PIPE:
        read_end, write_end = os.pipe2(os.O_CLOEXEC)
        ours.append(read_end if output else write_end)
        theirs.append(write_end if output else read_end)
        return theirs[-1]
    fd = os.open(os.devnull, (os.O_WRONLY if output else os.O_RDONLY) | os.O_CLOEXEC)
    theirs.append(fd)
    return fd


def _limit(exc: OSError) -> OSError:
    import errno

    if exc.errno == errno.EAGAIN:
        from bob_acp import threads

        return ProcessLimit(exc.errno, "cannot start a process: " + (threads.cgroup_pids_limit()
                                                                     or "the limit on processes (ulimit -u) is reached"))
    return exc


def _popen(argv: list[str], env: dict[str, Any], cwd: str, stdin: int, stdout: int, stderr: int) -> subprocess.Popen[bytes]:
    """Bob starts the process itself (no supervisor here): registered as its own child."""
    with _own.lock:
        try:
            proc = subprocess.Popen(argv, env=env, cwd=cwd, stdin=stdin, stdout=stdout, stderr=stderr,
                                    start_new_session=True, close_fds=True)
        except OSError as exc:
            raise _limit(exc) from None
        _own.known.add(proc.pid)
    return proc


def settle(proc: Any) -> None:
    """Wait for a process Bob has killed. Its exit comes from the supervisor: where it does not
    come within EXIT_WAIT because the supervisor is stopped (a command Bob ran may SIGSTOP it),
    the supervisor is ended, which ends every process it held and every wait on them, so a
    cancel is never held by it."""
    try:
        proc.wait(EXIT_WAIT)
        return
    except subprocess.TimeoutExpired:
        pass
    current = _own.supervisor
    if isinstance(proc, Child) and current is not None and current.stopped():
        current.kill_stopped()
    proc.wait()


def ended(proc: Any) -> None:
    """A child from spawn() has ended (the supervisor's are its own business)."""
    if isinstance(proc, subprocess.Popen):
        with _own.lock:
            _own.known.discard(proc.pid)


def end_orphans(label: str | None) -> None:
    """End what `label`'s processes left running (None: everything, at Bob's end): the
    supervisor's orphans of that label, and any reparented to Bob itself."""
    current = _own.supervisor
    if label is not None and current is not None and current.alive:
        try:
            current.send({"op": "end", "label": label})
        except OSError:
            pass
    if _own.subreaper:
        _end_own_orphans(label)


def _end_own_orphans(label: str | None) -> None:
    """Kill the processes reparented to Bob itself that carry `label` (None: all), with their
    process groups, and reap them."""
    def found() -> list[int]:
        pids = []
        for pid in wire.children():
            if pid in _own.known:
                continue
            if _zombie(pid):
                _reap(pid)
            elif label is None or _owner(pid) == label:
                pids.append(pid)
        return pids

    def reap(killed: list[int]) -> None:
        for pid in killed:
            _reap(pid, block=True)

    with _own.lock:
        wire.end_rounds(found, reap, ROUNDS)


def running(label: str) -> bool:
    """Whether a process that carries `label` still runs (a job a command of that label left
    running, once the command itself has ended)."""
    for name in os.listdir("/proc"):
        if name.isdigit() and int(name) != os.getpid() and _owner(int(name)) == label and not _zombie(int(name)):
            return True
    return False


def keep_on_exit(folder: str) -> None:
    """Have `folder` removed when Bob ends, however it ends (the supervisor removes it)."""
    with _own.lock:
        _own.folders.add(folder)
    current = _supervisor()
    if current is not None:
        try:
            current.send({"op": "cleanup", "path": folder})
        except OSError:
            pass


def removed(folder: str) -> None:
    with _own.lock:
        _own.folders.discard(folder)
    current = _own.supervisor
    if current is not None and current.alive:
        try:
            current.send({"op": "forget", "path": folder})
        except OSError:
            pass


def closing() -> bool:
    """Whether Bob is ending (what is cut off now says nothing of the machine)."""
    return _own.closing


def shutdown(timeout: float = 0.5) -> None:
    """Bob ends: its orphans go, then the supervisor ends what it started (waited for up to
    `timeout` seconds)."""
    _own.closing = True
    if _own.subreaper:
        _end_own_orphans(None)
    current = _own.supervisor
    if current is not None:
        current.close(timeout)


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





def _reap(pid: int, block: bool = False) -> None:
    try:
        os.waitpid(pid, 0 if block else os.WNOHANG)
    except ChildProcessError:
        pass
