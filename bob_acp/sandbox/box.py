"""One session's sandbox (`Sandbox`): its host made at a turn's first command and ended with the
turn when nothing of it runs, the launcher command each command starts with, what is protected,
reserved and hidden in it, and the look at what its commands make that no kernel can refuse by
name (a repository or an AGENTS.md below a root).

What it prevents, the kernel refuses (launcher.py, confine.py): the names at the roots are
read-only or reserved (reserve.py), sockets and set-ID bits refused by seccomp. What it cannot
prevent is said at once: a name a command made below a root is taken out when the command ends;
one that appeared while only a job ran is left (the user may have made it) and doubted."""

from __future__ import annotations

import contextlib
import os
import stat
import sys
import tempfile
import threading

from bob_acp import threads
from bob_acp.processes.children import PYTHON_FLAGS
from bob_acp.sandbox.cgroup import Cgroup
from bob_acp.sandbox.kernel import LAUNCHER, PROBE_TIMEOUT, Coverage, abi, coverage, limits_of, machine
from bob_acp.sandbox.names import (
    PLANTED_NAMES,
    PROTECTED_NAMES,
    Signature,
    gitdir,
    nested_repositories,
    secrets_of,
)
from bob_acp.sandbox.plants import Plants

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    from bob_acp.config import Config
    from bob_acp.files.workspace import Workspace
    from bob_acp.log import Logger
    from bob_acp.sandbox.reserve import Reservation

HOST_TIMEOUT = 15.0
HELD_NAMES = frozenset(PROTECTED_NAMES + PLANTED_NAMES)  # at a root: read-only or reserved inside
JOBS_WATCH = 1.0  # seconds between looks whether the jobs a resting sandbox was kept for have ended


class Sandbox:
    """One session's sandbox: made at a turn's first command, ended at the turn's end when no job
    of it runs (else when the job or the session ends)."""

    def __init__(self, cfg: Config, ws: Workspace, owner: str, log: Logger | None = None):
        self.roots = ws.roots
        self.cwd = ws.cwd
        self.network = bool(cfg.tools.sandboxNetwork)
        self.unix_sockets = cfg.tools.sandboxUnixSockets == "allow"
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
        self._host_network = self.network  # whether the current host was made with the network
        self._failed: str | None = None
        self._unreserved: list[str] = []  # why names could not be reserved (its commands are asked)
        self._ended = False
        self.plants = Plants(self.roots, self.cwd, self._say)  # what its commands make below a root
        self._nested: list[str] | None = None  # the .git of each repository inside a root (submodules too)
        self._resting = False  # kept after its turn for a job still running (ended when the jobs end)
        self._watching = False  # a thread looks whether the jobs a resting sandbox was kept for have ended
        self._watch_stop = threading.Event()  # set: that thread ends
        self._reservation: Reservation | None = None  # the names reserved while its host lives
        self.on_planted: Callable[[list[str]], None] | None = None  # the user told at once (the session's news)
        self._cgroup: Cgroup | None = None  # the memory its commands share (made with its first host)
        self._cgroup_tried = False
        self._hide = secrets_of(cfg) + [os.path.abspath(os.path.expanduser(p)) for p in cfg.tools.sandboxHide]

    # ---- what it is ---------------------------------------------------------------------------

    @property
    def confines(self) -> bool:
        return self.coverage.confines

    @property
    def complete(self) -> bool:
        return self.coverage.complete and self._failed is None and not self.unheld()

    def unasked(self) -> bool:
        """Whether `sandboxed` mode may run a command in it without asking: all it promises
        holds here, or the user chose best-effort and something confines."""
        return self.complete or (self.best_effort and self.confines)

    def partial(self) -> str | None:
        """What it lacks, in one line (None: nothing)."""
        missing = list(self.coverage.missing) + ([self._failed] if self._failed else []) + self.unheld()
        return "; ".join(missing) or None

    @property
    def own_tmp(self) -> bool:
        """Whether its commands see a /tmp of their own (the machine's /tmp is not theirs)."""
        return self._host_pid is not None and self.machine.private_tmp

    def refusal(self) -> str | None:
        """The result of a command refused because nothing can confine it (None: it runs)."""
        if self.confines or self.best_effort:
            return None
        return ("[not run: the sandbox (tools.sandbox: workspace) cannot be had here: "
                f"{self.partial() or 'this kernel has no Landlock'}. With tools.sandbox: best-effort, commands run "
                "with what the kernel offers; or run the command with \"unconfined\": true, which asks the user]")

    def set_network(self, on: bool) -> str:
        """The session's choice of network for its commands, from the next one (its own, on an
        editor's switch); what is said of it. Off: a sandbox made with the network ends now, with
        every job it still runs (a job keeps the network it started with: a relay for later
        commands). On: a sandbox made without it ends (idle) or, while a job of it runs, stays
        for the job, and the network comes with the next one."""
        with self._lock:
            if on == self.network:
                return ""
            self.network = on
            self.machine = machine(on)
            self.coverage = Coverage(self.machine, on, self.processes, self.memory, self.unix_sockets)
            alive = self._host_pid is not None and self._host_alive()
            jobs = alive and self.jobs_running()
            kept = on and jobs
            # (off: a host made with the network ends, its jobs with it; on: one without, if idle)
            closed = self._host_pid is not None and (not kept if on else self._host_network)
            if closed:
                self._close_host()
        if closed:  # (nothing of it runs any more: the look at what it made is final)
            said = self._final_look()
            if said and self.on_planted is not None:
                self.on_planted(said)
        if not on:
            ended = (", and the jobs still running in the sandbox, which had the network, were ended"
                     if jobs and closed else "")
            return f"off for this session's commands, from the next one{ended}"
        if kept:
            return ("on for this session's commands once the job still running in the sandbox has ended: until "
                    "then, commands join it, without the network")
        return "on for this session's commands, from the next one"

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
        if self.unix_sockets:
            launcher.append("--unix-sockets")
        if self.best_effort:
            launcher.append("--best-effort")
        return launcher + ["--memory", str(self.memory), "--", *argv]

    def _joining(self, pid: int) -> list[str]:
        """The launcher's options to enter the sandbox, covering what appeared since it was made."""
        return ["--join", str(pid), *self._guarding()]

    def _guarding(self) -> list[str]:
        """The launcher's options for what is protected and hidden."""
        options: list[str] = []
        for path in self.protected():
            options += ["--protect", path]
        hidden, kept = self.hidden()
        for path in hidden:
            options += ["--hide", path]
        for path in kept:
            options += ["--keep", path]
        return options

    def environment(self, env: dict[str, Any] | None) -> dict[str, Any]:
        """The environment a sandboxed command gets: its caches, temporary files and jobs in the
        sandbox's own folder (its /tmp, inside the namespaces)."""
        base = dict(os.environ if env is None else env)
        inside = "/tmp" if self.own_tmp else self.folder
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
        directory a .git file names), .bob, AGENTS.md and .gitmodules (reserved while missing),
        what a linked one leads to inside a root, the repositories inside, and Bob's own
        installation."""
        found: list[str] = []
        for root in self.roots:
            for name in dict.fromkeys(PROTECTED_NAMES + PLANTED_NAMES):
                path = os.path.join(root, name)
                found.append(path)
                if os.path.islink(path) and self._inside_root(os.path.realpath(path)):
                    found.append(os.path.realpath(path))  # (AGENTS.md -> CLAUDE.md: CLAUDE.md read-only too)
            named = gitdir(os.path.join(root, ".git"))
            if named:
                found.append(named)
        for dot_git in self._nested or ():  # (looked for when its host is made: _start_host)
            found.append(dot_git)
            named = gitdir(dot_git)
            if named:
                found.append(named)
        mine = [os.path.dirname(os.path.abspath(__file__)), sys.prefix]
        found += [path for path in mine if self._inside(path)]
        return list(dict.fromkeys(found))

    def unheld(self) -> list[str]:
        """Why a protected name at a root cannot be held here (said; its commands are asked): a
        link leading out of the session's folders, whose target no bind inside them can cover, or
        a name that could not be reserved."""
        found = list(self._unreserved)
        for root in self.roots:
            for name in dict.fromkeys(PROTECTED_NAMES + PLANTED_NAMES):
                path = os.path.join(root, name)
                if os.path.islink(path) and not self._inside_root(os.path.realpath(path)):
                    found.append(f"{path} is a link to {os.path.realpath(path)}, outside the session's folders: it "
                                 "cannot be made read-only to commands, so they are asked")
        return found

    def hidden(self) -> tuple[list[str], list[str]]:
        """(what commands must not see, what stays visible inside it): Bob's own secrets (its key
        files, its config folder but its skills, its state folder with the checkpoint key, each
        root's checkpoint store) and tools.sandboxHide; a file by its whole folder where that
        folder is its own (~/.docker for ~/.docker/config.json), so that a file saved over it by
        a rename stays hidden; never a path that holds a folder of the session."""
        from bob_acp import config as config_module
        from bob_acp.files import bobdir

        config = os.path.dirname(config_module.default_path(dict(os.environ)))  # (~/.config/bob)
        found = [config] + [self._folder_of(path) for path in self._hide]
        found += [os.path.join(root, bobdir.NAME, "checkpoints") for root in self.roots]
        roots = [os.path.realpath(root) for root in self.roots]
        hidden = [path for path in dict.fromkeys(found)
                  if not any(r == os.path.realpath(path) or r.startswith(os.path.realpath(path).rstrip("/") + "/")
                             for r in roots)]
        return hidden, [os.path.join(config, "skills")]

    def _folder_of(self, path: str) -> str:
        """A hidden file's folder when that folder is a program's own (at least two deep, not the
        home folder or one above it, holding no folder of the session), else the file itself."""
        if not os.path.isfile(path):
            return path
        real = os.path.realpath(os.path.dirname(path))
        above = [os.path.realpath(os.path.expanduser("~")), *map(os.path.realpath, self.roots)]
        if real.count("/") < 2 or any(p == real or p.startswith(real.rstrip("/") + "/") for p in above):
            return path
        return real

    def before_command(self) -> tuple[list[str], dict[str, Signature]]:
        """At a command's start: what a job an earlier one left made since (said); the look."""
        return self.plants.before(self._unheld)

    def after_command(self, before: dict[str, Signature]) -> list[str]:
        """At a command's end: what it made below a root, taken out and said."""
        return self.plants.after(before, self._unheld, self.jobs_running)

    def bobs_own_write(self) -> contextlib.AbstractContextManager[None]:
        """Around a write of Bob's own file tools: what it writes is Bob's, not a job's."""
        return self.plants.own_write()

    def _unheld(self, paths: list[str], before: dict[str, Signature]) -> list[str]:
        """Those of `paths` a command could have written: not a name at a root that the host holds
        read-only or reserved (what changed there is the user's or Bob's own), unless it was a
        link (only its target is held) or the name could not be reserved."""
        if self._host_pid is None and self._reservation is None:
            return paths  # (no namespaces: nothing is held)
        missed = " ".join(self._reservation.missed) if self._reservation is not None else ""
        return [path for path in paths
                if not (os.path.dirname(path) in self.roots and os.path.basename(path) in HELD_NAMES
                        and not stat.S_ISLNK(before.get(path, (0,))[0]) and path not in missed)]

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
        some 70 ms). One where a job still runs stays until the job or the session ends (a
        thread looks every JOBS_WATCH seconds whether they have)."""
        with self._lock:
            if self._host_pid is None or self._ended:
                return []
            if self.jobs_running():
                self._resting = True
                if not self._watching:
                    self._watching = True
                    self._watch_stop = threading.Event()
                    try:
                        threads.start(self._watch_jobs, f"bob-sandbox-jobs {self.owner}", self._host_pid)
                    except threads.ThreadLimit:
                        self._watching = False  # (it ends at the next turn's end, or the session's)
                return []
            self._close_host()
        return self._final_look()

    def _watch_jobs(self, pid: int) -> None:
        """While the sandbox rests for a job: once nothing of it runs, it ends, and what its jobs
        made is said to the user at once (on_planted)."""
        try:
            while not self._watch_stop.wait(JOBS_WATCH):
                with self._lock:
                    if self._host_pid != pid or not self._resting or self._ended:
                        return
                    if self.jobs_running():
                        continue
                    self._close_host()
                said = self._final_look()
                if said and self.on_planted is not None:
                    self.on_planted(said)
                return
        finally:
            self._watching = False

    def _final_look(self) -> list[str]:
        """Once the sandbox has ended (nothing of it can write any more): what its jobs made since
        the last command, doubted and said; its placeholders released (those someone wrote to
        since are theirs: said)."""
        return self.plants.final(self._unheld) + [
            f"{self.plants.relative(path)} (made empty to reserve the name while the sandbox lived, and written "
            "since: left as it is)" for path in self._release()]

    def _inside_root(self, real: str) -> bool:
        return any(real == os.path.realpath(root) or real.startswith(os.path.realpath(root).rstrip("/") + "/")
                   for root in self.roots)

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
        from bob_acp.processes import children

        os.makedirs(self.folder, mode=0o700, exist_ok=True)
        children.keep_on_exit(self.folder)

    def _start_host(self) -> None:
        import json
        import select
        import subprocess

        from bob_acp.files import bobdir
        from bob_acp.processes import children

        self._make_folder()
        for root in self.roots:
            try:
                bobdir.ensure(root)  # so that it is there to protect
            except OSError:
                pass
        self._nested = [path for root in self.roots for path in nested_repositories(root)]  # (the user's, now)
        self._unreserved = []
        self._reserve()
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
        command += self._guarding()
        for path in self._shown():
            command += ["--show", path]
        if not self.network:
            command.append("--no-network")
        try:
            host = children.spawn(command, self.owner or "sandbox", env=_plain_env(), cwd="/",
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        except OSError:
            self._release()
            raise
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
            self._release()
            raise OSError(0, str(report.get("error") or "the sandbox's host ended without a word"))
        self._host_pid = int(report["pid"])
        self._host_in = host.stdin
        self._host_network = self.network
        try:
            self._host_watch = os.pidfd_open(self._host_pid)
        except (AttributeError, OSError):
            self._host_watch = -1
        missed = (report.get("have") or {}).get("missed") or []
        if missed:
            self._say("these cannot be made read-only to commands (links, or no permission): " + ", ".join(missed))

    def _reserve(self) -> None:
        """The protected names missing at the roots reserved for the host's life (reserve.py);
        one that cannot be is said, and makes the sandbox ask."""
        from bob_acp.files import bobdir
        from bob_acp.sandbox import reserve

        try:
            self._reservation = reserve.reserve(bobdir.user_state(), self.owner or "session", self.roots)
        except OSError as exc:
            self._unreserved.append(f"the names .git, .gitmodules and AGENTS.md could not be reserved: "
                                    f"{exc.strerror or exc}")
            return
        if self._reservation.missed:
            self._unreserved.append("these names cannot be reserved, so a command could create them: "
                                    + ", ".join(self._reservation.missed))

    def _release(self) -> list[str]:
        """The reserved names given back (those someone wrote to meanwhile are theirs: left)."""
        if self._reservation is None:
            return []
        left = self._reservation.release()
        self._reservation = None
        return left

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
        """The host ended, and waited for: its init ends once every process of its namespace has
        (the kernel kills them all), so nothing of it writes after this returns."""
        import select

        self._resting = False
        self._watch_stop.set()
        if self._host_in is not None:
            try:
                self._host_in.close()  # the init ends, and everything in its namespaces with it
            except OSError:
                pass
        if self._host_watch >= 0:
            if not select.select([self._host_watch], [], [], HOST_TIMEOUT)[0]:
                self._say(f"its processes had not all ended {HOST_TIMEOUT:g} s after it was closed")
            os.close(self._host_watch)
        self._host_pid, self._host_in, self._host_watch = None, None, -1

    def end(self) -> None:
        """The session is over: its sandbox ends (every process in it) and its folder goes."""
        import shutil

        from bob_acp.processes import children

        with self._lock:
            alive = self._host_pid is not None
            self._ended = True
            self._close_host()
        if alive:  # its processes are gone now: the last look, final
            said = self._final_look()
            if said and self.on_planted is not None:
                self.on_planted(said)
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


def _plain_env() -> dict[str, str]:
    """The host's environment: only what running Python needs (it passes nothing on)."""
    return {name: value for name, value in os.environ.items()
            if name in ("PATH", "LANG", "LC_ALL", "HOME", "BOB_ACP_NO_LANDLOCK")}


def for_session(cfg: Config, ws: Workspace, owner: str, log: Logger | None = None) -> Sandbox | None:
    """The sandbox of a session's commands, or None when tools.sandbox is off."""
    if cfg.tools.sandbox == "off":
        return None
    return Sandbox(cfg, ws, owner, log)


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
