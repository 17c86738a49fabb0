"""The store of one root: Bob's own bare git repository, `<cwd>/.bob/checkpoints/<root's id>.git`,
holding the bytes of the project's files as blobs; Bob's own look (look.py) finds what changed.

Git never runs over the project's files: a command could have made a repository inside with a
filter, a hook, an fsmonitor or a FIFO for git to trip on, and Bob's git runs unconfined. Git
runs only on the store itself (cat-file, update-ref, prune, repack, count-objects), which is
hidden from sandboxed commands. The blobs of the session's last look are held by a ref of its
own (refs/bob/<session>/look), so that a prune by another session never takes what the next
window needs.

Git runs with neither the user's nor the system's configuration, without hooks or replace refs,
so a store planted under .bob/checkpoints runs nothing. The store is the user's alone: its
folders 0700, its files 0600 (core.sharedRepository), since it holds copies of files that may be
secret.
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import hashlib
import os
import shutil
import stat
import subprocess
import threading
import zlib

from bob_acp import jsontext
from bob_acp.cancel import Cancel
from bob_acp.checkpoints.look import Found, Interrupted, Seen, blob_id, look
from bob_acp.exceptions import BobError, Cancelled

GIT_TIMEOUT = 300.0  # seconds one git command on the store may take (a repack of a very large one)
CONFIG = ("[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = true\n\tlogallrefupdates = false\n"
          "\tfsmonitor = false\n\thooksPath = /dev/null\n\tsharedRepository = 0600\n[gc]\n\tauto = 0\n")
# What a store must not hold (planted, or left by an older Bob: its index held the last snapshot)
PLANTED = ("objects/info/alternates", "objects/info/http-alternates", "shallow", "commondir", "index.lock", "index",
           "info/attributes", "info/exclude")
Snapshot = Found  # a root as a look found it
LOOK_REF = "refs/look/store"  # holds the blobs of the store's last look (<git dir>.look lists them)
MAX_LOOK_BYTES = 256 * 1024 * 1024
BATCH_BYTES = 256 * 1024 * 1024  # the bytes one restore reads from the store at once, at most  # a last look larger than this is not read (made again)


class CheckpointError(BobError):
    """A snapshot or a restore could not be made; str(self) says why."""


def git_missing() -> bool:
    return shutil.which("git") is None


def store_of(cwd: str) -> str:
    from bob_acp.files import bobdir

    return os.path.join(cwd, bobdir.NAME, "checkpoints")


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
    """The store of one root, and the last look at it. Every use holds the store's lock: a
    thread lock in this process, and an flock on its lock file for other Bobs on the project."""

    def __init__(self, root: str, store: str, max_bytes: int, git_dir: str | None = None, look_ref: str = ""):
        self.root = root
        self.store = store
        self.git_dir = git_dir or os.path.join(
            store, hashlib.sha256(root.encode("utf-8", "surrogateescape")).hexdigest()[:16] + ".git")
        self.max_bytes = max_bytes
        self.look_ref = look_ref  # the ref that holds the last look's blobs ("": none kept)
        self._lock = _lock_of(self.git_dir)
        self._last = Found()  # the last look
        self._kept: set[str] = set()  # the blobs the refs under look_ref hold
        self._refs = 0  # how many refs under look_ref
        self.forgotten = False  # its session has ended: look_ref is written no more
        self._unsaved = False  # the last look is newer than the store's

    def snapshot(self, cancel: Cancel | None = None) -> Snapshot:
        """The root as it is now; the bytes of what changed since the last look kept in the store
        (under the store's lock: no prune takes a blob before a ref holds it). A first look
        starts from the store's last look, which any Bob left (so only what changed since is
        read); one cut short is kept as far as it went, for the next to continue."""
        with self._held():
            known: set[bytes] = set()
            last = self._last.files
            if not last:  # (a first look: from the store's, and most files may be stored already)
                last = self._kept_look()
                known = set(self._git(["cat-file", "--batch-all-objects", "--batch-check=%(objectname)"]).split())

            def keep(data: bytes) -> str:
                object_id = blob_id(data)
                if object_id.encode() not in known:
                    self._object(b"blob", data, object_id)
                return object_id

            first = not self._last.files
            try:
                found = look(self.root, last, self.max_bytes, keep,
                             stop=cancel.is_set if cancel is not None else lambda: False)
            except Interrupted as cut:
                self._keep_look({**last, **cut.found.files})  # (the next look continues from here)
                raise Cancelled() from None
            except OSError as exc:
                raise CheckpointError(f"{self.root} could not be looked at: {exc.strerror or exc}") from None
            if self.look_ref and not self.forgotten and (found.changed or first):
                # Held by a ref of the session's: what this look read that none holds yet (a small
                # tree; the refs of a session go with it, so the earlier ones need not be rewritten).
                # A first look's every blob (those of the store's last look too, which another
                # session's may replace).
                read = found.files if first else {path: found.files[path] for path in found.changed}
                new = {seen.blob for seen in read.values()} - self._kept
                if new:
                    self._refs += 1
                    self._keep(f"{self.look_ref}/{self._refs}", sorted(new))
                    self._kept |= new
            self._last = found
            self._unsaved = bool(found.changed) or first
            if first:
                self._keep_look(found.files)
        return found

    def _kept_look(self) -> dict[str, Seen]:
        """The store's last look (what a Bob saw of each file, and its blob, held by LOOK_REF), or
        nothing when it is not there or not whole."""
        if not os.path.exists(os.path.join(self.git_dir, *LOOK_REF.split("/"))):
            return {}
        try:
            fd = os.open(self.git_dir + ".look", os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError:
            return {}
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_LOOK_BYTES:
                return {}
            with os.fdopen(os.dup(fd), "rb") as handle:
                data = jsontext.loads(handle.read())
        except (OSError, ValueError):
            return {}
        finally:
            os.close(fd)
        try:
            return {os.fsdecode(base64.b64decode(row[0])): Seen(*row[1:])
                    for row in data["files"] if isinstance(row, list) and len(row) == 8} \
                if isinstance(data, dict) and data.get("root") == self.root and data.get("v") == 1 else {}
        except (TypeError, ValueError, KeyError):
            return {}

    def _keep_look(self, files: dict[str, Seen]) -> None:
        """(Under the store's lock.) `files` as the store's last look: a ref holding their blobs
        first, then the file that lists them, replaced whole."""
        self._keep(LOOK_REF, sorted({seen.blob for seen in files.values()}))
        rows = [[base64.b64encode(os.fsencode(path)).decode(), seen.mode, seen.dev, seen.ino, seen.size, seen.mtime,
                 seen.ctime, seen.blob] for path, seen in files.items()]
        _replace(self.git_dir + ".look", jsontext.dumps({"v": 1, "root": self.root, "files": rows}))
        self._unsaved = False

    @property
    def last(self) -> Snapshot:
        """The last look (the files as the last snapshot found them)."""
        return self._last

    def forget_look(self) -> None:
        """The session ends: its last look no longer holds anything in the store. Its ref's file
        is removed as _keep wrote it, without waiting for the store's lock (a first look of
        another session may hold it for seconds, and Bob's exit would wait for each open session)
        and without a git run; a look still being made does not write it again. A look it made
        since the store's last is kept as the store's, when the lock is free."""
        self.forgotten = True
        if self._unsaved:
            with contextlib.suppress(OSError, CheckpointError), self._held(blocking=False):
                self._keep_look(self._last.files)
        if self.look_ref:
            with contextlib.suppress(FileNotFoundError):
                shutil.rmtree(os.path.join(self.git_dir, *self.look_ref.split("/")))
        self._kept = set()

    def missing(self, blobs: list[str]) -> list[str]:
        """Those of these blobs the store does not hold."""
        if not blobs:
            return []
        with self._held():
            out = self._git(["cat-file", "--batch-check=%(objectname) %(objecttype)"],
                            "".join(f"{b}\n" for b in blobs).encode())
        return [line.split()[0] for line in out.decode().splitlines() if line.endswith(" missing")]

    def blobs(self, blob_ids: list[str], budget: int = BATCH_BYTES) -> dict[str, bytes]:
        """The bytes of these blobs, read by one git run (a restore of thousands of files is not
        thousands of runs), as far as `budget` bytes go; those it does not hold are absent."""
        if not blob_ids:
            return {}
        with self._held():
            out = self._git(["cat-file", "--batch"], "".join(f"{b}\n" for b in blob_ids).encode())
        found: dict[str, bytes] = {}
        at, total = 0, 0
        while at < len(out):
            end = out.index(b"\n", at)
            head = out[at:end].split()
            if len(head) != 3:  # ("<id> missing")
                at = end + 1
                continue
            size = int(head[2])
            if head[1] == b"blob" and total + size <= budget:
                found[head[0].decode()] = out[end + 1:end + 1 + size]
                total += size
            at = end + 1 + size + 1
        return found

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

    def _object(self, kind: bytes, body: bytes, object_id: str = "") -> str:
        """A loose object of git's own format (zlib of "<kind> <size>\\0<body>"), its id."""
        data = kind + b" %d\0" % len(body) + body
        object_id = object_id or hashlib.sha1(data).hexdigest()
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

    def _held(self, blocking: bool = True) -> _Held:
        """The store's lock; not `blocking`: BlockingIOError at once when another holds it."""
        return _Held(self, blocking)

    def _prepare(self) -> None:
        """The repository made, or its settings written again (one found here may be planted)."""
        if not os.path.isdir(os.path.join(self.git_dir, "objects")):
            self._git(["init", "-q", "--bare", "--template=", self.git_dir], in_store=False)  # (no hooks at all)
        os.chmod(self.git_dir, 0o700)
        for name, text in (("config", CONFIG),):
            path = os.path.join(self.git_dir, name)
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
             in_store: bool = True, allowed: tuple[int, ...] = (0,)) -> bytes:
        """git run on the store alone (never with a work tree: the project's files are Bob's to read)."""
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LC_ALL": "C", "GIT_CONFIG_NOSYSTEM": "1",
               "GIT_CONFIG_GLOBAL": os.devnull, "GIT_ATTR_NOSYSTEM": "1", "GIT_NO_REPLACE_OBJECTS": "1",
               "GIT_TERMINAL_PROMPT": "0", "GIT_OPTIONAL_LOCKS": "0", "HOME": os.devnull}
        if in_store:
            env["GIT_DIR"] = self.git_dir
        command = ["git", "-c", "core.fsmonitor=false", "-c", "core.hooksPath=/dev/null", "-c", "gc.auto=0",
                   "-c", "core.sharedRepository=0600", *args]
        try:
            proc = subprocess.Popen(command, stdin=subprocess.PIPE if data is not None else subprocess.DEVNULL,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                    cwd=os.path.dirname(self.git_dir), env=env)
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

    def __init__(self, shadow: Shadow, blocking: bool = True):
        self.shadow = shadow
        self.fd = -1
        self.blocking = blocking

    def __enter__(self) -> None:
        if not self.shadow._lock.acquire(blocking=self.blocking):
            raise BlockingIOError("the store is busy")
        try:
            store = self.shadow.store
            if os.path.islink(os.path.dirname(store)) or os.path.islink(store):
                raise CheckpointError(f"{store} is a link: checkpoints are kept only in a folder of the project's own")
            os.makedirs(store, mode=0o700, exist_ok=True)
            if stat.S_IMODE(os.lstat(store).st_mode) != 0o700:
                os.chmod(store, 0o700)  # (a store of 0.16, or one made by hand: the user's alone)
            self.fd = os.open(self.shadow.git_dir + ".lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
            fcntl.flock(self.fd, fcntl.LOCK_EX | (0 if self.blocking else fcntl.LOCK_NB))
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


def forget(cwd: str, session_id: str) -> None:
    """A deleted session's records, dropped from every shadow repository of its folder (and its
    unfinished restore's mark)."""
    store = store_of(cwd)
    with contextlib.suppress(OSError):
        os.unlink(os.path.join(store, f"restoring-{session_id}"))
    try:
        names = [n for n in os.listdir(store) if n.endswith(".git")]
    except OSError:
        return
    for name in names:
        try:
            shadow = Shadow("", store, 0, os.path.join(store, name))
            shadow.drop(f"refs/bob/{session_id}/")
            shadow.drop(f"refs/look/{session_id}/")
        except (OSError, CheckpointError):
            pass
