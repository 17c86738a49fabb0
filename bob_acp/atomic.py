"""Crash-safe file writes: a reader sees the old file or the new one, never a torn one."""

from __future__ import annotations

import os
import stat
from typing import Callable


def _read_umask() -> int:
    """The process umask, read without changing it: os.umask() can only be read by setting it,
    and a file another thread creates in that window would get the temporary mask."""
    try:
        with open("/proc/self/status", "rb") as handle:
            for line in handle:
                if line.startswith(b"Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    return 0o022  # no /proc (not Linux): the usual default; no mode is ever widened by it


UMASK = _read_umask()


class NotRegular(OSError):
    """The path exists but is not a regular file (a device, FIFO, socket or directory)."""


def file_kind(mode: int) -> str:
    for test, name in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device")):
        if test(mode):
            return name
    return "not a regular file"


def atomic_write(path: str, data: bytes, mode: int | None = None,
                 may_commit: Callable[[], bool] | None = None) -> None:
    """Write `data` to `path` through a temp file in the same folder, fsync, then rename.

    Parents are created. The file keeps its permission bits when it existed (else `mode`, or
    0o666 less the umask, as open() would give). The folder is fsynced too, so the rename itself
    survives a power cut. A symlink is followed, so the file it points at is replaced and the
    link kept; a path that is (or points at) anything but a regular file is refused (NotRegular):
    renaming over a device node would replace the node itself.

    `may_commit` is asked right before the rename: False abandons the write (InterruptedError),
    so a cancelled turn's change happens entirely or not at all.
    """
    path = os.path.realpath(path)
    folder = os.path.dirname(path)
    os.makedirs(folder, exist_ok=True)
    try:
        info = os.stat(path)
    except FileNotFoundError:
        info = None
    if info is not None and not stat.S_ISREG(info.st_mode):
        raise NotRegular(f"{path} is {file_kind(info.st_mode)}")
    if mode is None:
        mode = info.st_mode & 0o7777 if info is not None else 0o666 & ~UMASK
    import tempfile  # lazy: start-up does not write files

    fd, tmp = tempfile.mkstemp(dir=folder, prefix="." + os.path.basename(path) + ".", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, mode)
        if may_commit is not None and not may_commit():
            raise InterruptedError("write abandoned before it was committed")
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    dir_fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


class OutsideRoot(PermissionError):
    """The path leads out of the folder it must stay in (a link to elsewhere), or into a part
    of it that must not be written unasked."""


MAX_LINKS = 40  # links followed in one path, as the kernel's own limit


def write_beneath(root: str, relative: str, data: bytes, may_commit: Callable[[], bool] | None = None,
                  refuse: Callable[[str], bool] | None = None) -> None:
    """atomic_write of `relative` inside the folder `root`, which no link can carry it out of,
    however the links change meanwhile: the path is walked one component at a time from a
    descriptor of the root (each opened with O_NOFOLLOW, each link read and followed only while
    it stays inside the root), missing folders are made on the way, and the temp file is made
    and renamed through the descriptor of the file's folder. `refuse(real path relative to the
    root)`: a place inside the root that must not be written either. OutsideRoot otherwise."""
    folder_fd, name, real = _walk(root, relative)
    try:
        if refuse is not None and refuse(real):
            raise OutsideRoot(13, f"{real} is not written unasked")
        _replace_in(folder_fd, name, data, may_commit)
    finally:
        os.close(folder_fd)


def _walk(root: str, relative: str) -> tuple[int, str, str]:
    """(a descriptor of the folder the file is in, its name there, its path relative to the
    root), following links inside the root and making missing folders."""
    import errno

    real_root = os.path.realpath(root)
    pending = [part for part in relative.split("/") if part not in ("", ".")]
    if not pending:
        raise IsADirectoryError(errno.EISDIR, "the folder itself", root)
    stack = [os.open(root, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)]
    names: list[str] = []
    links = 0
    try:
        while True:
            part = pending.pop(0)
            if part == "..":
                if not names:
                    raise OutsideRoot(errno.EXDEV, f"{relative} leads out of the folder it must stay in")
                os.close(stack.pop())
                names.pop()
                continue
            try:
                info = os.stat(part, dir_fd=stack[-1], follow_symlinks=False)
            except FileNotFoundError:
                info = None
            if info is not None and stat.S_ISLNK(info.st_mode):
                links += 1
                if links > MAX_LINKS:
                    raise OSError(errno.ELOOP, "too many levels of links", relative)
                target = os.readlink(part, dir_fd=stack[-1])
                if os.path.isabs(target):
                    inside = os.path.relpath(os.path.normpath(target), real_root)
                    if inside == ".." or inside.startswith("../"):
                        raise OutsideRoot(errno.EXDEV, f"{relative} links out of the folder it must stay in: {target}")
                    for fd in stack[1:]:
                        os.close(fd)
                    del stack[1:]
                    names.clear()
                    target = inside
                pending[:0] = [p for p in target.split("/") if p not in ("", ".")]
                if not pending:
                    raise IsADirectoryError(errno.EISDIR, "a link to the folder itself", relative)
                continue
            if not pending:  # the file: a name in the folder reached (a regular file, or none yet)
                folder = os.open(".", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=stack[-1])
                return folder, part, "/".join([*names, part])
            if info is None:
                try:
                    os.mkdir(part, dir_fd=stack[-1])
                except FileExistsError:
                    pass
            try:
                stack.append(os.open(part, os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC,
                                     dir_fd=stack[-1]))
            except NotADirectoryError:
                if not stat.S_ISLNK(os.stat(part, dir_fd=stack[-1], follow_symlinks=False).st_mode):
                    raise
                links += 1  # changed under us into a link: looked at again (bounded like links)
                if links > MAX_LINKS:
                    raise OSError(errno.ELOOP, "too many levels of links", relative) from None
                pending.insert(0, part)
                continue
            names.append(part)
    finally:
        for fd in stack:
            os.close(fd)


def _replace_in(dir_fd: int, name: str, data: bytes, may_commit: Callable[[], bool] | None) -> None:
    import secrets

    try:
        info = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        info = None
    if info is not None and not stat.S_ISREG(info.st_mode):
        raise NotRegular(f"{name} is {file_kind(info.st_mode)}")
    mode = info.st_mode & 0o7777 if info is not None else 0o666 & ~UMASK
    temp = f".{name}.{secrets.token_hex(6)}.tmp"
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=dir_fd)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fchmod(handle.fileno(), mode)
            os.fsync(handle.fileno())
        if may_commit is not None and not may_commit():
            raise InterruptedError("write abandoned before it was committed")
        os.replace(temp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException:
        try:
            os.unlink(temp, dir_fd=dir_fd)
        except FileNotFoundError:
            pass
        raise
    os.fsync(dir_fd)


def read_regular(path: str, limit: int) -> tuple[bytes, int]:
    """(up to `limit` + 1 bytes of `path`, its size), refusing anything but a regular file
    without blocking on it (a FIFO with no writer would block an ordinary open forever)."""
    with open_regular(path) as handle:
        size = os.fstat(handle.fileno()).st_size
        return read_up_to(handle, limit + 1), size


def read_up_to(handle, limit: int) -> bytes:
    """At most `limit` bytes of an open file, in chunks (a read of `limit` at once takes that
    much memory before a byte is read: a 64 MiB cap would cost 64 MiB under `ulimit -v`)."""
    chunks: list[bytes] = []
    left = limit
    while left > 0:
        chunk = handle.read(min(left, 1024 * 1024))
        if not chunk:
            break
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def open_regular(path: str):
    """A binary file object for a regular file; NotRegular for anything else, checked before
    opening (no device is opened) and again on the open descriptor (no swap in between)."""
    info = os.stat(path)
    if not stat.S_ISREG(info.st_mode):
        raise NotRegular(f"{path} is {file_kind(info.st_mode)}")
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise NotRegular(f"{path} is {file_kind(mode)}")
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise
