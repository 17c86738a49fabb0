"""The parts of a confinement, for the sandbox's launcher (launcher.py): the kernel's constants,
mounts and binds, the sockets of programs outside, what is protected, hidden or private, the
read-only view, capabilities, limits, Landlock and the session's cgroup. Standard library only,
nothing of Bob imported: the launcher runs it as `python -I -S`. Bob's watch reads sockets with
it too (box.py)."""

from __future__ import annotations

import ctypes
import errno
import os
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


def network_namespaces() -> dict[int, str]:
    """{a network namespace's inode: a process in it}, for each one this process can look into."""
    tables: dict[int, str] = {}
    for name in ["self"] + [n for n in _listdir("/proc") if n.isdigit()]:
        try:
            tables.setdefault(os.stat(f"/proc/{name}/ns/net").st_ino, name)
        except OSError:
            continue  # (gone, or another user's)
    return tables


def listening_sockets(tables: dict[int, str] | None = None) -> list[tuple[str, int]]:
    """(path, socket inode) of every UNIX socket bound to a path, in each network namespace this
    process can look into (a dev container's docker.sock may be bound in another one); a path
    bound relative to its program's folder is taken from that program's folder now."""
    found: list[tuple[str, int]] = []
    relative: list[tuple[str, int]] = []
    for pid in (tables or network_namespaces()).values():
        for path, inode in _unix_table(pid):
            (found if path.startswith("/") else relative).append((path, inode))
    if relative:
        holders = socket_holders({inode for _, inode in relative})
        for path, inode in relative:
            try:
                found.append((os.path.join(os.readlink(f"/proc/{holders[inode]}/cwd"), path), inode))
            except (KeyError, OSError):
                continue
    return found


def _listdir(path: str) -> list[str]:
    try:
        return os.listdir(path)
    except OSError:
        return []


def _unix_table(pid: str) -> list[tuple[str, int]]:
    try:
        with open(f"/proc/{pid}/net/unix", "rb") as handle:
            lines = handle.read().splitlines()[1:]
    except OSError:
        return []
    found = []
    for line in lines:
        fields = line.split(None, 7)
        if len(fields) == 8 and not fields[7].startswith(b"@"):  # (abstract: no path)
            found.append((os.fsdecode(fields[7]), int(fields[6])))
    return found


def socket_holders(inodes: Collection[int] | None, pid_namespace: int | None = None) -> dict[int, str]:
    """A process holding each socket inode (of those in the PID namespace given, if one is)."""
    found: dict[int, str] = {}
    for name in _listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            if pid_namespace is not None and os.stat(f"/proc/{name}/ns/pid").st_ino != pid_namespace:
                continue
            entries = os.listdir(f"/proc/{name}/fd")
        except OSError:
            continue
        for entry in entries:
            try:
                target = os.readlink(f"/proc/{name}/fd/{entry}")
            except OSError:
                continue
            if target.startswith("socket:["):
                inode = int(target[8:-1])
                if inodes is None or inode in inodes:
                    found.setdefault(inode, name)
    return found


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


def own_socket_inodes(pid_namespace: int) -> frozenset[int]:
    """The socket inodes held by the processes of the PID namespace whose inode is given."""
    return frozenset(socket_holders(None, pid_namespace))


def cover_sockets(sockets: Iterable[tuple[str, int]], skip: Collection[int] = frozenset(),
                  mounted: Collection[str] = frozenset()) -> int:
    """/dev/null over each socket path that a program outside the sandbox listens on; how many."""
    covered = 0
    for path, inode in sockets:
        if inode in skip or path in mounted:
            continue
        try:
            if not stat.S_ISSOCK(os.lstat(path).st_mode):
                continue
            mount("/dev/null", path, None, MS_BIND)
            covered += 1
        except OSError:
            continue  # gone, or in a folder of the sandbox's own now: nothing of the outside to cover
    return covered


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


def hide(paths: Iterable[str], mounted: Collection[str] = frozenset()) -> list[str]:
    """Each existing path made invisible: an empty folder no one may read over a folder,
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
                mount("tmpfs", path, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=4k,mode=000")
            else:
                mount("/dev/null", path, None, MS_BIND)
        except OSError:
            missed.append(path)
    return missed


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
