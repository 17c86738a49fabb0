"""Bob's sandbox launcher. Standard library only, nothing of Bob imported: it runs as
`python -I -S sandbox_exec.py MODE [options] [-- PROGRAM ARGS…]`, before every sandboxed command.

Modes:

- `probe`: print, as one JSON line, what this machine gives a sandbox (Landlock's ABI, the
  namespaces an unprivileged process may make, a /proc of their own), then exit 0.
- `host`: make a session's sandbox and keep it: a user namespace with a mount namespace, a PID
  namespace, an IPC namespace and (with `--no-network`) a network namespace that has nothing
  but its own loopback. Inside, /tmp is the session's own folder (`--private-tmp`), the
  `--protect` paths are bound read-only, the `--hide` paths are covered (an empty folder no one
  may read, or /dev/null), /run/user/<uid> and /dev/shm are private. One JSON line on
  stdout says what it made (`{"ok": …, "pid": <the namespace's init>, "have": {…}}`); the
  init lives as long as its standard input is open, and everything in the namespace ends with
  it (the kernel kills a PID namespace whose init ends). With `--cgroup FOLDER` it joins the
  session's memory cgroup first; where the kernel has no Landlock, it makes every mount
  read-only but the `--write` folders and its own (`"view": true`).
- `run`: run PROGRAM confined. With `--join PID` it enters the host's namespaces first (covering
  what appeared since: new protected or hidden paths), then forks PROGRAM into them;
  without, it confines itself with what the kernel gives (the fallback where namespaces cannot
  be had). PROGRAM runs with no capabilities, `no_new_privs`, a core limit of 0, the process
  and memory limits given, and Landlock: writes only beneath the `--write` folders (and the
  private ones), no signal to or trace of anything outside its sandbox, no abstract UNIX
  socket outside it (ABI 6), and, outside a network namespace, no TCP (ABI 4); then a seccomp
  filter: no UNIX socket made (unless `--unix-sockets`), no set-user-ID or set-group-ID bit set,
  no io_uring or openat2 (whose arguments no filter can read). With `--view`
  (no Landlock) the host's read-only view confines writes instead; with `--cgroup FOLDER` the
  program is counted in the session's memory cgroup.

Exit status 126 with one line on stderr when the confinement cannot be had (unless
`--best-effort`, which then runs PROGRAM with what could be had).
"""

from __future__ import annotations

import ctypes
import errno
import json
import os
import signal
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:  # (annotations only: the launcher imports nothing it does not run)
    from typing import Any, NoReturn, TypedDict

    from bob_acp.sandbox import confine

    class Options(TypedDict):
        write: list[str]
        protect: list[str]
        show: list[str]
        hide: list[str]
        keep: list[str]
        network: bool
        best_effort: bool
        join: int | None
        view: bool
        cgroup: str | None
        private_tmp: str | None
        processes: int
        memory: int
        unix_sockets: bool
else:  # (run as `python -I -S launcher.py`: -I leaves the script's folder off the path)
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import confine


# ---- the modes ------------------------------------------------------------------------------

def join_cgroup(folder: str) -> bool:
    """Move this process (and so all it starts) into the session's cgroup: its commands share
    one memory bound, which counts /dev/shm's pages too. False when it cannot be."""
    try:
        with open(os.path.join(folder, "cgroup.procs"), "w") as handle:
            handle.write(str(os.getpid()))
        return True
    except OSError:
        return False


def make_namespaces(network: bool) -> int:
    """Enter new namespaces (user, mount, PID for the next child, IPC; network unless allowed)."""
    uid, gid = os.geteuid(), os.getegid()
    flags = confine.CLONE_NEWUSER | confine.CLONE_NEWNS | confine.CLONE_NEWPID | confine.CLONE_NEWIPC | (0 if network else confine.CLONE_NEWNET)
    after_unshare = confine.map_every_id_from_outside() if uid == 0 and gid == 0 else None
    unshared = confine.libc.unshare(flags) == 0
    number = ctypes.get_errno()
    if after_unshare is not None and after_unshare(unshared):
        return uid
    if not unshared:
        raise OSError(number, f"unshare: {os.strerror(number)}")
    confine.write_maps(uid, gid)
    return uid


NAMESPACE_ERRORS = {
    errno.EPERM: "this machine does not let an unprivileged process make a user namespace (a sysctl such as "
                 "kernel.unprivileged_userns_clone = 0 or kernel.apparmor_restrict_unprivileged_userns = 1, or a "
                 "container's seccomp profile)",
    errno.ENOSPC: "user namespaces are switched off here, or all used (user.max_user_namespaces)",
    errno.EINVAL: "this kernel has no user namespaces",
    errno.ENOSYS: "this kernel has no user namespaces",
    errno.EUSERS: "user namespaces are nested as deep as the kernel allows",
}


def namespace_words(exc: OSError) -> str:
    """Why the namespaces could not be made, in words (the errno alone says nothing to a person)."""
    words = NAMESPACE_ERRORS.get(exc.errno or 0)
    return f"{words} ({exc})" if words else str(exc)


def set_up_inside(options: Options, uid: int) -> dict[str, Any]:
    """In the new namespaces, as their init: the view a sandboxed command gets. Returns `have`."""
    have: dict[str, Any] = {"proc": False, "pid_max": False, "private_tmp": False, "loopback": None,
                             "protected": True, "missed": []}
    confine.mount(None, "/", None, confine.MS_REC | confine.MS_SLAVE)  # nothing made here reaches the machine's mounts
    tmp = os.path.realpath("/tmp")
    if options["private_tmp"] and not any(tmp == r or tmp.startswith(r.rstrip("/") + "/")
                                           for r in map(os.path.realpath, options["write"])):
        visible = [(path, True) for path in options["write"]] + [(path, False) for path in options["show"]]
        confine.private_tmp(options["private_tmp"], visible)
        have["private_tmp"] = True
    try:
        confine.mount("proc", "/proc", "proc", confine.MS_NOSUID | confine.MS_NODEV | confine.MS_NOEXEC)
        have["proc"] = True
    except OSError as exc:
        have["proc_error"] = str(exc)
    if have["proc"] and options["processes"]:
        try:
            with open("/proc/sys/kernel/pid_max", "w") as handle:
                handle.write(str(options["processes"] + confine.RESERVED_PIDS))
            have["pid_max"] = True
        except OSError:
            pass
    have["private_dirs"] = confine.private_dirs(uid, options["memory"])
    have["missed"] = confine.protect(options["protect"])
    have["unhidden"] = confine.hide(options["hide"], options["keep"])
    if confine.landlock_abi() < 1:
        own = ["/tmp"] if have["private_tmp"] else []
        left = confine.read_only_view(options["write"], own + have["private_dirs"])
        have["view"] = not left
        if left:
            have["view_error"] = "these mounts could not be made read-only: " + ", ".join(left[:5])
    if not options["network"]:
        try:
            confine.loopback_up()
            have["loopback"] = True
        except OSError:
            have["loopback"] = False
    return have


def host(options: Options, probe: bool = False) -> int:
    """Make a session's sandbox; print what was made; its init lives until stdin ends."""
    in_cgroup = join_cgroup(options["cgroup"]) if options["cgroup"] else None
    sync_r, sync_w = os.pipe()
    try:
        uid = make_namespaces(options["network"])
        init = os.fork()
    except OSError as exc:
        print(json.dumps({"ok": False, "error": namespace_words(exc), "landlock": confine.landlock_abi()}), flush=True)
        return 0 if probe else confine.NOT_CONFINED
    if init == 0:
        os.close(sync_r)
        try:
            report: dict[str, Any] = {"ok": True, "have": set_up_inside(options, uid)}
            if probe:
                report["have"]["seccomp"] = confine.seccomp_works()
        except Exception as exc:  # noqa: BLE001  (said to Bob, which then confines with what it can have)
            report = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
        os.write(sync_w, json.dumps(report).encode())
        os.close(sync_w)
        if probe or not report["ok"]:
            os._exit(0)
        be_init()
    os.close(sync_w)
    data = b""
    while True:
        chunk = os.read(sync_r, 65536)
        if not chunk:
            break
        data += chunk
    said: dict[str, Any] = (json.loads(data) if data else
                            {"ok": False, "error": "the sandbox's init ended during its set-up"})
    report = said
    report["pid"] = init
    report["landlock"] = confine.landlock_abi()
    if in_cgroup is not None:
        report.setdefault("have", {})["cgroup"] = in_cgroup
    print(json.dumps(report), flush=True)
    if probe:
        os.waitpid(init, 0)
    return 0 if report["ok"] or probe else confine.NOT_CONFINED


def be_init() -> NoReturn:
    """PID 1 of the session's namespace: children reaped by the kernel (SIGCHLD ignored), alive
    until Bob closes its standard input; then everything in the namespace ends with it."""
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 1)
    os.dup2(null, 2)
    os.close(null)
    os.closerange(3, 65536)
    # What stays for the session's life is `cat` (about a megabyte, not an interpreter's eleven):
    # it reads the standard input until Bob closes it, and the ignored SIGCHLD, which exec keeps,
    # has the kernel reap the namespace's orphans. Where there is no cat, this loop does the same.
    try:
        os.execvp("cat", ["cat"])
    except OSError:
        pass
    while True:
        try:
            if not os.read(0, 4096):
                break
        except InterruptedError:
            continue
        except OSError:
            break
    os._exit(0)


def enter(pid: int) -> int:
    """Enter the namespaces of process `pid` that differ from this one's (user first)."""
    flags = 0
    for name, flag in confine.NAMESPACES:
        try:
            if os.stat(f"/proc/{pid}/ns/{name}").st_ino != os.stat(f"/proc/self/ns/{name}").st_ino:
                flags |= flag
        except OSError:
            continue
    if not flags & confine.CLONE_NEWUSER:
        raise confine.Refused(f"no sandbox to join at process {pid}")
    try:
        pidfd = os.pidfd_open(pid)
    except (AttributeError, OSError):
        pidfd = -1
    if pidfd >= 0:
        try:
            if confine.libc.setns(pidfd, flags) == 0:
                return flags
        finally:
            os.close(pidfd)
    for name, flag in confine.NAMESPACES:  # (kernels before 5.8: one namespace at a time)
        if flags & flag:
            fd = os.open(f"/proc/{pid}/ns/{name}", os.O_RDONLY)
            try:
                confine.checked(confine.libc.setns(fd, flag), f"setns({name})")
            finally:
                os.close(fd)
    return flags


def enter_and_cover(options: Options) -> tuple[int, set[str]]:
    """Enter the session's sandbox (`--join`), covering first what appeared since it was made:
    paths to protect or hide made later (a key written since). Returns the namespaces entered
    and the mount points there."""
    join = options["join"]
    if join is None:
        raise confine.Refused("no sandbox to join (--join)")
    mounted = confine.mount_points(join)
    cwd = os.getcwd()
    try:
        flags = enter(join)
    except (OSError, confine.Refused) as exc:
        raise confine.Refused(f"cannot enter the session's sandbox: {exc}") from None
    os.chdir(cwd)  # (entering a mount namespace moves a process to its root)
    confine.protect(options["protect"], mounted)
    confine.hide(options["hide"], options["keep"], mounted)
    return flags, mounted


def run(options: Options, program: list[str]) -> int:
    """Run `program` confined; returns the exit status for this process."""
    folders = list(options["write"])
    deny_tcp = not options["network"]
    if options["join"]:
        if options["cgroup"]:
            join_cgroup(options["cgroup"])  # (before the fork: the program is counted with the rest)
        flags, mounted = enter_and_cover(options)
        if not options["network"] and not flags & confine.CLONE_NEWNET:
            # A sandbox made with the network, for a command of a session that has turned it off
            # since: a network namespace of its own, with a loopback alone (else Landlock's TCP denial).
            if confine.libc.unshare(confine.CLONE_NEWNET) == 0:
                flags |= confine.CLONE_NEWNET
                try:
                    confine.loopback_up()
                except OSError:
                    pass
        deny_tcp = deny_tcp and not flags & confine.CLONE_NEWNET
        folders += [d for d in ("/tmp", f"/run/user/{os.geteuid()}", *confine.PRIVATE_DIRS) if d in mounted]
        return run_inside(options, program, folders, deny_tcp)
    # No namespace of its own: what Landlock gives. (No process limit: outside a user namespace
    # RLIMIT_NPROC counts every process of the user, not the command's.)
    confine.set_limits(0, options["memory"])
    confine.drop_capabilities()
    confine.landlock(folders, deny_tcp, options["best_effort"])
    filtered(options)
    exec_program(program)
    return 0  # not reached


def run_inside(options: Options, program: list[str], folders: list[str], deny_tcp: bool) -> int:
    """Fork `program` into the namespace entered (a PID namespace takes only new children);
    wait for it and end as it did."""
    try:
        child = os.fork()
    except OSError as exc:
        if exc.errno == errno.EAGAIN:
            raise confine.Refused("the session's sandbox holds as many processes as tools.limits.processes allows") from None
        raise
    if child == 0:
        try:
            confine.set_limits(options["processes"], options["memory"])
            confine.drop_capabilities()
            if options["view"]:
                confined_by_view()
            else:
                confine.landlock(folders, deny_tcp, options["best_effort"])
            filtered(options)
            exec_program(program)
        except (OSError, confine.Refused) as exc:
            sys.stderr.write(f"bob sandbox: {exc}: not run\n")
            sys.stderr.flush()
        os._exit(confine.NOT_CONFINED)
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT):
        signal.signal(sig, lambda number, _frame: os.kill(child, number))
    while True:
        try:
            _, status = os.waitpid(child, 0)
            break
        except InterruptedError:
            continue
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        signal.signal(number, signal.SIG_DFL)
        os.kill(os.getpid(), number)
        return 128 + number
    return os.waitstatus_to_exitcode(status)


def confined_by_view() -> None:
    """No Landlock: the host's read-only view confines writes (read_only_view); it is checked
    here, and no program may gain privileges (setuid) in it."""
    if not os.statvfs("/").f_flag & os.ST_RDONLY:
        raise confine.Refused("the sandbox's read-only view is not there")
    if confine.libc.prctl(confine.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise confine.Refused(f"prctl(NO_NEW_PRIVS) failed: {os.strerror(ctypes.get_errno())}")


def filtered(options: Options) -> None:
    """The seccomp filter, last before the program runs (Refused without it, but best-effort)."""
    try:
        confine.seccomp(options["unix_sockets"])
    except confine.Refused:
        if not options["best_effort"]:
            raise


def exec_program(program: list[str]) -> NoReturn:
    try:
        os.execvp(program[0], program)
    except OSError as exc:
        sys.stderr.write(f"bob sandbox: cannot run {program[0]}: {exc.strerror}\n")
        os._exit(127)


VALUED = ("--write", "--protect", "--show", "--hide", "--keep", "--join", "--processes", "--memory", "--private-tmp", "--cgroup")


def parse(argv: list[str]) -> tuple[str, Options, list[str]]:
    options: Options = {"write": [], "protect": [], "show": [], "hide": [], "keep": [], "network": True, "best_effort": False,
                        "join": None, "view": False, "cgroup": None, "private_tmp": None, "processes": 0, "memory": 0,
                        "unix_sockets": False}
    if not argv or argv[0] not in ("probe", "host", "run"):
        raise SystemExit("bob sandbox: the first argument is probe, host or run")
    mode, index = argv[0], 1
    flags = {"--no-network": ("network", False), "--best-effort": ("best_effort", True), "--view": ("view", True),
             "--unix-sockets": ("unix_sockets", True)}
    while index < len(argv) and argv[index] != "--":
        item, value = argv[index], argv[index + 1] if index + 1 < len(argv) else None
        if item in flags:
            options[flags[item][0]] = flags[item][1]  # type: ignore[literal-required]
            index += 1
            continue
        if item not in VALUED:
            raise SystemExit(f"bob sandbox: unknown option {item}")
        if value is None:
            raise SystemExit(f"bob sandbox: {item} needs a value")
        if item in ("--write", "--protect", "--show", "--hide", "--keep"):
            options[item[2:]].append(value)  # type: ignore[literal-required]
        elif item in ("--join", "--processes", "--memory"):
            options[item[2:]] = int(value)  # type: ignore[literal-required]
        elif item == "--private-tmp":
            options["private_tmp"] = value
        else:
            options["cgroup"] = value
        index += 2
    return mode, options, argv[index + 1:]


def main(argv: list[str]) -> int:
    mode, options, program = parse(argv)
    if mode == "probe":
        import tempfile

        private = options["private_tmp"] = tempfile.mkdtemp(prefix="bob-probe-")
        options["processes"] = 1024
        parent = os.open(os.path.dirname(private), os.O_PATH | os.O_DIRECTORY)
        try:
            return host(options, probe=True)
        finally:  # (through the folder's descriptor: this process now sees a /tmp of the sandbox's)
            os.rmdir(os.path.basename(private), dir_fd=parent)
            os.close(parent)
    if mode == "host":
        return host(options)
    if not program:
        sys.stderr.write("bob sandbox: no program to run\n")
        return 2
    try:
        return run(options, program)
    except confine.Refused as exc:
        if options["best_effort"] and not options["join"]:
            exec_program(program)
        sys.stderr.write(f"bob sandbox: {exc}: not run\n")
        return confine.NOT_CONFINED


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
