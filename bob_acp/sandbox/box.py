"""One session's sandbox (`Sandbox`): its host made at a turn's first command and ended with the
turn when nothing of it runs, the launcher command each command starts with, what is protected
and hidden in it, the look at what its commands and their jobs plant, and the watch while it
lives (sockets bound outside, plants between commands, jobs that end)."""

from __future__ import annotations

import contextlib
import itertools
import os
import sys
import tempfile
import threading

from bob_acp import threads
from bob_acp.sandbox.cgroup import Cgroup
from bob_acp.sandbox.children import PYTHON_FLAGS
from bob_acp.sandbox.kernel import LAUNCHER, PROBE_TIMEOUT, Coverage, abi, coverage, limits_of, machine
from bob_acp.sandbox.names import PLANTED_NAMES, PROTECTED_NAMES, gitdir, nested_repositories, secrets_of

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from typing import Any

    from bob_acp.config import Config
    from bob_acp.files.workspace import Workspace
    from bob_acp.log import Logger

HOST_TIMEOUT = 15.0
SOCKET_WATCH = 0.25  # seconds between looks for a socket bound outside while a sandbox lives
NAMESPACES_EVERY = 16  # looks between two walks of /proc for network namespaces


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
        self._hide = secrets_of(cfg) + [os.path.abspath(os.path.expanduser(p)) for p in cfg.tools.sandboxHide]

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

    def set_network(self, on: bool) -> str:
        """The session's choice of network for its commands, from the next one (its own, on an
        editor's switch); what is said of it. Off: a command joining a sandbox made with the
        network gets a network namespace of its own. On: a sandbox made without it ends (idle)
        or, while a job of it runs, stays for the job, and the network comes with the next one."""
        with self._lock:
            if on == self.network:
                return ""
            self.network = on
            self.machine = machine(on)
            self.coverage = Coverage(self.machine, on, self.processes, self.memory)
            kept = on and self._host_pid is not None and self._host_alive() and self.jobs_running()
            closed = on and not kept and self._host_pid is not None
            last = self.last_look
            if closed:
                self._close_host()
        if closed:  # (nothing of it runs any more: the look at what it planted is final)
            said = self._final_look(last)
            if said and self.on_planted is not None:
                self.on_planted(said)
        if not on:
            return "off for this session's commands, from the next one"
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
        from bob_acp.sandbox import confine

        try:
            namespace = os.stat(f"/proc/{pid}/ns/pid").st_ino
        except OSError:
            return
        tables = confine.network_namespaces()
        seen = {inode for _path, inode in confine.listening_sockets(tables)}
        for look in itertools.count(1):
            if stop.wait(SOCKET_WATCH):
                return
            try:
                if look % NAMESPACES_EVERY == 0:  # (walks of /proc, now and then: a new container, jobs ended)
                    tables = confine.network_namespaces()
                    self._end_when_jobs_end()
                    if stop.is_set():
                        return
                self._look_between_commands()
                now = {inode for _path, inode in confine.listening_sockets(tables)}
                if now - seen and set(confine.socket_holders(now - seen, namespace)) != now - seen:
                    self._cover(pid)  # (not all of them the sandbox's own)
                seen = now
            except Exception as exc:  # noqa: BLE001  (one bad round must not end the watch for good)
                self._say(f"its watch failed a round: {exc!r}")

    def _cover(self, pid: int) -> None:
        """The launcher's cover mode: what appeared outside since, covered in the sandbox."""
        import subprocess

        command = [sys.executable, *PYTHON_FLAGS, LAUNCHER, "cover", *self._joining(pid)]
        try:
            subprocess.run(command, env=_plain_env(), cwd="/", stdin=subprocess.DEVNULL,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=HOST_TIMEOUT)
        except (OSError, subprocess.SubprocessError):
            pass

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

    def hidden(self) -> list[str]:
        """What commands must not see: Bob's own secrets (its key files, its config folder but
        its skills, its state folder with the checkpoint key, each root's checkpoint store) and
        tools.sandboxHide; never a path that holds a folder of the session."""
        from bob_acp import config as config_module
        from bob_acp.files import bobdir

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
            said = self._take_out_since(before)
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
            return self._take_out_since(self.last_look)

    def _take_out_since(self, before: frozenset[str]) -> list[str]:
        """(Under _look_lock.) The names made since `before`, taken out; with what the watch took
        out meanwhile, what the model is told now."""
        said = self._unsaid + [self._take_out(path) for path in sorted(self.snapshot() - before)]
        self._unsaid = []
        self.last_look = self.snapshot()
        return said

    def _look_between_commands(self) -> None:
        """While no command runs but a job an earlier one left does: what the job plants is taken
        out at once (the user's next `git status` must not find it), told to the user now
        (on_planted) and to the model at the next command."""
        if not self._look_lock.acquire(blocking=False):
            return  # (a command's look, or a write of Bob's waiting on the editor: the next round looks)
        try:
            if self._command_runs or not self.jobs_after or self.last_look is None:
                return
            new = self.snapshot() - self.last_look
            if not new:
                return
            said = [self._take_out(path) for path in sorted(new)]
            self._unsaid += said
            self.last_look = self.snapshot()
        finally:
            self._look_lock.release()
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
        return self._end_if_idle(kept_for_jobs=False)

    def _end_when_jobs_end(self) -> None:
        """Between turns, once the jobs that kept the sandbox have ended: it ends too, and the
        last look at what they planted is final."""
        said = self._end_if_idle(kept_for_jobs=True)
        if said and self.on_planted is not None:
            self.on_planted(said)

    def _end_if_idle(self, kept_for_jobs: bool) -> list[str]:
        """The host ended when nothing of it runs but its init, and the final look's lines;
        `kept_for_jobs`: only a host rest() kept for its jobs (a new turn's command took it back)."""
        with self._lock:
            if self._host_pid is None or self._ended or (kept_for_jobs and not self._resting):
                return []
            if self.jobs_running():
                self._resting = True  # (the watch ends it once the jobs have ended)
                return []
            last = self.last_look
            self._close_host()
        return self._final_look(last)

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
        from bob_acp.files import bobdir
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
        from bob_acp.sandbox import children

        os.makedirs(self.folder, mode=0o700, exist_ok=True)
        children.keep_on_exit(self.folder)

    def _start_host(self) -> None:
        import json
        import select
        import subprocess

        from bob_acp.files import bobdir
        from bob_acp.sandbox import children

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

        from bob_acp.sandbox import children

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
