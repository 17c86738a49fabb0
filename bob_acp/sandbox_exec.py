"""Bob's sandbox launcher: `python -I -S sandbox_exec.py [--write DIR]… [--no-network] [--best-effort]
-- PROGRAM ARGS…` confines itself with Linux Landlock, then execs PROGRAM, which inherits the
confinement (and so does everything it starts; nothing can undo it).

Reading and executing stay allowed everywhere; creating, writing, renaming, removing and linking
files are allowed only beneath the `--write` folders (rules on the folders as the kernel resolves
them, so a link from inside to outside is no way out) and a few devices (/dev/null …). With
`--no-network`, TCP connect and bind are denied (Landlock ABI 4 and later).

Standard library only, nothing of Bob imported (it runs before every sandboxed command). Exit
status 126 with one line on stderr when the confinement cannot be had, unless --best-effort, which
then runs PROGRAM with what could be had (nothing, on a kernel without Landlock).
"""

import ctypes
import os
import sys

SYS_CREATE_RULESET, SYS_ADD_RULE, SYS_RESTRICT_SELF = 444, 445, 446
CREATE_RULESET_VERSION = 1
RULE_PATH_BENEATH, RULE_NET_PORT = 1, 2
PR_SET_NO_NEW_PRIVS = 38

# LANDLOCK_ACCESS_FS_*: what is handled (denied unless a rule allows it)
EXECUTE, WRITE_FILE, READ_FILE, READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
REMOVE_DIR, REMOVE_FILE, MAKE_CHAR, MAKE_DIR = 1 << 4, 1 << 5, 1 << 6, 1 << 7
MAKE_REG, MAKE_SOCK, MAKE_FIFO, MAKE_BLOCK, MAKE_SYM = 1 << 8, 1 << 9, 1 << 10, 1 << 11, 1 << 12
REFER, TRUNCATE = 1 << 13, 1 << 14  # ABI 2, ABI 3
BIND_TCP, CONNECT_TCP = 1 << 0, 1 << 1  # LANDLOCK_ACCESS_NET_*, ABI 4

WRITES_V1 = (WRITE_FILE | REMOVE_DIR | REMOVE_FILE | MAKE_CHAR | MAKE_DIR | MAKE_REG | MAKE_SOCK | MAKE_FIFO
             | MAKE_BLOCK | MAKE_SYM)
FILE_RIGHTS = WRITE_FILE | TRUNCATE  # what a rule on a file (not a folder) may grant
DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/tty", "/dev/random", "/dev/urandom")


class RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64)]


class PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def abi(libc) -> int:
    if os.environ.get("BOB_ACP_NO_LANDLOCK") == "1":  # the tests' way to see the fallback
        return 0
    version = libc.syscall(SYS_CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(CREATE_RULESET_VERSION))
    return max(0, version)


def confine(folders: list[str], network: bool, best_effort: bool = False) -> str | None:
    """Apply the ruleset to this process; None, or why it could not be (with best_effort, the
    file rules are applied even where the network cannot be denied)."""
    libc = ctypes.CDLL(None, use_errno=True)
    version = abi(libc)
    if version < 1:
        return "this kernel has no Landlock"
    if not network and version < 4:
        if not best_effort:
            return f"Landlock ABI {version} cannot deny network access (ABI 4 can)"
        network = True  # what can be had: the file rules
    writes = WRITES_V1 | (REFER if version >= 2 else 0) | (TRUNCATE if version >= 3 else 0)
    attr = RulesetAttr(writes, 0 if network else (BIND_TCP | CONNECT_TCP))
    size = ctypes.sizeof(RulesetAttr) if version >= 4 else 8
    ruleset = libc.syscall(SYS_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(size), ctypes.c_uint32(0))
    if ruleset < 0:
        return f"landlock_create_ruleset failed: {os.strerror(ctypes.get_errno())}"
    try:
        for path, rights in [(f, writes) for f in folders] + [(d, writes & FILE_RIGHTS) for d in DEVICES]:
            try:
                fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            except OSError:
                continue  # a folder that does not exist grants nothing
            try:
                if not os.path.isdir(path):
                    rights &= FILE_RIGHTS
                rule = PathBeneath(rights, fd)
                if libc.syscall(SYS_ADD_RULE, ruleset, RULE_PATH_BENEATH, ctypes.byref(rule), 0) != 0:
                    return f"landlock_add_rule({path}) failed: {os.strerror(ctypes.get_errno())}"
            finally:
                os.close(fd)
        if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            return f"prctl(NO_NEW_PRIVS) failed: {os.strerror(ctypes.get_errno())}"
        if libc.syscall(SYS_RESTRICT_SELF, ruleset, 0) != 0:
            return f"landlock_restrict_self failed: {os.strerror(ctypes.get_errno())}"
    finally:
        os.close(ruleset)
    return None


def main(argv: list[str]) -> None:
    folders: list[str] = []
    network = True
    best_effort = False
    index = 0
    while index < len(argv) and argv[index] != "--":
        if argv[index] == "--write":
            folders.append(argv[index + 1])
            index += 2
        elif argv[index] == "--no-network":
            network = False
            index += 1
        elif argv[index] == "--best-effort":
            best_effort = True
            index += 1
        else:
            sys.stderr.write(f"bob sandbox: unknown option {argv[index]}\n")
            sys.exit(2)
    program = argv[index + 1:]
    if not program:
        sys.stderr.write("bob sandbox: no program to run\n")
        sys.exit(2)
    problem = confine(folders, network, best_effort)
    if problem is not None and not best_effort:
        sys.stderr.write(f"bob sandbox: {problem}: not run\n")
        sys.exit(126)
    os.execvp(program[0], program)


if __name__ == "__main__":
    main(sys.argv[1:])
