"""Bob's own look at a root, for its checkpoints: every folder, file and link the project's
.gitignore keeps, with its mode and the id of its bytes, read the way nothing a command wrote
can turn against Bob's unconfined process.

- No program runs over the project's files (no git: a nested repository's filter, hook,
  fsmonitor or `include.path` would run as Bob). A folder holding a `.git` (a repository or a
  submodule inside) is not entered at all, only named.
- No link is followed: each folder is opened beneath its parent's descriptor with O_NOFOLLOW, each
  file's status read with fstatat(AT_SYMLINK_NOFOLLOW), a link's target read as text.
- Nothing blocks: a file is opened O_NONBLOCK and read only when its descriptor is a regular file
  (a FIFO, a device, a socket is passed over).
- Only what changed is read: a file whose device, inode, size, times and mode are as the last
  look saw them keeps its id (one that changed within the look's own clock tick is read again
  next time). The last look lasts across Bob processes (the store keeps it: store.py).
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import stat
import time
from dataclasses import dataclass, field
from typing import Callable

from bob_acp.checkpoints import ignore

# What /undo never writes (restore.never_written), so never recorded: the project's repository and
# Bob's folder, and AGENTS.md; with an empty .gitmodules at a root (a sandbox's placeholder).
NEVER_RECORDED = frozenset({".bob", ".git", "AGENTS.md"})
NESTED_ENTRIES = 20000  # entries of a repository inside whose status is looked at, at most
RACY_NS = 50_000_000  # a file changed this close to the look is read again at the next one


@dataclass(frozen=True, slots=True)
class Seen:
    """A file or link as a look found it: its st_mode, what shows it changed, its blob id."""

    mode: int
    dev: int
    ino: int
    size: int
    mtime: int
    ctime: int
    blob: str

    @property
    def link(self) -> bool:
        return stat.S_ISLNK(self.mode)


@dataclass
class Found:
    """A root as one look found it."""

    files: dict[str, Seen] = field(default_factory=dict)  # path -> file or link
    folders: dict[str, int] = field(default_factory=dict)  # path -> mode bits (the root itself not included)
    big: dict[str, list[int]] = field(default_factory=dict)  # files over the size bound: [size, mtime_ns]
    ignored: dict[str, tuple[int, int, int]] = field(default_factory=dict)  # what .gitignore leaves out, top only
    nested: dict[str, int] = field(default_factory=dict)  # folders holding a repository of their own: signature
    unrecorded: dict[str, tuple[int, int, int, int]] = field(default_factory=dict)  # AGENTS.md: what shows a change
    unread: list[str] = field(default_factory=list)  # what could not be read (no permission, a bad .gitignore)
    changed: list[str] = field(default_factory=list)  # files read again (new or changed since the last look)


Store = Callable[[bytes], str]  # keeps a file's bytes, returns their blob id


class Interrupted(InterruptedError):
    """The look was stopped; `found`: what it had found of the root by then."""

    def __init__(self, found: Found):
        super().__init__("the look was stopped")
        self.found = found


def blob_id(data: bytes) -> str:
    """The id git gives a blob of these bytes."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def look(root: str, last: dict[str, Seen], max_bytes: int, keep: Store,
         stop: Callable[[], bool] = lambda: False) -> Found:
    """The root as it is now; `last`: the files of the previous look (their ids reused while
    they are unchanged); `keep`: stores the bytes of each file read; `stop`: asked between
    folders (a cancel: InterruptedError)."""
    found = Found()
    started = time.time_ns()
    top = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    pending: list[tuple[int, str, tuple[ignore.Rules, ...]]] = [(top, "", ())]
    try:
        while pending:
            if stop():
                raise Interrupted(found)
            fd, folder, rules = pending.pop()
            try:
                _folder(fd, folder, rules, found, last, max_bytes, keep, started, pending)
            finally:
                os.close(fd)
    finally:
        for fd, _folder_path, _rules in pending:
            os.close(fd)
    return found


def _folder(fd: int, folder: str, rules: tuple[ignore.Rules, ...], found: Found, last: dict[str, Seen],
            max_bytes: int, keep: Store, started: int, pending: list[tuple[int, str, tuple[ignore.Rules, ...]]]) -> None:
    prefix = folder + "/" if folder else ""
    own = _rules(fd, folder, found)
    if own is not None:
        rules = (*rules, own)
    try:
        entries = list(os.scandir(fd))
    except OSError as exc:
        found.unread.append(f"{folder or '.'} ({exc.strerror or exc})")
        return
    files = found.files
    to_files = tuple(r for r in rules if r.applies[False])  # (the rules a file can match; a folder's below)
    to_folders = tuple(r for r in rules if r.applies[True])
    for entry in entries:
        name = entry.name
        if name in NEVER_RECORDED:
            if name == "AGENTS.md":  # (never written by /undo: a change to it is said, not recorded)
                with contextlib.suppress(OSError):
                    info = entry.stat(follow_symlinks=False)
                    found.unrecorded[prefix + name] = (info.st_mode, info.st_ino, info.st_size, info.st_mtime_ns)
            continue
        path = prefix + name
        try:
            info = entry.stat(follow_symlinks=False)
        except OSError:
            continue  # (gone since the folder was read)
        if path == ".gitmodules" and info.st_size == 0:
            continue
        kind = stat.S_IFMT(info.st_mode)
        is_folder = kind == stat.S_IFDIR
        chosen = to_folders if is_folder else to_files
        if chosen and _ignored(chosen, path, name, is_folder):
            found.ignored[path] = (info.st_ino, info.st_size, info.st_mtime_ns)
            continue
        if is_folder:
            _enter(fd, name, path, info, found, rules, pending)
        elif kind == stat.S_IFREG or kind == stat.S_IFLNK:
            before = last.get(path)  # (most files are as the last look saw them: checked here, not in a call)
            if (before is not None and before.mtime == info.st_mtime_ns and before.ino == info.st_ino
                    and before.ctime == info.st_ctime_ns and before.size == info.st_size
                    and before.mode == info.st_mode and before.dev == info.st_dev):
                files[path] = before
            else:
                _file(fd, name, path, info, found, max_bytes, keep, started)


def _enter(fd: int, name: str, path: str, info: os.stat_result, found: Found, rules: tuple[ignore.Rules, ...],
           pending: list[tuple[int, str, tuple[ignore.Rules, ...]]]) -> None:
    try:
        inner = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
    except OSError as exc:
        if exc.errno not in (errno.ENOENT, errno.ENOTDIR, errno.ELOOP):
            found.unread.append(f"{path} ({exc.strerror or exc})")
            found.folders[path] = stat.S_IMODE(info.st_mode)
        return  # (gone, or swapped for something else since the folder was read)
    try:
        os.stat(".git", dir_fd=inner, follow_symlinks=False)
    except FileNotFoundError:
        pass
    except OSError:
        pass
    else:  # a repository of its own: never read (nor its git run), only whether anything in it changed
        try:
            found.nested[path] = _signature(inner)
        finally:
            os.close(inner)
        return
    found.folders[path] = stat.S_IMODE(info.st_mode)
    pending.append((inner, path, rules))


def _file(fd: int, name: str, path: str, info: os.stat_result, found: Found, max_bytes: int, keep: Store,
          started: int) -> None:
    """A file or link new or changed since the last look: read (as data), its bytes kept."""
    if stat.S_ISLNK(info.st_mode):
        try:
            data = os.fsencode(os.readlink(name, dir_fd=fd))
        except OSError:
            return
    else:
        if info.st_size > max_bytes:
            found.big[path] = [info.st_size, info.st_mtime_ns]
            return
        try:
            read = _read(fd, name, max_bytes)
        except ValueError:
            found.big[path] = [info.st_size, info.st_mtime_ns]
            return
        except OSError as exc:
            if exc.errno not in (errno.ENOENT, errno.ELOOP, errno.ENXIO):
                found.unread.append(f"{path} ({exc.strerror or exc})")
            return
        if read is None:
            return  # (no longer a regular file)
        data = read
    racy = max(info.st_mtime_ns, info.st_ctime_ns) >= started - RACY_NS
    found.files[path] = Seen(info.st_mode, info.st_dev, -1 if racy else info.st_ino, info.st_size, info.st_mtime_ns,
                             info.st_ctime_ns, keep(data))
    found.changed.append(path)


def _signature(top: int) -> int:
    """What shows that anything in a folder changed (a repository inside): a hash of the status of
    everything beneath it, its git directory's HEAD and index included, read without opening a
    file or following a link; at most NESTED_ENTRIES entries."""
    seen: list[tuple[str, int, int, int, int]] = []
    pending = [(os.dup(top), "")]
    try:
        while pending and len(seen) < NESTED_ENTRIES:
            fd, folder = pending.pop()
            try:
                entries = list(os.scandir(fd))
            except OSError:
                entries = []
            for entry in entries:
                try:
                    info = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                path = folder + entry.name
                seen.append((path, info.st_mode, info.st_size, info.st_mtime_ns, info.st_ino))
                if stat.S_ISDIR(info.st_mode) and not folder.endswith(".git/"):  # (not git's objects and refs)
                    try:
                        pending.append((os.open(entry.name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC,
                                                dir_fd=fd), path + "/"))
                    except OSError:
                        continue
            os.close(fd)
    finally:
        for fd, _folder in pending:
            os.close(fd)
    return hash(tuple(sorted(seen)))


def _read(fd: int, name: str, max_bytes: int) -> bytes | None:
    """A regular file's bytes through its own descriptor (never a link's target, never a FIFO's
    wait); None when the name is no regular file any more; ValueError past `max_bytes`."""
    own = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY, dir_fd=fd)
    try:
        info = os.fstat(own)
        if not stat.S_ISREG(info.st_mode):
            return None
        if info.st_size > max_bytes:
            raise ValueError(name)
        chunks, size = [], 0
        while chunk := os.read(own, 1 << 20):
            size += len(chunk)
            if size > max_bytes:
                raise ValueError(name)
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(own)


def _rules(fd: int, folder: str, found: Found) -> ignore.Rules | None:
    """The .gitignore of this folder, read as data (a link, a FIFO or a huge one is not read)."""
    try:
        data = _read(fd, ".gitignore", ignore.MAX_RULES_BYTES)
    except OSError as exc:
        if exc.errno in (errno.ENOENT, errno.ELOOP):
            return None  # (none, or a link: git reads no linked .gitignore either)
        found.unread.append(f"{folder + '/' if folder else ''}.gitignore ({exc.strerror or exc})")
        return None
    except ValueError:
        found.unread.append(f"{folder + '/' if folder else ''}.gitignore (not a readable file of at most 1 MiB)")
        return None
    if data is None:
        return None
    return ignore.parse(data.decode("utf-8", "surrogateescape"), folder)


def _ignored(rules: tuple[ignore.Rules, ...], path: str, name: str, folder: bool) -> bool:
    for own in reversed(rules):  # (a deeper file's rules first: the last match wins)
        said = own.decide(path, name, folder)
        if said is not None:
            return said
    return False
