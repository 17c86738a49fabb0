"""The sandbox for what Bob runs (`tools.sandbox`): every bash command started through a small
launcher (bob_acp/sandbox_exec.py) that confines itself with Linux Landlock and then execs bash,
so the command and everything it starts can write only inside the session's folders, the system
temporary folder and a cache folder of the session's own, and (unless `tools.sandboxNetwork`)
cannot open or accept TCP connections.

A sandbox that cannot be had is said, never skipped: with `workspace`, a command that would run
unconfined is refused with a result saying why; `best-effort` runs it with what the kernel has.
"""

from __future__ import annotations

import functools
import os
import sys
import tempfile
from dataclasses import dataclass, field

TYPE_CHECKING = False
if TYPE_CHECKING:

    from bob_acp.config import Config
    from bob_acp.workspace import Workspace

LAUNCHER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "sandbox_exec.py")
NETWORK_ABI = 4  # the first Landlock ABI that can deny TCP
# What a command's failure says when the sandbox may have been what stopped it.
DENIED_SIGNS = ("Permission denied", "Operation not permitted", "Read-only file system", "EACCES", "EPERM")


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


def abi(env: dict | None = None) -> int:
    """The Landlock ABI this kernel offers; 0: none (BOB_ACP_NO_LANDLOCK=1 says so, for tests)."""
    if (env if env is not None else os.environ).get("BOB_ACP_NO_LANDLOCK") == "1":
        return 0
    return _kernel_abi()


@dataclass(frozen=True)
class Sandbox:
    folders: tuple[str, ...]  # writable, as given (the kernel resolves them)
    network: bool
    best_effort: bool
    cache: str  # the session's cache folder (XDG_CACHE_HOME, PIP_CACHE_DIR, npm_config_cache)
    abi: int = 0
    extra_env: dict = field(default_factory=dict)

    def remove_cache(self) -> None:
        """The session is over: its cache folder goes with it."""
        import shutil

        shutil.rmtree(self.cache, ignore_errors=True)

    def problem(self) -> str | None:
        """Why this sandbox cannot be had as configured (None: it can)."""
        if self.abi < 1:
            return "this kernel has no Landlock"
        if not self.network and self.abi < NETWORK_ABI:
            return f"Landlock ABI {self.abi} cannot deny network access (ABI {NETWORK_ABI} can)"
        return None

    def refusal(self) -> str | None:
        """The result of a command refused because the sandbox cannot be had (None: it runs)."""
        problem = self.problem()
        if problem is None or self.best_effort:
            return None
        return (f"[not run: the sandbox (tools.sandbox: workspace) cannot be had here: {problem}. "
                "With tools.sandbox: best-effort, commands run with what the kernel offers]")

    def command(self, argv: list[str]) -> list[str]:
        """`argv` started through the launcher."""
        launcher = [sys.executable, "-I", "-S", LAUNCHER]
        for folder in self.folders:
            launcher += ["--write", folder]
        if not self.network:
            launcher.append("--no-network")
        if self.best_effort:
            launcher.append("--best-effort")
        return launcher + ["--", *argv]

    def environment(self, env: dict | None) -> dict:
        base = dict(os.environ if env is None else env)
        os.makedirs(self.cache, mode=0o700, exist_ok=True)
        base.update({"XDG_CACHE_HOME": self.cache, "PIP_CACHE_DIR": os.path.join(self.cache, "pip"),
                     "npm_config_cache": os.path.join(self.cache, "npm")})
        if self.abi == 0:
            base["BOB_ACP_NO_LANDLOCK"] = "1"  # what this Bob was told, the launcher is told too
        return base


def for_session(cfg: Config, ws: Workspace, owner: str) -> Sandbox | None:
    """The sandbox of a session's commands (writable: every root of the workspace and the
    temporary folder), or None when tools.sandbox is off."""
    mode = cfg.tools.sandbox
    if mode == "off":
        return None
    cache = os.path.join(tempfile.gettempdir(), f"bob-cache-{os.getuid()}-{owner or 'session'}")
    return Sandbox((*ws.roots, tempfile.gettempdir()), bool(cfg.tools.sandboxNetwork), mode == "best-effort", cache,
                   abi())


def status(cfg: Config) -> tuple[str, bool] | None:
    """One line on the sandbox's state for the log and --check, and whether it is a warning (the
    sandbox is not what was asked for); None when it is off."""
    mode = cfg.tools.sandbox
    if mode == "off":
        return None
    version = abi()
    network = "allowed" if cfg.tools.sandboxNetwork else "denied"
    probe = Sandbox((), bool(cfg.tools.sandboxNetwork), mode == "best-effort", "", version)
    problem = probe.problem()
    if problem is None:
        return (f"sandbox: {mode}, Landlock ABI {version}: writes only in the project and temporary folders, "
                f"network {network}"), False
    if mode == "best-effort":
        return f"sandbox: best-effort: {problem}; commands run with what the kernel offers", True
    return (f"sandbox: workspace cannot be had: {problem}; bash calls are refused (tools.sandbox: best-effort "
            "runs them)"), True


def looks_denied(output: str) -> bool:
    return any(sign in output for sign in DENIED_SIGNS)
