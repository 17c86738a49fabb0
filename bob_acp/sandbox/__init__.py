"""The sandbox of the commands Bob runs (`tools.sandbox`): what this machine gives one, what a
session's sandbox covers, and the launcher command every sandboxed command is started with.

Each session gets a sandbox of its own (launcher.py `host`), made at a turn's first
sandboxed command: a user namespace holding a mount, a PID, an IPC and (unless
`tools.sandboxNetwork`) a network namespace, in a memory cgroup of the session's where one can
be made (cgroup.py). Its commands join it (`run --join`), so a server one command starts
as a background job is there for the next; it ends with the turn when nothing of it runs (an
idle session holds no process), else when the job or the session ends. Inside: writes only in
the session's folders and a /tmp of its own (Landlock, else a read-only view); .git, .bob,
AGENTS.md and Bob's own installation read-only, the missing .git, .gitmodules and AGENTS.md at a
root reserved (reserve.py); no UNIX socket made and no set-ID bit set (seccomp); a /tmp, a
/dev/shm and a /run/user of its own; a loopback and no other network; no signal to or trace of
anything outside; no capabilities; limits on processes and memory; no core dumps. Prevention,
not a clean-up: what no kernel refuses by name (a repository below a root) is said at once.

Where the kernel cannot give all of that, `coverage()` says what is missing: the start-up line
and `--check` show it, commands are asked before they run (unless `tools.sandbox: best-effort`),
and a command that runs with nothing confining it is never labelled sandboxed.

The package's rooms: kernel.py (what this machine gives, what a configuration covers), box.py
(a session's sandbox), names.py (what it guards in a project), policy.py (what runs where, and
what is asked), reserve.py (the names reserved at the roots while a sandbox lives), plants.py
(what its commands make below a root, which no kernel refuses by name), cgroup.py
(a session's memory bound), and the launcher (launcher.py, with confine.py: standard
library only, run as `python -I -S`).
"""

from bob_acp.sandbox.box import Sandbox, for_session, trial
from bob_acp.sandbox.kernel import (
    LAUNCHER,
    Coverage,
    Machine,
    MiB,
    abi,
    coverage,
    default_memory,
    describe,
    limits_of,
    looks_denied,
    looks_offline,
    machine,
    status,
)
from bob_acp.sandbox.names import PLANTED_NAMES, PLANTED_TITLE, PROTECTED_NAMES, nested_repositories

__all__ = ["PLANTED_NAMES", "PLANTED_TITLE", "PROTECTED_NAMES", "Sandbox", "for_session", "nested_repositories", "trial",
           "LAUNCHER", "Coverage", "Machine", "MiB", "abi", "coverage", "default_memory", "describe", "limits_of",
           "looks_denied", "looks_offline", "machine", "status"]
