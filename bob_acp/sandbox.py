"""The sandbox of the commands Bob runs (`tools.sandbox`): what this machine gives one, what a
session's sandbox covers, and the launcher command every sandboxed command is started with.

Each session gets a sandbox of its own (bob_acp/sandbox_exec.py `host`), made at a turn's first
sandboxed command: a user namespace holding a mount, a PID, an IPC and (unless
`tools.sandboxNetwork`) a network namespace, in a memory cgroup of the session's where one can
be made (bob_acp/cgroup.py). Its commands join it (`run --join`), so a server one command starts
as a background job is there for the next; it ends with the turn when nothing of it runs (an
idle session holds no process), else when the job or the session ends. Inside: writes only in the session's folders and a /tmp of its own (Landlock); .git,
.bob, AGENTS.md and Bob's own installation read-only; no UNIX socket of another program (a /tmp
and a /run/user of its own, /dev/null over the sockets of programs outside); a loopback and no
other network; no signal to or trace of anything outside; no capabilities; limits on processes
and memory; no core dumps.

Where the kernel cannot give all of that, `coverage()` says what is missing: the start-up line
and `--check` show it, commands are asked before they run (unless `tools.sandbox: best-effort`),
and a command that runs with nothing confining it is never labelled sandboxed.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import os
import sys
import tempfile
import threading

from bob_acp import cgroup, threads
from bob_acp.cgroup import Cgroup
from bob_acp.children import PYTHON_FLAGS  # (the launcher runs as the supervisor does)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from typing import Any

    from bob_acp.config import Config
    from bob_acp.log import Logger
    from bob_acp.workspace import Workspace

LAUNCHER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "sandbox_exec.py")
NETWORK_ABI = 4  # the first Landlock ABI that can deny TCP
SCOPES_ABI = 6  # the first that keeps signals and abstract UNIX sockets inside
PROBE_TIMEOUT = 10.0
HOST_TIMEOUT = 15.0
SOCKET_WATCH = 0.25  # seconds between looks for a socket bound outside while a sandbox lives
NAMESPACES_EVERY = 16  # looks between two walks of /proc for network namespaces
MiB = 1024 * 1024
# What a command's failure says when the sandbox may have been what stopped it.
DENIED_SIGNS = ("Permission denied", "Operation not permitted", "Read-only file system", "EACCES", "EPERM", "EROFS")
NETWORK_SIGNS = ("Network is unreachable", "Could not resolve host", "Couldn't connect to server",
                 "Temporary failure in name resolution", "Name or service not known", "ENETUNREACH",
                 "getaddrinfo", "Failed to establish a new connection", "nodename nor servname",
                 "Could not resolve", "No route to host", "unable to access", "Connection refused", "ECONNREFUSED")
PROTECTED_NAMES = (".git", ".bob", "AGENTS.md")
PLANTED_TITLE = ("A job a sandboxed command left running created files that run code or instruct Bob later: taken "
                 "out of the project")
PLANTED_NAMES = (".git", ".gitmodules", "AGENTS.md")  # what a command must not create at a root (.bob: Bob makes it)


class Machine:
    """What this machine gives a sandbox: the launcher's probe, once per process."""

    __slots__ = ("landlock", "namespaces", "proc", "pid_max", "private_tmp", "loopback", "view", "error", "cut_off")

    def __init__(self, report: dict[str, Any], cut_off: bool = False):
        self.cut_off = cut_off  # the probe was ended before it answered (Bob shutting down): no answer at all
        have: dict[str, Any] = report["have"] if isinstance(report.get("have"), dict) else {}
        self.landlock = int(report.get("landlock") or 0)
        self.namespaces = bool(report.get("ok"))
        self.proc = bool(have.get("proc"))
        self.pid_max = bool(have.get("pid_max"))
        self.private_tmp = bool(have.get("private_tmp"))
        self.loopback = have.get("loopback") is not False
        self.view = bool(have.get("view"))  # no Landlock: every mount but the session's read-only
        self.error = None if self.namespaces else str(report.get("error") or "the probe failed")


def abi(env: dict[str, Any] | None = None) -> int:
    """The Landlock ABI this kernel offers; 0: none (BOB_ACP_NO_LANDLOCK=1 says so, for tests)."""
    if (env if env is not None else os.environ).get("BOB_ACP_NO_LANDLOCK") == "1":
        return 0
    return _kernel_abi()


@functools.lru_cache(maxsize=1)
def _kernel_abi() -> int:
    if not sys.platform.startswith("linux"):
        return 0
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        version = libc.syscall(444, None, ctypes.c_size_t(0), ctypes.c_uint32(1))
    except (OSError, AttributeError):
        return 0
    return max(0, version)


_machines: dict[tuple[Any, ...], Machine] = {}
_machines_lock = threading.Lock()


def machine(network: bool) -> Machine:
    """What this machine gives a sandbox with (or without) the network: probed once."""
    key = (network, os.environ.get("BOB_ACP_NO_LANDLOCK") == "1", os.environ.get("BOB_ACP_NO_NAMESPACES") == "1")
    with _machines_lock:
        known = _machines.get(key)
        if known is None:
            known = _probe(network)
            if not known.cut_off:  # (a probe cut off answered nothing: asked again next time)
                _machines[key] = known
        return known


def _probe(network: bool) -> Machine:
    import json
    import subprocess

    if not sys.platform.startswith("linux"):
        return Machine({"ok": False, "error": "not Linux", "landlock": 0})
    if os.environ.get("BOB_ACP_NO_NAMESPACES") == "1":  # a machine without them, as a test makes one
        return Machine({"ok": False, "error": "namespaces are off (BOB_ACP_NO_NAMESPACES=1)", "landlock": abi()})
    command = [sys.executable, *PYTHON_FLAGS, LAUNCHER, "probe"] + ([] if network else ["--no-network"])
    try:
        done = subprocess.run(command, stdin=subprocess.DEVNULL, capture_output=True, timeout=PROBE_TIMEOUT,
                              cwd="/")
        if done.returncode < 0:  # ended by a signal (Bob's own shutdown): it said nothing of the machine
            return Machine({"ok": False, "error": "the probe was cut off", "landlock": abi()}, cut_off=True)
        report = json.loads(done.stdout.decode("utf-8", "replace").strip().splitlines()[-1])
    except (OSError, subprocess.SubprocessError, ValueError, IndexError) as exc:
        return Machine({"ok": False, "error": f"the probe failed: {exc}", "landlock": abi()})
    if not isinstance(report, dict):
        return Machine({"ok": False, "error": "the probe answered nothing", "landlock": abi()})
    return Machine(report)


# ---- what a sandbox covers -----------------------------------------------------------------------

class Coverage:
    """What a sandbox of this configuration covers on this machine: `held` and `missing`, each
    a list of lines a person reads; `complete` when every guarantee holds."""

    __slots__ = ("held", "missing", "confines", "complete", "limits")
    limits: list[str]

    def __init__(self, found: Machine, network: bool, processes: int, memory: int):
        from bob_acp import children

        held: list[str] = []
        missing: list[str] = []
        ns = found.namespaces
        # Landlock confines writes; without it, the namespace's read-only view does.
        self.confines = found.landlock >= 1 or (ns and found.view)

        def item(ok: bool, yes: str, no: str) -> None:
            (held if ok else missing).append(yes if ok else no)

        where = ("writes only in the session's folders and a /tmp of its own" if ns and found.private_tmp
                 else "writes only in the session's folders and the temporary folder")
        if found.landlock < 1:
            where += " (no Landlock here: every other mount is read-only to commands)"
        item(self.confines, where,
             "no Landlock, and no namespace to make the rest read-only: writes are not confined")
        item(ns, ".git, .bob, AGENTS.md and Bob's own installation read-only",
             "no namespaces: .git, .bob and AGENTS.md stay writable to commands")
        item(ns, "Bob's keys, configuration, state and checkpoint store, and tools.sandboxHide (~/.ssh, ~/.aws …) "
             "hidden", "no namespaces: Bob's keys and the user's credentials (~/.ssh …) are readable by commands")
        item(ns and (not network or found.landlock >= SCOPES_ABI),
             "no UNIX socket of another program (tmux, D-Bus, Docker, ssh-agent)",
             "no namespaces: the UNIX sockets of other programs (tmux, D-Bus, Docker, ssh-agent) are reachable"
             if not ns else f"Landlock ABI {found.landlock}: abstract UNIX sockets of other programs are reachable")
        if network:
            held.append("network on: TCP and UDP to any host, this machine's own services (localhost) included")
        else:
            item(ns and found.loopback, "no network (a loopback of its own)",
                 f"Landlock ABI {found.landlock}: TCP denied but UDP open" if found.landlock >= NETWORK_ABI
                 else "the network cannot be denied")
        item(ns or found.landlock >= SCOPES_ABI, "no signal to or trace of Bob or anything outside",
             "commands can signal Bob and its other processes")
        guard = children.orphan_guard()
        item(guard is None or (ns and found.proc), "nothing it starts outlives Bob",
             f"a process that leaves its group may outlive Bob ({guard})")
        item(sys.platform.startswith("linux"), "Bob's memory, environment and core closed to it",
             "Bob's memory can be read by its commands")
        # (a process limit needs the namespace's pid_max, or RLIMIT_NPROC in a user namespace,
        # which the kernel does not apply to root)
        bounded = ns and (found.pid_max or os.geteuid() != 0)
        together = ns and cgroup.parent() is not None
        self.limits = [f"at most {processes} processes" if bounded else "no limit on the number of processes here",
                       f"{memory // MiB} MiB of memory for the session's commands together, /dev/shm included (a "
                       "cgroup), and per process, no core dumps" if together else
                       f"{memory // MiB} MiB of memory per process and for /dev/shm (no cgroup can be made here to "
                       "bound them together), no core dumps"]
        self.held, self.missing = held, missing
        self.complete = self.confines and not missing


def default_memory() -> int:
    """A quarter of the machine's memory (at least 1 GiB): one runaway command leaves the rest."""
    try:
        total = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        total = 8 * 1024 * MiB
    return max(1024 * MiB, total // 4)


def limits_of(cfg: Config) -> tuple[int, int]:
    limits = cfg.tools.limits
    return int(limits.processes), int(limits.memory) * MiB if limits.memory else default_memory()


def coverage(cfg: Config) -> Coverage:
    network = bool(cfg.tools.sandboxNetwork)
    return Coverage(machine(network), network, *limits_of(cfg))


def status(cfg: Config) -> tuple[str, bool] | None:
    """One line on the sandbox for the log and --check, and whether it is a warning (the
    sandbox is not all it is documented to be here); None when it is off."""
    mode = cfg.tools.sandbox
    if mode == "off":
        return None
    found = machine(bool(cfg.tools.sandboxNetwork))
    covered = coverage(cfg)
    kernel = f"Landlock ABI {found.landlock}" + (", namespaces" if found.namespaces else "")
    if covered.complete:
        return f"sandbox: {mode} ({kernel}): " + "; ".join(covered.held + covered.limits), False
    lacking = "; ".join(covered.missing)
    if not covered.confines:
        action = ("bash calls are refused (tools.sandbox: best-effort runs them, asking first)" if mode == "workspace"
                  else "commands run unconfined, each asked first")
    elif mode == "workspace":
        action = "commands run in what there is, each asked first (tools.sandbox: best-effort runs them unasked)"
    else:
        action = "sandboxed mode runs commands unasked in what there is"
    return f"sandbox: {mode} is incomplete here ({kernel}): {lacking}; {action}", True


def describe(cfg: Config) -> dict[str, Any]:
    """The sandbox's state for `--check --json`."""
    if cfg.tools.sandbox == "off":
        return {"mode": "off"}
    found = machine(bool(cfg.tools.sandboxNetwork))
    covered = coverage(cfg)
    return {"mode": cfg.tools.sandbox, "landlock": found.landlock, "namespaces": found.namespaces,
            "complete": covered.complete, "covers": covered.held, "limits": covered.limits,
            "missing": covered.missing, "problem": found.error}


def trial(cfg: Config, ws: Workspace) -> str | None:
    """A command run as a session's would be, writing a file in the project, reading it back and
    removing it: None when it could, else what stopped it. A sandbox that cannot write the
    project (ids not mapped, a mount it could not make) is no sandbox for it, whatever the
    kernel offers. Nothing is tried where the user cannot write the project either."""
    import subprocess

    if not os.access(ws.cwd, os.W_OK):
        return None
    box = Sandbox(cfg, ws, f"check-{os.getpid()}")
    name = f".bob-check-{os.getpid()}"
    script = f'echo written > {name} && [ "$(cat {name})" = written ] && cat {name}; status=$?; rm -f {name}; exit $status'
    try:
        done = subprocess.run(box.command(["sh", "-c", script]), env=box.environment(None), cwd=ws.cwd,
                              stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=PROBE_TIMEOUT)
    except (OSError, subprocess.SubprocessError) as exc:
        return f"a command could not be run in it: {exc}"
    finally:
        box.end()
    if done.returncode == 0 and done.stdout.strip() == "written":
        return None
    said = (done.stderr.strip() or done.stdout.strip()).splitlines()
    return f"a command in it cannot write the project: {said[-1] if said else f'exit status {done.returncode}'}"


def looks_denied(output: str) -> bool:
    return any(sign in output for sign in DENIED_SIGNS)


def looks_offline(output: str) -> bool:
    return any(sign in output for sign in NETWORK_SIGNS)


# ---- a session's sandbox -------------------------------------------------------------------------

class Sandbox:
    """One session's sandbox: made at a turn's first command, ended at the turn's end when no job
    of it runs (else when the job or the session ends)."""

    def __init__(self, cfg: Config, ws: Workspace, owner: str, log: Logger | None = None):
        self.roots = ws.roots
        self.cwd = ws.cwd
        self.network = bool(cfg.tools.sandboxNetwork)
        self.best_effort = cfg.tools.sandbox == "best-effort"
        self.processes, self.memory = limits_of(cfg)
        self.owner = owner
        self.log = log
        self.folder = os.path.join(tempfile.gettempdir(), f"bob-sandbox-{os.getuid()}-{owner or 'session'}")
        self.coverage = coverage(cfg)
        self.machine = machine(self.network)
        self._lock = threading.Lock()
        self._host_pid: int | None = None
        self._host_in: Any = None  # the init's standard input: closed, the sandbox ends
        self._host_watch: int = -1  # a pidfd of the init (readable once it has ended)
        self._failed: str | None = None
        self._ended = False
        self.last_look: frozenset[str] | None = None  # the planted names after the last command (planted())
        self._nested: list[str] | None = None  # the .git of each repository inside a root (submodules too)
        self._repositories: frozenset[str] | None = None  # those when the current host was made
        self.jobs_after = False  # whether jobs of the sandbox still ran after the last command
        self._watch_stop = threading.Event()  # set: the watch of the current host ends
        self._look_lock = threading.Lock()  # one look at planted names at a time (a command's, the watch's)
        self._command_runs = False
        self._resting = False  # kept after its turn for a job still running (ended when the jobs end)
        self._unsaid: list[str] = []  # what the watch took out, for the model at the next command
        self.on_planted: Callable[[list[str]], None] | None = None  # the user told at once (the session's news)
        self._cgroup: Cgroup | None = None  # the memory its commands share (made with its first host)
        self._cgroup_tried = False
        self._hide = _secrets(cfg) + [os.path.abspath(os.path.expanduser(p)) for p in cfg.tools.sandboxHide]

    # ---- what it is ---------------------------------------------------------------------------

    @property
    def confines(self) -> bool:
        return self.coverage.confines

    @property
    def complete(self) -> bool:
        return self.coverage.complete and self._failed is None

    def unasked(self) -> bool:
        """Whether `sandboxed` mode may run a command in it without asking: all it promises
        holds here, or the user chose best-effort and something confines."""
        return self.complete or (self.best_effort and self.confines)

    def partial(self) -> str | None:
        """What it lacks, in one line (None: nothing)."""
        missing = list(self.coverage.missing) + ([self._failed] if self._failed else [])
        return "; ".join(missing) or None

    def refusal(self) -> str | None:
        """The result of a command refused because nothing can confine it (None: it runs)."""
        if self.confines or self.best_effort:
            return None
        return ("[not run: the sandbox (tools.sandbox: workspace) cannot be had here: "
                f"{self.partial() or 'this kernel has no Landlock'}. With tools.sandbox: best-effort, commands run "
                "with what the kernel offers; or run the command with \"unconfined\": true, which asks the user]")

    # ---- running a command in it --------------------------------------------------------------------

    def command(self, argv: list[str]) -> list[str]:
        """`argv` started through the launcher, in the session's sandbox (made now if need be)."""
        launcher = [sys.executable, *PYTHON_FLAGS, LAUNCHER, "run"]
        pid = self._host()
        if pid is not None:
            launcher += self._joining(pid) + ["--processes", str(self.processes)]
            if abi() < 1:
                launcher.append("--view")
            if self._cgroup is not None:
                launcher += ["--cgroup", self._cgroup.folder]
        else:
            launcher += ["--write", tempfile.gettempdir()]
        for folder in (*self.roots, self.folder):
            launcher += ["--write", folder]
        if not self.network:
            launcher.append("--no-network")
        if self.best_effort:
            launcher.append("--best-effort")
        return launcher + ["--memory", str(self.memory), "--", *argv]

    def _joining(self, pid: int) -> list[str]:
        """The launcher's options to enter the sandbox, covering what appeared since it was made."""
        options = ["--join", str(pid)]
        for path in self.protected():
            options += ["--protect", path]
        for path in self.hidden():
            options += ["--hide", path]
        return options

    def _watch(self, pid: int, stop: threading.Event) -> None:
        """While the sandbox lives (a turn, or a job left running), every SOCKET_WATCH: a socket
        a program outside binds meanwhile is covered in it, not only at the next command; what a
        job plants between commands is taken out."""
        import subprocess

        from bob_acp import sandbox_exec

        try:
            namespace = os.stat(f"/proc/{pid}/ns/pid").st_ino
        except OSError:
            return
        tables = sandbox_exec.network_namespaces()
        seen = {inode for _path, inode in sandbox_exec.listening_sockets(tables)}
        for look in itertools.count(1):
            if stop.wait(SOCKET_WATCH):
                return
            if look % NAMESPACES_EVERY == 0:  # (walks of /proc, now and then: a new container, jobs ended)
                tables = sandbox_exec.network_namespaces()
                self._end_when_jobs_end()
                if stop.is_set():
                    return
            self._look_between_commands()
            now = {inode for _path, inode in sandbox_exec.listening_sockets(tables)}
            new, seen = now - seen, now
            if new and set(sandbox_exec.socket_holders(new, namespace)) != new:  # (not all the sandbox's own)
                command = [sys.executable, *PYTHON_FLAGS, LAUNCHER, "cover", *self._joining(pid)]
                try:
                    subprocess.run(command, env=_plain_env(), cwd="/", stdin=subprocess.DEVNULL,
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=HOST_TIMEOUT)
                except (OSError, subprocess.SubprocessError):
                    continue

    def environment(self, env: dict[str, Any] | None) -> dict[str, Any]:
        """The environment a sandboxed command gets: its caches, temporary files and jobs in the
        sandbox's own folder (its /tmp, inside the namespaces)."""
        base = dict(os.environ if env is None else env)
        inside = "/tmp" if self._host_pid is not None and self.machine.private_tmp else self.folder
        base.update({"XDG_CACHE_HOME": os.path.join(inside, ".cache"),
                     "PIP_CACHE_DIR": os.path.join(inside, ".cache", "pip"),
                     "npm_config_cache": os.path.join(inside, ".cache", "npm"),
                     "BOB_JOBS_DIR": os.path.join(inside, ".bob-jobs")})
        if inside == "/tmp":
            base["TMPDIR"] = "/tmp"
        if abi() == 0:
            base["BOB_ACP_NO_LANDLOCK"] = "1"  # what this Bob was told, the launcher is told too
        return base

    def memory_kills(self) -> int:
        """How many processes of the session the kernel has killed for its shared memory bound."""
        return self._cgroup.kills() if self._cgroup is not None else 0

    def protected(self) -> list[str]:
        """What stays read-only inside the writable folders: each folder's .git (and the git
        directory a .git file names), .bob and AGENTS.md, and Bob's own installation."""
        found: list[str] = []
        for root in self.roots:
            found += [os.path.join(root, name) for name in PROTECTED_NAMES]
            gitdir = _gitdir(os.path.join(root, ".git"))
            if gitdir:
                found.append(gitdir)
        for dot_git in self._nested or ():  # (looked for when its host is made: _start_host)
            found.append(dot_git)
            gitdir = _gitdir(dot_git)
            if gitdir:
                found.append(gitdir)
        mine = [os.path.dirname(os.path.abspath(__file__)), sys.prefix]
        found += [path for path in mine if self._inside(path)]
        return list(dict.fromkeys(found))

    def hidden(self) -> list[str]:
        """What commands must not see: Bob's own secrets (its key files, its config folder but
        its skills, its state folder with the checkpoint key, each root's checkpoint store) and
        tools.sandboxHide; never a path that holds a folder of the session."""
        from bob_acp import bobdir
        from bob_acp import config as config_module

        found = list(self._hide)
        config = os.path.dirname(config_module.default_path(dict(os.environ)))  # (~/.config/bob)
        try:
            found += [os.path.join(config, name) for name in sorted(os.listdir(config)) if name != "skills"]
        except OSError:
            pass
        found += [os.path.join(root, bobdir.NAME, "checkpoints") for root in self.roots]
        roots = [os.path.realpath(root) for root in self.roots]
        return [path for path in dict.fromkeys(found)
                if not any(r == os.path.realpath(path) or r.startswith(os.path.realpath(path).rstrip("/") + "/")
                           for r in roots)]

    def snapshot(self) -> frozenset[str]:
        """The names that run code or instruct Bob later and exist now (a command can create one
        that was missing): each root's .git, .gitmodules and AGENTS.md, and the file a linked
        AGENTS.md names."""
        found = set()
        for root in self.roots:
            for name in PLANTED_NAMES:
                path = os.path.join(root, name)
                if os.path.lexists(path):
                    found.add(path)
            agents = os.path.join(root, "AGENTS.md")
            if os.path.islink(agents):
                target = os.path.realpath(agents)
                if self._inside(target) and os.path.lexists(target):
                    found.add(target)
        return frozenset(found)

    def planted(self, before: frozenset[str]) -> list[str]:
        """What a command (or, `before` being the look after the previous one, a background job of
        an earlier one) created of those names: taken out of the project into .bob/planted, so
        that nothing runs it, and said (one line each)."""
        with self._look_lock:
            said = self._unsaid + [self._take_out(path) for path in sorted(self.snapshot() - before)]
            self._unsaid = []
            self.last_look = self.snapshot()
            self.jobs_after = self.jobs_running()
            self._command_runs = False
        return said

    def planted_since(self) -> list[str]:
        """At a command's start: what a job an earlier command left running created since that
        command ended (taken out, said); what appeared while nothing of the sandbox ran is the
        user's, and stays."""
        with self._look_lock:
            self._command_runs = True
            if self.last_look is None:
                return []
            if not self.jobs_after:
                self.last_look = self.snapshot()
                return []
            said = self._unsaid + [self._take_out(path) for path in sorted(self.snapshot() - self.last_look)]
            self._unsaid = []
            self.last_look = self.snapshot()
        return said

    def _look_between_commands(self) -> None:
        """While no command runs but a job an earlier one left does: what the job plants is taken
        out at once (the user's next `git status` must not find it), told to the user now
        (on_planted) and to the model at the next command."""
        with self._look_lock:
            if self._command_runs or not self.jobs_after or self.last_look is None:
                return
            new = self.snapshot() - self.last_look
            if not new:
                return
            said = [self._take_out(path) for path in sorted(new)]
            self._unsaid += said
            self.last_look = self.snapshot()
        if self.on_planted is not None:
            self.on_planted(said)

    @contextlib.contextmanager
    def bobs_own_write(self) -> Iterator[None]:
        """Around a write of Bob's own file tools (asked, or in a mode the user chose): an
        AGENTS.md it creates while a job runs is Bob's, not the job's."""
        with self._look_lock:
            yield
            if self.last_look is not None:
                self.last_look = self.last_look | self.snapshot()

    def jobs_running(self) -> bool:
        """Whether anything of the sandbox's own still runs (a background job of a command)."""
        if self._host_pid is None:
            return False
        try:
            namespace = os.stat(f"/proc/{self._host_pid}/ns/pid").st_ino
            names = os.listdir("/proc")
        except OSError:
            return False
        count = 0
        for name in names:
            if name.isdigit():
                try:
                    if os.stat(f"/proc/{name}/ns/pid").st_ino == namespace:
                        count += 1
                except OSError:
                    continue
                if count > 1:  # (its init is always there)
                    return True
        return False

    def rest(self) -> list[str]:
        """The turn is over. A sandbox in which nothing of its own runs ends now, so that an idle
        session holds no process and no descriptor in Bob (the next command makes it again, in
        some 70 ms); its processes are gone then, so the look at what they planted is final.
        One where a job still runs stays until the job or the session ends."""
        with self._lock:
            if self._host_pid is None or self._ended:
                return []
            if self.jobs_running():
                self._resting = True  # (the watch ends it once the jobs have ended)
                return []
            last = self.last_look
            self._close_host()
        return self._final_look(last)

    def _end_when_jobs_end(self) -> None:
        """Between turns, once the jobs that kept the sandbox have ended: it ends too, and the
        last look at what they planted is final."""
        with self._lock:
            if not self._resting or self._host_pid is None or self.jobs_running():
                return
            last = self.last_look
            self._close_host()
        said = self._final_look(last)
        if said and self.on_planted is not None:
            self.on_planted(said)

    def _final_look(self, last: frozenset[str] | None) -> list[str]:
        """Once the sandbox has ended (nothing of it can plant any more): what it created of the
        names at the roots since `last`, and any repository it made inside (a `.git` at any depth
        that was not there when the sandbox was made: an editor runs git in each it finds),
        taken out and said."""
        said = self.planted(last) if last is not None else []
        if self._repositories is not None:
            made = [path for root in self.roots for path in nested_repositories(root)
                    if path not in self._repositories]
            said += [self._take_out(path) for path in sorted(made)]
            self._repositories = None
        return said

    def _take_out(self, path: str) -> str:
        from bob_acp import bobdir
        from bob_acp.timestamps import utc_now

        root = next((r for r in self.roots if path == r or path.startswith(r.rstrip("/") + "/")), self.cwd)
        relative = os.path.relpath(path, root)
        kept = os.path.join(root, bobdir.NAME, "planted", utc_now().replace(":", ""), relative)
        try:
            os.makedirs(os.path.dirname(kept), mode=0o700, exist_ok=True)
            os.rename(path, kept)
        except OSError as exc:
            self._say(f"{path} was created by a sandboxed command and could not be taken out: {exc.strerror or exc}")
            return f"{relative} (could not be taken out: {exc.strerror or exc}; check it)"
        self._say(f"{path} was created by a sandboxed command: taken out to {kept}")
        return f"{relative} (taken out to {os.path.relpath(kept, root)})"

    def _inside(self, path: str) -> bool:
        real = os.path.realpath(path)
        return any(real == os.path.realpath(root) or real.startswith(os.path.realpath(root).rstrip("/") + "/")
                   for root in (*self.roots, tempfile.gettempdir()))

    # ---- the host ---------------------------------------------------------------------------------

    def _host(self) -> int | None:
        """The pid of the session's namespace init, starting it at first use; None where there
        are no namespaces (the launcher then confines each command alone)."""
        with self._lock:
            if self._ended:
                raise OSError(0, "the session's sandbox has ended")
            self._resting = False  # (a command of a new turn: the sandbox is at work again)
            if self._host_pid is not None and self._host_alive():
                return self._host_pid
            if self._host_pid is not None:  # ended under Bob (its supervisor was killed): made again
                self._close_host()
                self._say("the session's sandbox had ended (its processes with it); a new one is made")
            if not self.machine.namespaces or self._failed is not None:
                self._make_folder()
                return None
            try:
                self._start_host()
            except OSError as exc:
                self._failed = f"the session's sandbox could not be made: {exc.strerror or exc}"
                self._say(self._failed + "; its commands are confined by Landlock alone")
                return None
            return self._host_pid

    def _make_folder(self) -> None:
        from bob_acp import children

        os.makedirs(self.folder, mode=0o700, exist_ok=True)
        children.keep_on_exit(self.folder)

    def _start_host(self) -> None:
        import json
        import select
        import subprocess

        from bob_acp import bobdir, children

        self._make_folder()
        for root in self.roots:
            try:
                bobdir.ensure(root)  # so that it is there to protect
            except OSError:
                pass
        self._nested = [path for root in self.roots for path in nested_repositories(root)]  # (the user's, now)
        self._repositories = frozenset(self._nested)
        if not self._cgroup_tried:
            self._cgroup_tried = True
            self._cgroup = Cgroup.make(self.owner, self.memory)
            if self._cgroup is not None:
                children.keep_on_exit(self._cgroup.folder)
        command = [sys.executable, *PYTHON_FLAGS, LAUNCHER, "host", "--private-tmp", self.folder,
                   "--processes", str(self.processes), "--memory", str(self.memory)]
        if self._cgroup is not None:
            command += ["--cgroup", self._cgroup.folder]
        for root in self.roots:
            command += ["--write", root]
        for path in self.protected():
            command += ["--protect", path]
        for path in self.hidden():
            command += ["--hide", path]
        for path in self._shown():
            command += ["--show", path]
        if not self.network:
            command.append("--no-network")
        host = children.spawn(command, self.owner or "sandbox", env=_plain_env(), cwd="/",
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        assert host.stdout is not None
        try:
            if not select.select([host.stdout], [], [], HOST_TIMEOUT)[0]:
                raise OSError(0, f"no answer within {HOST_TIMEOUT:g} s")
            line = host.stdout.readline()
            report = json.loads(line) if line else {}
        except ValueError:
            report = {}
        finally:
            host.stdout.close()
        if not report.get("ok"):
            if host.stdin is not None:
                host.stdin.close()
            raise OSError(0, str(report.get("error") or "the sandbox's host ended without a word"))
        self._host_pid = int(report["pid"])
        self._host_in = host.stdin
        self._watch_stop = threading.Event()
        try:
            threads.start(self._watch, f"bob-sandbox-watch {self.owner}", self._host_pid, self._watch_stop)
        except threads.ThreadLimit as exc:
            self._say(f"sockets bound outside while it lives are covered only at its next command: {exc}")
        try:
            self._host_watch = os.pidfd_open(self._host_pid)
        except (AttributeError, OSError):
            self._host_watch = -1
        missed = (report.get("have") or {}).get("missed") or []
        if missed:
            self._say("these cannot be made read-only to commands (links, or no permission): " + ", ".join(missed))

    def _shown(self) -> list[str]:
        """What commands must still see under the real /tmp (the interpreter, its PATH, Bob)."""
        paths = [sys.prefix, sys.base_prefix, os.path.dirname(os.path.abspath(__file__))]
        paths += [p for p in os.environ.get("PATH", "").split(os.pathsep) if os.path.isabs(p)]
        return list(dict.fromkeys(paths))

    def _host_alive(self) -> bool:
        if self._host_watch < 0:
            return True
        import select

        return not select.select([self._host_watch], [], [], 0)[0]

    def _close_host(self) -> None:
        self._watch_stop.set()
        self._resting = False
        if self._host_in is not None:
            try:
                self._host_in.close()  # the init ends, and everything in its namespaces with it
            except OSError:
                pass
        if self._host_watch >= 0:
            os.close(self._host_watch)
        self._host_pid, self._host_in, self._host_watch = None, None, -1

    def end(self) -> None:
        """The session is over: its sandbox ends (every process in it) and its folder goes."""
        import shutil

        from bob_acp import children

        with self._lock:
            alive = self._host_pid is not None
            last = self.last_look if alive and self.jobs_running() else None  # (its jobs may plant until they end)
            self._ended = True
            self._close_host()
        if alive:  # its processes are gone now: the last look, final
            self._final_look(last)
        shutil.rmtree(self.folder, ignore_errors=True)
        children.removed(self.folder)
        if self._cgroup is not None:
            if self._cgroup.remove():
                children.removed(self._cgroup.folder)
            else:  # (the supervisor tries again when Bob ends, and the next Bob after that)
                self._say(f"its cgroup {self._cgroup.folder} still held processes; it is removed later")

    def _say(self, line: str) -> None:
        if self.log is not None:
            self.log.warning(f"[acp] sandbox: {line}")


NESTED_WALK = 20000  # folders a look for repositories inside a root reads at most
SKIPPED_FOLDERS = frozenset({".git", ".bob", "node_modules", ".venv", "venv", "__pycache__", ".tox", "target"})


def nested_repositories(root: str) -> list[str]:
    """The `.git` (folder, or file naming a git directory) of each repository inside `root`,
    submodules included, without following links; the heaviest folders that hold none are
    skipped, and at most NESTED_WALK folders are read."""
    found: list[str] = []
    pending = [root]
    read = 0
    while pending and read < NESTED_WALK:
        folder = pending.pop()
        read += 1
        try:
            with os.scandir(folder) as entries:
                for entry in entries:
                    if entry.name == ".git" and folder != root:
                        found.append(entry.path)
                    elif entry.name not in SKIPPED_FOLDERS and entry.is_dir(follow_symlinks=False):
                        pending.append(entry.path)
        except OSError:
            continue
    return found


def _secrets(cfg: Config) -> list[str]:
    """Bob's own secrets outside its config folder: the key files the configuration names, the
    configuration file itself (headers may hold keys), and Bob's state folder (the checkpoint
    key, the chat's history)."""
    base = os.path.dirname(cfg.source) if cfg.source else os.getcwd()
    found = [cfg.model.apiKeyFile, cfg.source,
             *(entry.get("apiKeyFile") for entry in cfg.models if isinstance(entry, dict))]
    from bob_acp import bobdir

    return [os.path.join(base, os.path.expanduser(p)) for p in found if isinstance(p, str) and p] + [
        bobdir.user_state()]


def _gitdir(dot_git: str) -> str | None:
    """The git directory a `.git` file names (a worktree, a submodule), or None."""
    try:
        if not os.path.isfile(dot_git) or os.path.islink(dot_git):
            return None
        with open(dot_git, encoding="utf-8", errors="replace") as handle:
            first = handle.read(4096).splitlines()[0]
    except (OSError, IndexError):
        return None
    if not first.startswith("gitdir:"):
        return None
    return os.path.normpath(os.path.join(os.path.dirname(dot_git), first[len("gitdir:"):].strip()))


def _plain_env() -> dict[str, str]:
    """The host's environment: only what running Python needs (it passes nothing on)."""
    return {name: value for name, value in os.environ.items()
            if name in ("PATH", "LANG", "LC_ALL", "HOME", "BOB_ACP_NO_LANDLOCK")}


def for_session(cfg: Config, ws: Workspace, owner: str, log: Logger | None = None) -> Sandbox | None:
    """The sandbox of a session's commands, or None when tools.sandbox is off."""
    if cfg.tools.sandbox == "off":
        return None
    return Sandbox(cfg, ws, owner, log)
