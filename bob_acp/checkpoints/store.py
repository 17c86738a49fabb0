"""The git store of one root: Bob's own shadow repository, `<cwd>/.bob/checkpoints/<root's id>.git`,
with the root as its work tree and an index of its own (the user's `.git`, its index, stash and
refs, is never read or written).

A snapshot lists what changed since the previous one (`ls-files -o -m --directory`, one walk of
the tree that honours the project's .gitignore and leaves out every .git and .bob), adds just
that to the index, and writes a tree: its cost is one walk plus what changed. Bytes are kept as
they are (every filter and line-end conversion off); a file over the size bound is not added.
The index is a cache of the last snapshot: a broken one is thrown away and made again.

Git runs with neither the user's nor the system's configuration, without hooks, fsmonitor,
replace refs or attributes but Bob's, so a repository planted under .bob/checkpoints runs
nothing. The store is the user's alone: its folders 0700, its files 0600 (core.sharedRepository),
since it holds copies of files that may be secret.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import stat
import subprocess
import threading
import zlib
from dataclasses import dataclass, field

from bob_acp.cancel import Cancel
from bob_acp.exceptions import BobError, Cancelled

FILE, EXECUTABLE, LINK, REPOSITORY = "100644", "100755", "120000", "160000"
GIT_TIMEOUT = 300.0  # seconds one git command may take (a first snapshot of a very large project)
FULL_ADD = 2000  # past this many changed paths a snapshot adds the whole tree (one pathspec, not thousands)
CONFIG = ("[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = false\n\tlogallrefupdates = false\n"
          "\tfsmonitor = false\n\thooksPath = /dev/null\n\tautocrlf = false\n\tsymlinks = true\n\tquotepath = false\n"
          "\tsharedRepository = 0600\n[gc]\n\tauto = 0\n")
EXCLUDE = ".bob/\n.git\n"
ATTRIBUTES = "* -text -eol -filter -ident -working-tree-encoding -diff -merge\n"
PLANTED = ("objects/info/alternates", "objects/info/http-alternates", "shallow", "commondir", "index.lock")
Entry = tuple[str, str]  # (git file mode, object id) of one path in a tree


class CheckpointError(BobError):
    """A snapshot or a restore could not be made; str(self) says why."""


def git_missing() -> bool:
    return shutil.which("git") is None


def store_of(cwd: str) -> str:
    from bob_acp.files import bobdir

    return os.path.join(cwd, bobdir.NAME, "checkpoints")


@dataclass
class Snapshot:
    """A root as it was: its tree, its empty folders (git keeps none), the files left out for
    their size (path -> [size, mtime_ns]), and the paths this snapshot found changed since the
    one before (their modes are looked at again)."""

    tree: str
    empty: frozenset[str]
    big: dict[str, list[int]]
    listed: list[str] = field(default_factory=list)


class _Locks:
    """One thread lock per shadow repository (and per pack of one), for the life of Bob: few,
    one per root a session ever had."""

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._by_dir: dict[str, threading.Lock] = {}

    def of(self, git_dir: str) -> threading.Lock:
        with self._guard:
            return self._by_dir.setdefault(git_dir, threading.Lock())


_locks = _Locks()
_lock_of = _locks.of


class Shadow:
    """The shadow repository of one root. Every use holds its lock: a thread lock in this
    process, and an flock on its lock file for other Bobs on the same project."""

    def __init__(self, root: str, store: str, max_bytes: int, git_dir: str | None = None):
        self.root = root
        self.store = store
        self.git_dir = git_dir or os.path.join(
            store, hashlib.sha256(root.encode("utf-8", "surrogateescape")).hexdigest()[:16] + ".git")
        self.max_bytes = max_bytes
        self._lock = _lock_of(self.git_dir)
        self.rebuilt = False  # its index was broken and was made anew (said once by the caller)
        self._last_tree: tuple[tuple[int, int, int], str] | None = None  # (the index file's signature, its tree)

    def snapshot(self, cancel: Cancel | None = None) -> Snapshot:
        with self._held():
            try:
                return self._snapshot(cancel)
            except CheckpointError:
                if cancel is not None and cancel.is_set():
                    raise
                # (the index is a cache of the last snapshot: a broken one is made again, whole)
                index = os.path.join(self.git_dir, "index")
                if not os.path.exists(index):
                    raise
                os.unlink(index)
                self.rebuilt = True
                return self._snapshot(cancel)

    def _snapshot(self, cancel: Cancel | None) -> Snapshot:
        listed = [os.fsdecode(p) for p in filter(None, self._git(
            ["ls-files", "-z", "-o", "-m", "--directory", "--exclude-standard"], cancel=cancel).split(b"\0"))]
        folders = [p for p in listed if p.endswith("/")]
        files = [p for p in listed if not p.endswith("/")]
        files += self._inside(folders, cancel)  # (new folders come whole: their files, for the bound and modes)
        big = self._big(files)
        if len(files) > FULL_ADD:  # (a first snapshot: the whole tree at once, never thousands of pathspecs)
            # (--ignore-errors: a file it cannot read, or a repository inside without a commit, is
            # left out of the record, and the rest is recorded: exit status 1)
            self._git(["add", "-A", "--ignore-errors", "--pathspec-from-file=-", "--pathspec-file-nul"],
                      b".\0" + _specs(big, "exclude,literal"), cancel, allowed=(0, 1))
        elif files:
            # Just these paths, without the refresh of every entry `git add` makes: a file that is
            # a folder now leaves the index here, and its files join it below.
            folders_now = [p for p in files if os.path.isdir(os.path.join(self.root, p))
                           and not os.path.islink(os.path.join(self.root, p))]
            repositories = [f.rstrip("/") for f in folders if os.path.exists(os.path.join(self.root, f, ".git"))]
            self._index([p for p in files if p not in big] + repositories, cancel)
            if folders_now:
                inside = self._inside([p + "/" for p in folders_now], cancel)
                big.update(self._big(inside))
                self._index([p for p in inside if p not in big], cancel)
                files += inside
        if big:  # (a file that grew past the bound since the last snapshot leaves the index too)
            self._git(["update-index", "--force-remove", "-z", "--stdin"],
                      b"".join(os.fsencode(p) + b"\0" for p in big), cancel)
        tree = self._tree(cancel, changed=bool(files) or bool(big))
        empty = frozenset(f.rstrip("/") for f in folders if _empty(os.path.join(self.root, f)))
        return Snapshot(tree, empty, big, files)

    def _inside(self, folders: list[str], cancel: Cancel | None) -> list[str]:
        """The files of these folders that the project's ignore rules keep."""
        found: list[str] = []
        for start in range(0, len(folders), 256):
            out = self._git(["ls-files", "-z", "-o", "--exclude-standard", "--",
                             *(f":(literal){f}" for f in folders[start:start + 256])], cancel=cancel)
            found += [os.fsdecode(p) for p in filter(None, out.split(b"\0"))]
        return found

    def _big(self, files: list[str]) -> dict[str, list[int]]:
        big: dict[str, list[int]] = {}
        root = os.fsencode(self.root)
        for path in files:
            try:
                info = os.lstat(os.path.join(root, os.fsencode(path)))
            except OSError:
                continue
            if stat.S_ISREG(info.st_mode) and info.st_size > self.max_bytes:
                big[path] = [info.st_size, info.st_mtime_ns]
        return big

    def _index(self, paths: list[str], cancel: Cancel | None) -> None:
        if not paths:
            return
        try:
            self._git(["update-index", "--add", "--remove", "--replace", "-z", "--stdin"],
                      b"".join(os.fsencode(p) + b"\0" for p in paths), cancel)
        except CheckpointError:
            if cancel is not None and cancel.is_set():
                raise
            # (a file it cannot read: `git add` leaves just that one out and records the rest)
            self._git(["add", "-A", "--ignore-errors", "--pathspec-from-file=-", "--pathspec-file-nul"],
                      _specs(paths), cancel, allowed=(0, 1))

    def _tree(self, cancel: Cancel | None, changed: bool) -> str:
        """The index as a tree: the last one again when nothing changed it since (its file as
        this process last saw it), without a git run."""
        index = os.path.join(self.git_dir, "index")
        try:
            info = os.stat(index)
            seen = (info.st_ino, info.st_size, info.st_mtime_ns)
        except OSError:
            seen = None
        if not changed and seen is not None and self._last_tree is not None and self._last_tree[0] == seen:
            return self._last_tree[1]
        tree = self._git(["write-tree"], cancel=cancel).decode().strip()
        try:
            info = os.stat(index)
            self._last_tree = ((info.st_ino, info.st_size, info.st_mtime_ns), tree)
        except OSError:
            self._last_tree = None
        return tree

    def changes(self, before: str, after: str) -> list[tuple[str, Entry | None, Entry | None]]:
        """(path, its mode and object before, after) for each file that differs; None: absent."""
        if before == after:
            return []
        with self._held():
            out = self._git(["diff-tree", "-r", "-z", "--no-renames", before, after])
        fields = out.split(b"\0")
        found = []
        for head, raw in zip(fields[0::2], fields[1::2], strict=False):  # (a trailing empty field)
            if not head.startswith(b":"):
                continue
            old_mode, new_mode, old_id, new_id, _status = head[1:].decode().split(" ")
            found.append((os.fsdecode(raw), None if old_mode == "000000" else (old_mode, old_id),
                          None if new_mode == "000000" else (new_mode, new_id)))
        return found

    def folders(self, tree: str) -> set[str]:
        """The folders a tree holds (those with a file somewhere beneath)."""
        with self._held():
            out = self._git(["ls-tree", "-r", "-d", "-z", tree])
        return {os.fsdecode(line.split(b"\t", 1)[1]) for line in filter(None, out.split(b"\0"))
                if line.split(b" ", 2)[1] == b"tree"}  # (not a repository inside: its commit is no folder)

    def paths(self) -> list[str]:
        """Every path of the last snapshot (its index)."""
        with self._held():
            out = self._git(["ls-files", "-z"])
        return [os.fsdecode(p) for p in filter(None, out.split(b"\0"))]

    def ignored(self, limit: int = 4096) -> list[str]:
        """What the project's ignore rules leave out, each ignored folder as one entry (at most
        `limit` entries: a look at them must stay cheap)."""
        with self._held():
            out = self._git(["ls-files", "-z", "-o", "-i", "--exclude-standard", "--directory"])
        return [os.fsdecode(p).rstrip("/") for p in filter(None, out.split(b"\0"))][:limit]

    def blob(self, blob_id: str) -> bytes:
        with self._held():
            return self._git(["cat-file", "blob", blob_id])

    def keep(self, ref: str, blobs: list[str]) -> None:
        """A ref to a tree holding these blobs: they outlive every prune while it is there."""
        with self._held():
            self._keep(ref, blobs)

    def put_kept(self, ref: str, datas: list[bytes]) -> list[str]:
        """These bytes stored as blobs and held by `ref` at once (a prune between the two, by
        another session, would take them)."""
        with self._held():
            blobs = [self._object(b"blob", data) for data in datas]
            self._keep(ref, blobs)
        return blobs

    def _keep(self, ref: str, blobs: list[str]) -> None:
        """`ref` names a tree of these blobs (each entry named by its id). Written as git writes
        them, without a git run each: a turn pays for its windows, not for bookkeeping."""
        body = b"".join(b"100644 " + blob.encode() + b"\0" + bytes.fromhex(blob) for blob in sorted(set(blobs)))
        tree = self._object(b"tree", body)
        parts = ref.split("/")
        _private_folders(self.git_dir, parts[:-1])
        _replace(os.path.join(self.git_dir, *parts), tree.encode() + b"\n")

    def _object(self, kind: bytes, body: bytes) -> str:
        """A loose object of git's own format (zlib of "<kind> <size>\\0<body>"), its id."""
        data = kind + b" %d\0" % len(body) + body
        object_id = hashlib.sha1(data).hexdigest()
        path = os.path.join(self.git_dir, "objects", object_id[:2], object_id[2:])
        if not os.path.exists(path):
            _private_folders(self.git_dir, ["objects", object_id[:2]])
            _replace(path, zlib.compress(data, 1), 0o400)
        return object_id

    def drop(self, prefix: str) -> None:
        """Every ref under `prefix` deleted, and the objects nothing holds any more pruned."""
        with self._held():
            refs = self._git(["for-each-ref", "--format=%(refname)", prefix]).decode().split()
            if not refs:
                return
            self._git(["update-ref", "--stdin"], "".join(f"delete {ref}\n" for ref in refs).encode())
            self._git(["prune", "--expire=now"])

    def drop_loose(self) -> None:
        """Loose objects nothing holds, pruned (under the lock: no turn adds one meanwhile)."""
        with self._held():
            self._git(["prune", "--expire=now"])

    def size(self) -> tuple[int, int]:
        """(bytes the store takes on disk, loose objects in it)."""
        with self._held():
            out = self._git(["count-objects", "-v"]).decode()
        fields = dict(line.split(": ", 1) for line in out.splitlines() if ": " in line)
        return (int(fields.get("size", 0)) + int(fields.get("size-pack", 0))) * 1024, int(fields.get("count", 0))

    def pack(self) -> None:
        """Everything a ref or the index holds, in one pack; what nothing holds loose, for the next
        prune (drop, under the lock). Without the shadow's lock: git packs safely beside the
        snapshots and puts of a turn, so a turn never waits for a pack."""
        if not os.path.isdir(os.path.join(self.git_dir, "objects")):
            return
        with _lock_of(self.git_dir + ".pack"):
            fd = os.open(self.git_dir + ".pack.lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                self._git(["repack", "-A", "-d", "-q"])
            finally:
                os.close(fd)

    # ---- plumbing --------------------------------------------------------------------------------

    def _held(self) -> _Held:
        return _Held(self)

    def _prepare(self) -> None:
        """The repository made, or its settings written again (one found here may be planted)."""
        if not os.path.isdir(os.path.join(self.git_dir, "objects")):
            self._git(["init", "-q", "--bare", "--template=", self.git_dir], work_tree=False)  # (no hooks at all)
        os.chmod(self.git_dir, 0o700)
        for name, text in (("config", CONFIG), ("info/exclude", EXCLUDE), ("info/attributes", ATTRIBUTES)):
            path = os.path.join(self.git_dir, name)
            os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(text)
        # (index.lock: left by a git killed with its Bob; under the flock no other git runs here)
        for planted in PLANTED:
            try:
                os.unlink(os.path.join(self.git_dir, planted))
            except FileNotFoundError:
                pass

    def _git(self, args: list[str], data: bytes | None = None, cancel: Cancel | None = None,
             work_tree: bool = True, allowed: tuple[int, ...] = (0,)) -> bytes:
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LC_ALL": "C", "GIT_CONFIG_NOSYSTEM": "1",
               "GIT_CONFIG_GLOBAL": os.devnull, "GIT_ATTR_NOSYSTEM": "1", "GIT_NO_REPLACE_OBJECTS": "1",
               "GIT_TERMINAL_PROMPT": "0", "GIT_OPTIONAL_LOCKS": "0", "HOME": os.devnull}
        if work_tree:
            env["GIT_DIR"] = self.git_dir
            if self.root:
                env["GIT_WORK_TREE"] = self.root
        command = ["git", "-c", "core.fsmonitor=false", "-c", "core.hooksPath=/dev/null", "-c", "gc.auto=0",
                   "-c", "core.autocrlf=false", "-c", "core.quotepath=false", "-c", "core.untrackedCache=false",
                   "-c", "core.sharedRepository=0600", *args]
        try:
            proc = subprocess.Popen(command, stdin=subprocess.PIPE if data is not None else subprocess.DEVNULL,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                    cwd=(self.root if work_tree and self.root else os.path.dirname(self.git_dir)),
                                    env=env)
        except OSError as exc:
            raise CheckpointError(f"git could not start: {exc.strerror or exc}") from None
        unsubscribe = cancel.subscribe(proc.kill) if cancel is not None else None
        try:
            out, err = proc.communicate(data, timeout=GIT_TIMEOUT)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            raise CheckpointError(f"git {args[0]} took more than {GIT_TIMEOUT:g} s") from None
        finally:
            if unsubscribe is not None:
                unsubscribe()
        if cancel is not None and cancel.is_set():
            raise Cancelled()
        if proc.returncode not in allowed:
            line = " ".join(err.decode("utf-8", "replace").split())[:300] or f"exit status {proc.returncode}"
            raise CheckpointError(f"git {args[0]} failed: {line}")
        return out


class _Held:
    """A shadow's lock (this process's, then the flock other processes see), prepared once held."""

    def __init__(self, shadow: Shadow):
        self.shadow = shadow
        self.fd = -1

    def __enter__(self) -> None:
        self.shadow._lock.acquire()
        try:
            store = self.shadow.store
            if os.path.islink(os.path.dirname(store)) or os.path.islink(store):
                raise CheckpointError(f"{store} is a link: checkpoints are kept only in a folder of the project's own")
            os.makedirs(store, mode=0o700, exist_ok=True)
            if stat.S_IMODE(os.lstat(store).st_mode) != 0o700:
                os.chmod(store, 0o700)  # (a store of 0.16, or one made by hand: the user's alone)
            self.fd = os.open(self.shadow.git_dir + ".lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
            fcntl.flock(self.fd, fcntl.LOCK_EX)
            self.shadow._prepare()
        except BaseException:
            self.__exit__()
            raise

    def __exit__(self, *_exc: object) -> None:
        if self.fd >= 0:
            os.close(self.fd)  # (the flock goes with it)
            self.fd = -1
        self.shadow._lock.release()


def _private_folders(base: str, parts: list[str]) -> None:
    """The folders `parts` beneath `base`, each made 0700 when missing (makedirs' mode is the
    last one's alone)."""
    for index in range(len(parts)):
        try:
            os.mkdir(os.path.join(base, *parts[:index + 1]), 0o700)
        except FileExistsError:
            pass


def _replace(path: str, data: bytes, mode: int = 0o600) -> None:
    temp = f"{path}.{os.getpid()}.{threading.get_ident()}.tmp"
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.chmod(temp, mode)
        os.replace(temp, path)
    except BaseException:
        try:
            os.unlink(temp)
        except FileNotFoundError:
            pass
        raise


def _specs(paths: object, magic: str = "literal") -> bytes:
    return b"".join(b":(" + magic.encode() + b")" + os.fsencode(p) + b"\0" for p in paths)  # type: ignore[attr-defined]


def _empty(folder: str) -> bool:
    try:
        with os.scandir(folder) as entries:
            return next(entries, None) is None
    except OSError:
        return False


def blob_id(data: bytes) -> str:
    """The id git gives a blob of these bytes."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def forget(cwd: str, session_id: str) -> None:
    """A deleted session's records, dropped from every shadow repository of its folder."""
    store = store_of(cwd)
    try:
        names = [n for n in os.listdir(store) if n.endswith(".git")]
    except OSError:
        return
    for name in names:
        try:
            Shadow("", store, 0, os.path.join(store, name)).drop(f"refs/bob/{session_id}/")
        except (OSError, CheckpointError):
            pass
