"""The parts of a confinement, for the sandbox's launcher (launcher.py): the kernel's constants,
mounts and binds, what is protected, hidden or private, the read-only view, capabilities,
limits, Landlock and the seccomp filter (no UNIX socket, no set-ID bit). Standard library only,
nothing of Bob imported: the launcher runs it as `python -I -S`."""

from __future__ import annotations

import ctypes
import errno
import os
import platform
import re
import resource
import socket
import stat
import struct

TYPE_CHECKING = False
if TYPE_CHECKING:  # (annotations only: the launcher imports nothing it does not run)
    from collections.abc import Callable, Collection, Iterable

CLONE_NEWNS, CLONE_NEWIPC, CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET = (0x00020000, 0x08000000, 0x10000000,
                                                                      0x20000000, 0x40000000)
NAMESPACES = (("user", CLONE_NEWUSER), ("mnt", CLONE_NEWNS), ("pid", CLONE_NEWPID), ("ipc", CLONE_NEWIPC),
              ("net", CLONE_NEWNET))
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REMOUNT = 1, 2, 4, 8, 32
MS_NOATIME, MS_NODIRATIME, MS_BIND, MS_REC, MS_SLAVE, MS_RELATIME = 1024, 2048, 4096, 16384, 1 << 19, 1 << 21
ST_FLAGS = ((os.ST_NOSUID, MS_NOSUID), (os.ST_NODEV, MS_NODEV), (os.ST_NOEXEC, MS_NOEXEC),
            (getattr(os, "ST_NOATIME", 1024), MS_NOATIME), (getattr(os, "ST_NODIRATIME", 2048), MS_NODIRATIME),
            (getattr(os, "ST_RELATIME", 4096), MS_RELATIME))
PR_SET_PDEATHSIG, PR_SET_DUMPABLE, PR_CAPBSET_DROP, PR_SET_SECUREBITS = 1, 4, 24, 28
PR_SET_NO_NEW_PRIVS, PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, PR_CAP_AMBIENT_CLEAR_ALL = 38, 47, 2, 4
CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH = 1, 2
SECUREBITS_LOCKED_DOWN = 0xFF  # noroot, no setuid fixup, keep caps (locked), no ambient raise, each locked
SECUREBITS_KEEPING = 0x3F  # the same, but ambient raising (for the capabilities root keeps: kept_capabilities)
CAPABILITY_V3 = 0x20080522
SIOCGIFFLAGS, SIOCSIFFLAGS, IFF_UP = 0x8913, 0x8914, 0x1
RESERVED_PIDS = 300  # pids the kernel skips after it wraps round (pid_max bounds the namespace's processes)

SYS_CREATE_RULESET, SYS_ADD_RULE, SYS_RESTRICT_SELF = 444, 445, 446
RULE_PATH_BENEATH = 1
# LANDLOCK_ACCESS_FS_*: what is handled (denied unless a rule allows it)
WRITE_FILE, REMOVE_DIR, REMOVE_FILE, MAKE_CHAR, MAKE_DIR = 1 << 1, 1 << 4, 1 << 5, 1 << 6, 1 << 7
MAKE_REG, MAKE_SOCK, MAKE_FIFO, MAKE_BLOCK, MAKE_SYM = 1 << 8, 1 << 9, 1 << 10, 1 << 11, 1 << 12
REFER, TRUNCATE = 1 << 13, 1 << 14  # ABI 2, ABI 3
BIND_TCP, CONNECT_TCP = 1 << 0, 1 << 1  # LANDLOCK_ACCESS_NET_*, ABI 4
SCOPE_ABSTRACT_UNIX_SOCKET, SCOPE_SIGNAL = 1 << 0, 1 << 1  # ABI 6
WRITES_V1 = (WRITE_FILE | REMOVE_DIR | REMOVE_FILE | MAKE_CHAR | MAKE_DIR | MAKE_REG | MAKE_SOCK | MAKE_FIFO
             | MAKE_BLOCK | MAKE_SYM)
FILE_RIGHTS = WRITE_FILE | TRUNCATE  # what a rule on a file (not a folder) may grant
DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/tty", "/dev/random", "/dev/urandom", "/dev/ptmx")
PRIVATE_DIRS = ("/dev/shm", "/dev/mqueue")  # shared memory of the machine: one of its own, writable
NOT_CONFINED = 126

libc = ctypes.CDLL(None, use_errno=True)


class Refused(Exception):
    """The confinement cannot be had; str(self) says why."""


def _failed(what: str) -> OSError:
    number = ctypes.get_errno()
    return OSError(number, f"{what}: {os.strerror(number)}")


def checked(result: int, what: str) -> int:
    """`result` of a system call, or the OSError its errno says (`what`: the call, in words)."""
    if result < 0:
        raise _failed(what)
    return result


class RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64),
                ("scoped", ctypes.c_uint64)]


class PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def landlock_abi() -> int:
    if os.environ.get("BOB_ACP_NO_LANDLOCK") == "1":  # a kernel without Landlock, as a test makes one
        return 0
    version: int = libc.syscall(SYS_CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(1))
    return max(0, version)


# ---- the parts of a confinement ---------------------------------------------------------------

def write_maps(uid: int, gid: int) -> None:
    """Map this process's user and group to themselves in the user namespace it just made."""
    for name, text in (("setgroups", "deny"), ("uid_map", f"{uid} {uid} 1"), ("gid_map", f"{gid} {gid} 1")):
        with open(f"/proc/self/{name}", "w") as handle:
            handle.write(text)


def map_every_id_from_outside() -> Callable[[bool], bool]:
    """Root (with its capabilities outside) maps every id to itself, so that a project another
    user owns (a container's or CI's checkout) stays within reach of the capabilities root keeps
    inside (kept_capabilities). Only a process in the parent namespace may write such a map: a
    helper forked before the unshare writes it once told to. Returns a function to call right
    after the unshare: True when the map was written (False: map one id, as any user)."""
    ready_r, ready_w = os.pipe()
    helper = os.fork()
    if helper == 0:
        os.close(ready_w)
        code = 1
        try:
            if os.read(ready_r, 1):
                parent = os.getppid()
                for name in ("uid_map", "gid_map"):
                    with open(f"/proc/{parent}/{name}", "w") as handle:
                        handle.write("0 0 4294967295")
                code = 0
        except OSError:
            pass
        os._exit(code)
    os.close(ready_r)

    def after_unshare(unshared: bool) -> bool:
        try:
            if unshared:
                os.write(ready_w, b"1")
        finally:
            os.close(ready_w)
        return os.waitstatus_to_exitcode(os.waitpid(helper, 0)[1]) == 0 and unshared

    return after_unshare


def mount(source: str | None, target: str, kind: str | None, flags: int, data: str | None = None) -> None:
    def encode(value: str | None) -> bytes | None:
        return None if value is None else os.fsencode(value)

    if libc.mount(encode(source), encode(target), encode(kind), ctypes.c_ulong(flags), encode(data)) != 0:
        raise _failed(f"mount {target}")


def kept_flags(path: str) -> int:
    """The flags of the mount `path` is on that a remount in a user namespace must keep (locked)."""
    found = os.statvfs(path).f_flag
    return sum(flag for bit, flag in ST_FLAGS if found & bit)


def bind_read_only(path: str) -> None:
    mount(path, path, None, MS_BIND | MS_REC)
    mount(None, path, None, MS_REMOUNT | MS_BIND | MS_RDONLY | kept_flags(path))


def bind(source: str, target: str, read_only: bool = False) -> None:
    mount(source, target, None, MS_BIND | MS_REC)
    if read_only:
        mount(None, target, None, MS_REMOUNT | MS_BIND | MS_RDONLY | kept_flags(target))


def loopback_up() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        import fcntl

        request = struct.pack("16sh22x", b"lo", 0)
        flags = struct.unpack("16sh22x", fcntl.ioctl(sock, SIOCGIFFLAGS, request))[1]
        fcntl.ioctl(sock, SIOCSIFFLAGS, struct.pack("16sh22x", b"lo", flags | IFF_UP))


def mount_points(pid: int | str) -> set[str]:
    """The mount points of process `pid`'s mount namespace (read through the machine's /proc)."""
    points = set()
    try:
        with open(f"/proc/{pid}/mountinfo", "rb") as handle:
            for line in handle:
                fields = line.split()
                if len(fields) > 4:  # (spaces and the like are written as octal escapes, \\040)
                    points.add(os.fsdecode(re.sub(rb"\\([0-7]{3})", lambda m: bytes([int(m.group(1), 8)]),
                                                  fields[4])))
    except OSError:
        pass
    return points


def protect(paths: Iterable[str], mounted: Collection[str] = frozenset()) -> list[str]:
    """Bind each existing path read-only (those not bound already); the paths that could not be."""
    missed = []
    for path in paths:
        if path in mounted:
            continue
        try:
            info = os.lstat(path)
        except FileNotFoundError:
            continue
        except OSError:
            missed.append(path)
            continue
        if stat.S_ISLNK(info.st_mode):
            missed.append(path)  # a link could be pointed elsewhere: not protected (said to Bob)
            continue
        try:
            bind_read_only(path)
        except OSError:
            missed.append(path)
    return missed


def hide(paths: Iterable[str], keep: Iterable[str] = (), mounted: Collection[str] = frozenset()) -> list[str]:
    """Each existing path made invisible: an empty folder no one may read over a folder (or, where
    a `keep` path lies inside it, a read-only folder holding just that, bound back read-only),
    /dev/null over a file (a link: over what it leads to); the paths that could not be."""
    missed = []
    for path in paths:
        if path in mounted or os.path.realpath(path) in mounted:
            continue
        try:
            info = os.stat(path)
        except FileNotFoundError:
            continue
        except OSError:
            missed.append(path)
            continue
        try:
            if stat.S_ISDIR(info.st_mode):
                inside = [k for k in keep if k.startswith(path.rstrip("/") + "/") and os.path.isdir(k)]
                _hide_folder(path, inside)
            else:
                mount("/dev/null", path, None, MS_BIND)
        except OSError:
            missed.append(path)
    return missed


def _hide_folder(path: str, keep: list[str]) -> None:
    flags = MS_NOSUID | MS_NODEV | MS_NOEXEC
    if not keep:
        mount("tmpfs", path, "tmpfs", MS_RDONLY | flags, "size=4k,mode=000")
        return
    kept = [(k, os.open(k, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)) for k in keep]  # (before it is covered)
    try:
        mount("tmpfs", path, "tmpfs", flags, "size=64k,mode=755")
        for folder, fd in kept:
            os.makedirs(folder, exist_ok=True)
            bind(f"/proc/self/fd/{fd}", folder, read_only=True)
        mount(None, path, None, MS_REMOUNT | MS_RDONLY | flags)
    finally:
        for _folder, fd in kept:
            os.close(fd)


def private_tmp(private: str, visible: Iterable[tuple[str, bool]]) -> None:
    """The session's own folder as /tmp; each path in `visible` that lies under the real /tmp
    (the project, its other folders, the interpreter) bound back at its own place."""
    real = os.open("/tmp", os.O_PATH | os.O_DIRECTORY)
    try:
        mount(private, "/tmp", None, MS_BIND | MS_REC)
        for path, writable in visible:
            relative = os.path.relpath(os.path.realpath(path), os.path.realpath("/tmp"))
            if relative == "." or relative.startswith(".."):
                continue
            inside = os.path.join("/tmp", relative)
            source = f"/proc/self/fd/{real}/{relative}"
            try:
                info = os.stat(source)
            except OSError:
                continue
            if stat.S_ISDIR(info.st_mode):
                os.makedirs(inside, exist_ok=True)
            else:
                os.makedirs(os.path.dirname(inside), exist_ok=True)
                if not os.path.exists(inside):
                    open(inside, "a").close()
            bind(source, inside, read_only=not writable)
    finally:
        os.close(real)


def read_only_view(writable: Iterable[str], own: Iterable[str]) -> list[str]:
    """Every mount read-only but the `writable` folders (each bound on itself first, with what
    lies under it) and the sandbox's `own` mounts: where there is no Landlock, the mount
    namespace confines writes (bubblewrap's way). A command cannot undo it: it has no capability,
    and a namespace it makes gets these mounts locked. Returns the mounts left writable."""
    kept = [path for path in own]
    for folder in writable:
        real = os.path.realpath(folder)
        try:
            mount(real, real, None, MS_BIND | MS_REC)
        except OSError:
            continue  # (a folder that is not there: nothing to write in)
        kept.append(real)
    left = []
    for point in sorted(mount_points("self")):
        if any(point == k or point.startswith(k.rstrip("/") + "/") for k in kept):
            continue
        try:
            mount(None, point, None, MS_REMOUNT | MS_BIND | MS_RDONLY | kept_flags(point))
        except OSError:
            left.append(point)
    return left


def private_dirs(uid: int, memory: int = 0) -> list[str]:
    """A tmpfs of its own on the machine's shared memory and on the user's runtime folder (where
    the user's programs keep their sockets: D-Bus, Wayland, the GPG and SSH agents), each at most
    `memory` bytes (a tmpfs's pages are memory that no process's limit counts), else half the
    machine's."""
    made = []
    size = str(memory) if memory else "50%"
    for path, mode in ((f"/run/user/{uid}", "0700"), *((d, "1777") for d in PRIVATE_DIRS)):
        if os.path.isdir(path) and not os.path.islink(path):
            try:
                mount("tmpfs", path, "tmpfs", MS_NOSUID | MS_NODEV, f"mode={mode},size={size}")
                made.append(path)
            except OSError:
                continue
    return made


def kept_capabilities() -> tuple[int, ...]:
    """What a command keeps: nothing, but for root in a namespace mapping every id (write_maps),
    which keeps the two capabilities that give it the access to files it has outside (read,
    write and search whoever owns them). Writes stay confined by Landlock; no capability that
    changes owners, modes, mounts or other processes is kept."""
    if os.geteuid() != 0:
        return ()
    try:
        with open("/proc/self/uid_map") as handle:
            full = handle.read().split() == ["0", "0", "4294967295"]
    except OSError:
        return ()
    return (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH) if full else ()


def drop_capabilities() -> None:
    """No capability left (but kept_capabilities()), none to be had again by exec (the user
    namespace gave them all)."""
    keep = kept_capabilities()
    # (noroot and the rest, locked; ambient raising left open only where a capability is kept)
    libc.prctl(PR_SET_SECUREBITS, SECUREBITS_LOCKED_DOWN if not keep else SECUREBITS_KEEPING, 0, 0, 0)
    cap = 0
    while libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) == 0 or ctypes.get_errno() in (errno.EPERM, 0):
        cap += 1
        while cap in keep:
            cap += 1
        if cap > 63:
            break
    libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
    mask = sum(1 << c for c in keep)
    header = struct.pack("Ii", CAPABILITY_V3, 0)
    data = struct.pack("IIIIII", mask, mask, mask, 0, 0, 0)  # (effective, permitted, inheritable) x 2 words
    if libc.capset(ctypes.c_char_p(header), ctypes.c_char_p(data)) != 0:
        raise _failed("capset")
    for capability in keep:  # (kept across exec: root's own caps are not, under noroot)
        libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, capability, 0, 0)


def set_limits(processes: int, memory: int) -> None:
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if memory:
        _soft, hard = resource.getrlimit(resource.RLIMIT_DATA)
        cap = memory if hard == resource.RLIM_INFINITY else min(memory, hard)
        resource.setrlimit(resource.RLIMIT_DATA, (cap, cap))
    if processes:
        _soft, hard = resource.getrlimit(resource.RLIMIT_NPROC)
        cap = processes if hard == resource.RLIM_INFINITY else min(processes, hard)
        resource.setrlimit(resource.RLIMIT_NPROC, (cap, cap))


def landlock(folders: Iterable[str], deny_tcp: bool, best_effort: bool) -> list[str]:
    """Restrict this process (and all it starts): writes beneath `folders` only; no signal,
    trace or abstract UNIX socket outside its domain (ABI 6); no TCP when `deny_tcp` (ABI 4).
    Returns what it could not have (a list of words), or raises Refused."""
    version = landlock_abi()
    missing = []
    if version < 1:
        raise Refused("this kernel has no Landlock")
    if deny_tcp and version < 4:
        if not best_effort:
            raise Refused(f"Landlock ABI {version} cannot deny TCP (ABI 4 can)")
        missing.append("tcp")
        deny_tcp = False
    if version < 6:
        missing.append("scopes")
    writes = WRITES_V1 | (REFER if version >= 2 else 0) | (TRUNCATE if version >= 3 else 0)
    attr = RulesetAttr(writes, (BIND_TCP | CONNECT_TCP) if deny_tcp else 0,
                       (SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL) if version >= 6 else 0)
    size = 24 if version >= 6 else 16 if version >= 4 else 8
    ruleset = libc.syscall(SYS_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(size), ctypes.c_uint32(0))
    if ruleset < 0:
        raise Refused(f"landlock_create_ruleset failed: {os.strerror(ctypes.get_errno())}")
    try:
        for path, rights in [(f, writes) for f in folders] + [(d, writes & FILE_RIGHTS) for d in DEVICES]:
            try:
                fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            except OSError:
                continue  # a folder that does not exist grants nothing
            try:
                if not stat.S_ISDIR(os.fstat(fd).st_mode):
                    rights &= FILE_RIGHTS
                rule = PathBeneath(rights, fd)
                if libc.syscall(SYS_ADD_RULE, ruleset, RULE_PATH_BENEATH, ctypes.byref(rule), 0) != 0:
                    raise Refused(f"landlock_add_rule({path}) failed: {os.strerror(ctypes.get_errno())}")
            finally:
                os.close(fd)
        if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            raise Refused(f"prctl(NO_NEW_PRIVS) failed: {os.strerror(ctypes.get_errno())}")
        if libc.syscall(SYS_RESTRICT_SELF, ruleset, 0) != 0:
            raise Refused(f"landlock_restrict_self failed: {os.strerror(ctypes.get_errno())}")
    finally:
        os.close(ruleset)
    return missing


# ---- seccomp: what the kernel refuses by system call ---------------------------------------------
#
# A filter of classic BPF over struct seccomp_data {int nr; u32 arch; u64 ip; u64 args[6]}: no UNIX
# socket can be made (socketpair stays: asyncio and multiprocessing use it), as Anthropic's
# sandbox-runtime does for Claude Code; no file gets a set-user-ID or set-group-ID bit (chmod and
# its kin, a create's mode); io_uring and openat2, whose arguments a filter cannot read, are
# refused. A call of another architecture (i386 through int 0x80, x32) is refused whole.

PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 22, 2
RET_ALLOW, RET_ERRNO = 0x7FFF0000, 0x00050000
LD_ABS, JEQ, JSET, JGE, RET = 0x20, 0x15, 0x45, 0x35, 0x06
AF_UNIX, SETID_BITS, CREATES = 1, 0o6000, 0o100 | 0o20000000  # O_CREAT, __O_TMPFILE
X32_BIT = 0x40000000
ARCHES = {  # machine: (AUDIT_ARCH_*, {call: number})
    "x86_64": (0xC000003E, {"socket": 41, "chmod": 90, "fchmod": 91, "fchmodat": 268, "fchmodat2": 452, "open": 2,
                            "openat": 257, "creat": 85, "mknod": 133, "mknodat": 259, "openat2": 437,
                            "io_uring_setup": 425}),
    "aarch64": (0xC00000B7, {"socket": 198, "fchmod": 52, "fchmodat": 53, "fchmodat2": 452, "openat": 56,
                             "mknodat": 33, "openat2": 437, "io_uring_setup": 425}),
}
MODE_ARG = {"chmod": 1, "fchmod": 1, "fchmodat": 2, "fchmodat2": 2, "creat": 1, "mknod": 1, "mknodat": 2}
CREATE_ARGS = {"open": (1, 2), "openat": (2, 3)}  # (flags, mode)


class SockFilter(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint16), ("jt", ctypes.c_uint8), ("jf", ctypes.c_uint8), ("k", ctypes.c_uint32)]


class SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(SockFilter))]


def _arg(index: int) -> int:
    return 16 + 8 * index  # (the low 32 bits of args[index], little-endian)


def seccomp_program(unix_sockets: bool) -> list[tuple[int, int, int, int]] | None:
    """The filter's instructions for this machine (None: no filter is known for it)."""
    known = ARCHES.get(platform.machine())
    if known is None:
        return None
    arch, calls = known
    deny, nosys = RET_ERRNO | errno.EPERM, RET_ERRNO | errno.ENOSYS
    program = [(LD_ABS, 0, 0, 4), (JEQ, 1, 0, arch), (RET, 0, 0, deny), (LD_ABS, 0, 0, 0), (JGE, 0, 1, X32_BIT),
               (RET, 0, 0, deny)]
    for name in ("openat2", "io_uring_setup"):
        program += [(LD_ABS, 0, 0, 0), (JEQ, 0, 1, calls[name]), (RET, 0, 0, nosys)]
    if not unix_sockets:
        program += [(LD_ABS, 0, 0, 0), (JEQ, 0, 3, calls["socket"]), (LD_ABS, 0, 0, _arg(0)), (JEQ, 0, 1, AF_UNIX),
                    (RET, 0, 0, deny)]
    for name, index in MODE_ARG.items():
        if name in calls:
            program += [(LD_ABS, 0, 0, 0), (JEQ, 0, 3, calls[name]), (LD_ABS, 0, 0, _arg(index)),
                        (JSET, 0, 1, SETID_BITS), (RET, 0, 0, deny)]
    for name, (flags, mode) in CREATE_ARGS.items():
        if name in calls:
            program += [(LD_ABS, 0, 0, 0), (JEQ, 0, 5, calls[name]), (LD_ABS, 0, 0, _arg(flags)),
                        (JSET, 0, 3, CREATES), (LD_ABS, 0, 0, _arg(mode)), (JSET, 0, 1, SETID_BITS),
                        (RET, 0, 0, deny)]
    return program + [(RET, 0, 0, RET_ALLOW)]


def seccomp(unix_sockets: bool) -> None:
    """Install the filter on this process and all it starts (no_new_privs must be set first);
    Refused when it cannot be had."""
    program = seccomp_program(unix_sockets)
    if program is None:
        raise Refused(f"no seccomp filter is known for {platform.machine()}")
    filters = (SockFilter * len(program))(*(SockFilter(*item) for item in program))
    prog = SockFprog(len(program), filters)
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 or \
            libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(prog), 0, 0) != 0:
        raise Refused(f"seccomp could not be had: {os.strerror(ctypes.get_errno())}")


def seccomp_works() -> bool:
    """Whether this kernel takes the filter (tried in a child that ends at once)."""
    child = os.fork()
    if child == 0:
        try:
            seccomp(False)
            socket.socket(socket.AF_UNIX, socket.SOCK_STREAM).close()
        except Refused:
            os._exit(1)
        except OSError:
            os._exit(0)  # (refused by the filter: it works)
        os._exit(1)
    return os.waitstatus_to_exitcode(os.waitpid(child, 0)[1]) == 0
