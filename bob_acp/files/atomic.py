"""Crash-safe file writes: a reader sees the old file or the new one, never a torn one."""

from __future__ import annotations

import os
import stat
from typing import BinaryIO, Callable


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


def read_regular(path: str, limit: int) -> tuple[bytes, int]:
    """(up to `limit` + 1 bytes of `path`, its size), refusing anything but a regular file
    without blocking on it (a FIFO with no writer would block an ordinary open forever)."""
    with open_regular(path) as handle:
        size = os.fstat(handle.fileno()).st_size
        return read_up_to(handle, limit + 1), size


def read_up_to(handle: BinaryIO, limit: int) -> bytes:
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


def open_regular(path: str) -> BinaryIO:
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
