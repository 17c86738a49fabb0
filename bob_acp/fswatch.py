"""Knowing, without looking again, that folders have not changed: inotify (Linux), through ctypes.

Every session/new needs what the file system says of the session's folders (its skills, the
AGENTS.md chain, the git root), and a file added a moment ago must be in the next session. Stats
give that, several per session; this gives it with one poll. A cache entry keeps the
`generation()` taken before its value was computed, and its computation calls `watch()` on
each folder before reading it (watch, then read: a change before the watch is seen by the read,
one after it is an event). Any event on a name a cache depends on moves the generation on, so
every entry made before it is stale. In the server, the events are read once per read of its
input (input_read), when a request first asks: the kernel queues an event when the change is
made, so a change made before a request was sent is always seen by that request.

Where inotify is not there or not yet worth it (another system; the first few sessions: closing
an instance at exit can cost tens of milliseconds), where a folder cannot be watched or lies on
a network or FUSE file system (whose remote changes are no event here), `generation()` is None
or `watch()` is False and the callers look with stats as before.
"""

from __future__ import annotations

import os
import sys
import threading

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Generic, Iterable, TypeVar

    K = TypeVar("K")
    V = TypeVar("V")

    class _Typed(Generic[K, V]):
        pass
else:  # at run time: typing stays out of start-up (~9 ms); Kept[...] is for the type checker
    K = V = None

    class _Typed:
        def __class_getitem__(cls, _item: object) -> type:
            return cls

# <sys/inotify.h>
IN_MODIFY, IN_ATTRIB, IN_CLOSE_WRITE = 0x2, 0x4, 0x8
IN_MOVED_FROM, IN_MOVED_TO, IN_CREATE, IN_DELETE = 0x40, 0x80, 0x100, 0x200
IN_DELETE_SELF, IN_MOVE_SELF = 0x400, 0x800
IN_UNMOUNT, IN_Q_OVERFLOW, IN_IGNORED = 0x2000, 0x4000, 0x8000
IN_ONLYDIR = 0x01000000
IN_CLOEXEC, IN_NONBLOCK = 0o2000000, 0o4000
MASK = (IN_MODIFY | IN_ATTRIB | IN_CLOSE_WRITE | IN_MOVED_FROM | IN_MOVED_TO | IN_CREATE | IN_DELETE
        | IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR)
_SELF = IN_DELETE_SELF | IN_MOVE_SELF | IN_UNMOUNT | IN_IGNORED

ALL = None  # watch() names: every entry of the folder matters
MAX_WATCHES = 4096  # past it, nothing new is watched (the callers look with stats)
_BUFFER = 64 * 1024  # bytes of events read at once (an event: 16 bytes and a name)


class Watcher:
    def __init__(self) -> None:
        import ctypes
        import struct

        self._event = struct.Struct("iIII")  # struct inotify_event: wd, mask, cookie, len (a name follows)
        libc = ctypes.CDLL(None, use_errno=True)
        self._add = libc.inotify_add_watch
        self._add.argtypes = (ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32)
        self._remove = libc.inotify_rm_watch
        self._remove.argtypes = (ctypes.c_int, ctypes.c_int)
        self._errno = ctypes.get_errno
        self._fd = libc.inotify_init1(IN_NONBLOCK | IN_CLOEXEC)
        if self._fd < 0:
            raise OSError(self._errno(), "inotify_init1")
        # The look for events is a read() called holding the GIL (PyDLL): on a non-blocking
        # descriptor it returns at once, and a thread that let go of the GIL (os.read, poll) at
        # every session/new would hand it to the reader and wait to get it back.
        self._read = ctypes.PyDLL(None).read
        self._read.argtypes = (ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t)
        self._read.restype = ctypes.c_ssize_t
        self._buffer = ctypes.create_string_buffer(_BUFFER)
        self._lock = threading.Lock()
        self._names: dict[int, set[str] | None] = {}  # wd -> the entry names that matter (None: all)
        self._generation = 0
        self._full = False
        self._mounts = _mounts()

    def close(self) -> None:
        with self._lock:
            os.close(self._fd)
            self._names.clear()

    def generation(self) -> int:
        with self._lock:
            size = self._read(self._fd, self._buffer, _BUFFER)
            if size > 0:
                self._drain(self._buffer.raw[:size])
            return self._generation

    def watch(self, folder: str, names: Iterable[str] | None = ALL) -> bool:
        """Watch `folder` for changes of these entries (and of itself). False when it cannot be
        watched: it is missing or not a folder (its parent's watch covers its appearance), or no
        watch is left."""
        if not self._local(folder):
            return False  # a change made on another machine (NFS, a host's folder in a VM) is no event here
        with self._lock:
            if self._full:
                return False
            wd = self._add(self._fd, os.fsencode(folder), MASK)
            if wd < 0:
                return False
            if wd not in self._names and len(self._names) >= MAX_WATCHES:
                self._remove(self._fd, wd)
                self._full = True
                return False
            known = self._names[wd] if wd in self._names else set()
            if names is ALL or known is None:
                self._names[wd] = None
            else:
                known.update(names)
                self._names[wd] = known
            return True

    def _local(self, path: str) -> bool:
        """Whether the file system `path` is on (its innermost mount) is one whose every change
        is made through this kernel."""
        for point, kind in self._mounts:
            if path == point or path.startswith(point if point.endswith("/") else point + "/"):
                return kind in LOCAL_FILE_SYSTEMS
        return False

    def watch_path(self, path: str, names: Iterable[str] | None = ALL) -> bool:
        """Watch `path` (when it is a folder) and every folder above it for the name that leads
        down to it, and the same for where links lead, so that whatever would make `path` name
        something else is an event. False when some folder that exists could not be watched."""
        ok = self._chain(path, names)
        real = os.path.realpath(path)
        if real != path:
            ok = self._chain(real, names) and ok
        return ok

    def covered(self, folder: str, names: Iterable[str] | None = ALL) -> bool:
        """Watched, or no folder (its appearance is an event of the folder above)."""
        return self.watch(folder, names) or not os.path.isdir(folder)

    def _chain(self, path: str, names: Iterable[str] | None) -> bool:
        ok = True
        folder, wanted = path, names
        while True:
            if not self.covered(folder, wanted):
                ok = False
            parent = os.path.dirname(folder)
            if parent == folder:
                return ok
            folder, wanted = parent, (os.path.basename(folder),)

    def _drain(self, data: bytes) -> None:
        """Called with the lock held: read what is queued; any event that matters moves the
        generation on."""
        changed = False
        for _ in range(16):  # (past 1 MiB of events at once: taken as a change, the rest read next time)
            offset = 0
            while offset < len(data):
                wd, mask, _cookie, size = self._event.unpack_from(data, offset)
                head = offset + self._event.size
                name = data[head: head + size].rstrip(b"\0")
                offset = head + size
                if mask & IN_Q_OVERFLOW:
                    changed = True
                elif mask & _SELF:
                    changed = True
                    if wd in self._names:
                        del self._names[wd]
                        if mask & IN_MOVE_SELF:
                            self._remove(self._fd, wd)  # it lives on elsewhere: no longer the folder we meant
                elif wd in self._names:  # (else: a watch already forgotten)
                    wanted = self._names[wd]
                    if wanted is None or not name or os.fsdecode(name) in wanted:
                        changed = True
            if len(data) < _BUFFER - 512:
                break  # all that was queued (a read stops short of the buffer's end only when more wait)
            try:
                data = os.read(self._fd, _BUFFER)
            except BlockingIOError:
                break
        else:
            changed = True
        if changed:
            self._generation += 1


# File systems whose changes all go through this kernel (inotify sees them). Not NFS, SMB, FUSE,
# 9p or virtiofs: a file written there by another machine (or a VM's host) would be no event.
LOCAL_FILE_SYSTEMS = frozenset({"ext2", "ext3", "ext4", "xfs", "btrfs", "tmpfs", "f2fs", "zfs", "bcachefs",
                                "overlay", "reiserfs", "jfs", "vfat", "exfat", "ntfs3", "hfsplus", "ramfs"})


def _mounts() -> list[tuple[str, str]]:
    """(mount point, file system type), the innermost first (the longest point)."""
    found = []
    try:
        with open("/proc/self/mounts", encoding="utf-8", errors="replace") as handle:
            for line in handle:
                fields = line.split()
                if len(fields) >= 3:  # (a space in a mount point is written \040)
                    point = fields[1]
                    for code, char in (("\\040", " "), ("\\011", "\t"), ("\\012", "\n"), ("\\134", "\\")):
                        point = point.replace(code, char)
                    found.append((point, fields[2]))
    except OSError:
        return []
    return sorted(reversed(found), key=lambda mount: len(mount[0]), reverse=True)  # (the later of two at a point wins)


class Kept(_Typed[K, V]):
    """Values read from watched folders, each kept with the generation (or any stamp) it was
    read at, and given back only for that same stamp: the one cache of every reader here.
    Bounded (emptied when full); safe from any thread."""

    def __init__(self, bound: int):
        self._values: dict[K, tuple[object, V]] = {}
        self._bound = bound
        self._lock = threading.Lock()

    def get(self, key: K, stamp: object) -> V | None:
        """The value kept for `key` at `stamp`; None when there is none (or stamp is None)."""
        if stamp is None:
            return None
        with self._lock:
            kept = self._values.get(key)
        return kept[1] if kept is not None and kept[0] == stamp else None

    def keep(self, key: K, stamp: object, value: V) -> None:
        with self._lock:
            if len(self._values) >= self._bound:
                self._values.clear()
            self._values[key] = (stamp, value)

    def last(self, key: K) -> V | None:
        """The value kept for `key` at whatever stamp (a caller that checks it by itself)."""
        with self._lock:
            kept = self._values.get(key)
        return None if kept is None else kept[1]


_watcher: list[Watcher | None] = []
_start_lock = threading.Lock()


def watcher() -> Watcher | None:
    """The process's watcher, made on first use; None where inotify cannot be had."""
    if not _watcher:
        with _start_lock:
            if not _watcher:
                made: Watcher | None = None
                if sys.platform.startswith("linux") and not os.environ.get("BOB_NO_INOTIFY"):
                    try:
                        made = Watcher()
                    except Exception:  # no inotify here (no libc, no instance left): stats, as before
                        made = None
                _watcher.append(made)
    return _watcher[0]


# inotify costs at the end too: closing an instance that held watches waits for the kernel's
# grace period (0.2 ms, now and then 10-30 ms, measured here), which an editor waits for when it
# closes Bob. A few session/new a minute save less than that with it, so it is set up (off the
# caller's thread) only once the folders have been asked about this many times (a session/new
# asks three to four times: about sixteen sessions).
SET_UP_AFTER = 64
_asked = [0]
_reads = [0]  # reads of input so far, counted by a server's reader (input_read)
_looked: list[tuple[int, int]] = [(-1, 0)]  # (the reads counted when the last look began, what it found)


def generation() -> int | None:
    """None: nothing is watched here, look again every time. In a server that counts its reads
    of input (input_read), one look per read, taken by the first request that asks after it:
    every request handled came in that read or an earlier one, so the changes made before it
    was sent are taken in, and a burst of session/new in one read costs one look."""
    if not _watcher:  # not set up yet: stats until asked often enough to be worth it
        _asked[0] += 1
        if _asked[0] == SET_UP_AFTER:
            threading.Thread(target=watcher, name="bob-fswatch", daemon=True).start()
        return None
    found = _watcher[0]
    if found is None:
        return None
    reads = _reads[0]
    if reads:
        looked_at, value = _looked[0]  # (one tuple, swapped whole)
        if looked_at == reads:
            return value
    value = found.generation()
    if reads:
        _looked[0] = (reads, value)  # (a read counted during the look makes the next caller look again)
    return value


def input_read() -> None:
    """For a server's reader, after each read of its input and before it hands on what it read.
    No system call: the look is taken when a request asks (most never do)."""
    _reads[0] += 1  # (the reader alone counts)


def watch(folder: str, names: Iterable[str] | None = ALL) -> bool:
    found = watcher()
    return found is not None and found.covered(folder, names)


def watch_path(path: str, names: Iterable[str] | None = ALL) -> bool:
    found = watcher()
    return found is not None and found.watch_path(path, names)
