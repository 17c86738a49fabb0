"""Link-safe file operations beneath a folder: every write, unlink, rename, mkdir, rmdir, symlink
and chmod happens relative to a descriptor of the folder it is in, reached from the root one
component at a time with O_NOFOLLOW, so no link put in the way (before or while it runs) can
carry it out of the root.

Two walks: the write tools' (`write_beneath`), which follows a link while it stays inside the
root, as a user who links `docs -> site/docs` expects; and the restore's (`Place`), which
follows none: /undo puts back exactly what it recorded, at the names it recorded, and a link
found on the way means somebody changed the tree since, so it touches nothing there.
"""

from __future__ import annotations

import errno
import os
import secrets
import stat
from typing import Callable

from bob_acp.files.atomic import UMASK, NotRegular, file_kind


class OutsideRoot(PermissionError):
    """The path leads out of the folder it must stay in (a link to elsewhere), or into a part
    of it that must not be written unasked."""


MAX_LINKS = 40  # links followed in one path, as the kernel's own limit
# A folder on the way, opened to go through it (O_PATH: with its search permission alone, as the
# kernel allows its owner: one without read permission, 0311, is no wall to a restore)
PASSAGE = os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC


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
        info = _lstat(folder_fd, name)
        if info is not None and not stat.S_ISREG(info.st_mode):
            raise NotRegular(f"{name} is {file_kind(info.st_mode)}")
        mode = info.st_mode & 0o7777 if info is not None else 0o666 & ~UMASK
        replace_file(folder_fd, name, data, mode, may_commit)
    finally:
        os.close(folder_fd)


def _walk(root: str, relative: str) -> tuple[int, str, str]:
    """(a descriptor of the folder the file is in, its name there, its path relative to the
    root), following links inside the root and making missing folders."""
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
            info = _lstat(stack[-1], part)
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


def _lstat(dir_fd: int, name: str) -> os.stat_result | None:
    try:
        return os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except (FileNotFoundError, NotADirectoryError):
        return None


def replace_file(dir_fd: int, name: str, data: bytes, mode: int, may_commit: Callable[[], bool] | None = None) -> None:
    """`name` in the folder `dir_fd` (a descriptor that can be fsynced) replaced by a file of
    `data` with exactly `mode`: a temp file made beside it (0600 until its mode is set, so a
    secret is never readable by others on the way), fsynced, renamed over the name. A rename
    replaces the name, so a hard link elsewhere to the old file is never written through."""
    temp = f".{name[:200]}.{secrets.token_hex(6)}.tmp"
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=dir_fd)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fchmod(handle.fileno(), mode & 0o7777)
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
    _sync_folder(dir_fd)


def _sync_folder(dir_fd: int) -> None:
    """The folder's entries on disk (a descriptor opened with O_PATH cannot be synced: the folder
    is opened for it, where it may be read; one that may not is left to the kernel's own)."""
    try:
        os.fsync(dir_fd)
        return
    except OSError as exc:
        if exc.errno != errno.EBADF:
            raise
    try:
        fd = os.open(".", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=dir_fd)
    except PermissionError:
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class Place:
    """A name beneath a root reached without following any link: the descriptor of its folder
    (None while a folder on the way does not exist) and its name there. Every operation acts
    through that descriptor, so a folder swapped for a link after the place was found is never
    acted through: the swapped name is the one link the walk does not follow."""

    def __init__(self, root: str, relative: str, make: bool = False, folder_mode: int = 0o777):
        parts = relative.split("/")
        if not relative or any(p in ("", ".", "..") for p in parts) or relative.startswith("/") or "\0" in relative:
            raise OutsideRoot(errno.EINVAL, f"{relative!r} is not a plain path inside {root}")
        self.root, self.relative, self.name = root, relative, parts[-1]
        self.fd: int | None = None
        fd = os.open(root, PASSAGE)
        try:
            for index, part in enumerate(parts[:-1]):
                try:
                    inner = os.open(part, PASSAGE | os.O_NOFOLLOW, dir_fd=fd)
                except FileNotFoundError:
                    if not make:
                        return  # (nothing beneath can exist: the place is absent)
                    try:
                        os.mkdir(part, folder_mode & 0o7777, dir_fd=fd)
                    except FileExistsError:
                        pass
                    inner = os.open(part, PASSAGE | os.O_NOFOLLOW, dir_fd=fd)
                except (NotADirectoryError, OSError) as exc:
                    if isinstance(exc, NotADirectoryError) or exc.errno == errno.ELOOP:
                        shown = "/".join(parts[:index + 1])
                        if make or _is_link(fd, part):
                            raise OutsideRoot(errno.ELOOP, f"{shown} is a link or not a folder: nothing is done "
                                                           "through it") from None
                        return  # (a file where a folder was: nothing beneath it exists)
                    raise
                os.close(fd)
                fd = inner
            self.fd, fd = fd, -1
        finally:
            if fd >= 0:
                os.close(fd)

    def __enter__(self) -> Place:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None

    def lstat(self) -> os.stat_result | None:
        return None if self.fd is None else _lstat(self.fd, self.name)

    def _folder(self) -> int:
        if self.fd is None:
            raise FileNotFoundError(errno.ENOENT, "a folder on its way is missing", self.relative)
        return self.fd

    def read(self, limit: int) -> bytes:
        """The bytes of the regular file here (never through a link, never a FIFO's wait)."""
        fd = os.open(self.name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=self._folder())
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                raise NotRegular(f"{self.relative} is {file_kind(info.st_mode)}")
            if info.st_size > limit:
                raise ValueError(f"{self.relative} is larger than {limit} bytes")
            chunks = []
            while chunk := os.read(fd, 1 << 20):
                chunks.append(chunk)
            return b"".join(chunks)
        finally:
            os.close(fd)

    def readlink(self) -> str:
        return os.readlink(self.name, dir_fd=self._folder())

    def write(self, data: bytes, mode: int) -> None:
        replace_file(self._folder(), self.name, data, mode)

    def symlink(self, target: str) -> None:
        """The link made beside and renamed over the name (never a moment without one)."""
        folder = self._folder()
        temp = f".{self.name[:200]}.{secrets.token_hex(6)}.link"
        os.symlink(target, temp, dir_fd=folder)
        try:
            os.replace(temp, self.name, src_dir_fd=folder, dst_dir_fd=folder)
        except BaseException:
            try:
                os.unlink(temp, dir_fd=folder)
            except FileNotFoundError:
                pass
            raise

    def unlink(self) -> None:
        os.unlink(self.name, dir_fd=self._folder())

    def rmdir(self) -> None:
        """Only an empty folder (OSError ENOTEMPTY otherwise: what is in it is somebody's)."""
        os.rmdir(self.name, dir_fd=self._folder())

    def mkdir(self, mode: int) -> None:
        os.mkdir(self.name, 0o700, dir_fd=self._folder())
        self.chmod(mode)  # (the exact mode: mkdir's would be narrowed by the umask)

    def chmod(self, mode: int) -> None:
        """The mode of what is here, set through a descriptor of it (O_PATH: no read permission
        needed), never of a link's target."""
        fd = os.open(self.name, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=self._folder())
        try:
            if stat.S_ISLNK(os.fstat(fd).st_mode):
                raise OutsideRoot(errno.ELOOP, f"{self.relative} is a link: its mode is not set through it")
            os.chmod(f"/proc/self/fd/{fd}", mode & 0o7777)
        finally:
            os.close(fd)


def _is_link(dir_fd: int, name: str) -> bool:
    info = _lstat(dir_fd, name)
    return info is not None and stat.S_ISLNK(info.st_mode)


def move_beneath(root: str, relative: str, destination: str) -> None:
    """The name `relative` itself (a link moved as the link, a folder with what it holds) renamed
    to `destination`, both beneath `root` and reached without following any link (the folders
    of `destination` made 0700 on the way): never a link's target, never out of the root, never
    through a folder a link stands in for."""
    with Place(root, relative) as source, Place(root, destination, make=True, folder_mode=0o700) as target:
        if source.lstat() is None:
            raise FileNotFoundError(errno.ENOENT, "not there any more", relative)
        os.rename(source.name, target.name, src_dir_fd=source._folder(), dst_dir_fd=target._folder())
