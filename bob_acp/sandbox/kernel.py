"""What this machine gives a sandbox (the launcher's probe, once per process), what a sandbox of
a configuration covers here, and the words for both: the start-up line and `--check`."""

from __future__ import annotations

import functools
import os
import sys
import threading

from bob_acp.processes.children import PYTHON_FLAGS  # (the launcher runs as the supervisor does)
from bob_acp.sandbox import cgroup

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from bob_acp.config import Config

LAUNCHER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "launcher.py")
NETWORK_ABI = 4  # the first Landlock ABI that can deny TCP
SCOPES_ABI = 6  # the first that keeps signals and abstract UNIX sockets inside
PROBE_TIMEOUT = 10.0
MiB = 1024 * 1024
# What a command's failure says when the sandbox may have been what stopped it.
DENIED_SIGNS = ("Permission denied", "Operation not permitted", "Read-only file system", "EACCES", "EPERM", "EROFS")
NETWORK_SIGNS = ("Network is unreachable", "Could not resolve host", "Couldn't connect to server",
                 "Temporary failure in name resolution", "Name or service not known", "ENETUNREACH",
                 "getaddrinfo", "Failed to establish a new connection", "nodename nor servname",
                 "Could not resolve", "No route to host", "unable to access", "Connection refused", "ECONNREFUSED")


class Machine:
    """What this machine gives a sandbox: the launcher's probe, once per process."""

    __slots__ = ("landlock", "namespaces", "proc", "pid_max", "private_tmp", "loopback", "view", "seccomp", "error",
                 "cut_off")

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
        self.seccomp = bool(have.get("seccomp"))  # the filter (no UNIX socket, no set-ID bit) can be had
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


class _Probes:
    """The probes' answers, once each: by the network setting and what the environment says the
    kernel lacks (BOB_ACP_NO_LANDLOCK, BOB_ACP_NO_NAMESPACES: as a test makes such a machine)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._known: dict[tuple[bool, bool, bool], Machine] = {}

    def machine(self, network: bool) -> Machine:
        key = (network, os.environ.get("BOB_ACP_NO_LANDLOCK") == "1", os.environ.get("BOB_ACP_NO_NAMESPACES") == "1")
        with self._lock:
            known = self._known.get(key)
            if known is None:
                known = _probe(network)
                if not known.cut_off:  # (a probe cut off answered nothing: asked again next time)
                    self._known[key] = known
            return known


_probes = _Probes()


def machine(network: bool) -> Machine:
    """What this machine gives a sandbox with (or without) the network: probed once."""
    return _probes.machine(network)


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

    def __init__(self, found: Machine, network: bool, processes: int, memory: int, unix_sockets: bool = False):
        from bob_acp.processes import children

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
        item(ns, ".git, .bob, AGENTS.md and Bob's own installation read-only, and .git, .gitmodules and AGENTS.md "
             "reserved where missing (no command can create them at a root)",
             "no namespaces: .git, .bob and AGENTS.md stay writable to commands")
        item(ns, "Bob's keys, configuration, state and checkpoint store, and tools.sandboxHide (~/.ssh, ~/.aws …) "
             "hidden", "no namespaces: Bob's keys and the user's credentials (~/.ssh …) are readable by commands")
        if unix_sockets:
            held.append("UNIX sockets allowed (tools.sandboxUnixSockets: allow): other programs' sockets (tmux, "
                        "D-Bus, Docker, ssh-agent) are reachable")
        else:
            item(found.seccomp, "no UNIX socket can be made (seccomp): no other program's (tmux, D-Bus, Docker, "
                 "ssh-agent) is reachable", "no seccomp filter here: the UNIX sockets of other programs (tmux, D-Bus, "
                 "Docker, ssh-agent) are reachable")
        item(found.seccomp, "no set-user-ID or set-group-ID file can be made (seccomp)",
             "no seccomp filter here: a command can make a set-user-ID file")
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
    return Coverage(machine(network), network, *limits_of(cfg), unix_sockets=cfg.tools.sandboxUnixSockets == "allow")


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


def looks_denied(output: str) -> bool:
    return any(sign in output for sign in DENIED_SIGNS)


def looks_offline(output: str) -> bool:
    return any(sign in output for sign in NETWORK_SIGNS)
