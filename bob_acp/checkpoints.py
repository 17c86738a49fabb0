"""Checkpoints (tools.checkpoints): the state of a session's folders before and after each turn
that changed them, so that /undo takes a turn back and /redo puts it again.

Each root of a session has a shadow git repository of Bob's own,
`<cwd>/.bob/checkpoints/<root's id>.git`, with the root as its work tree and an index of its own:
the user's `.git` (its index, its stash, its refs) is never read or written. A snapshot is
`git add -A` into that index and `git write-tree`: it honours the project's .gitignore (no
node_modules is copied), leaves out every .git and .bob, costs in proportion to what changed since
the previous one, and keeps the bytes as they are (every filter and line-end conversion off). A
file over tools.checkpointMaxBytes is not recorded; /undo names it. The trees a session still
needs are kept by refs (refs/bob/<session>/<record>/…); the rest are pruned.

A record (each root's tree before and after the turn) is kept in the session's file, signed with
a key of the user's own, outside every project: a record that a cloned repository brings along,
or one edited by hand, is never used to write a file. Git runs with neither the user's nor the
system's configuration, without hooks, fsmonitor, replace refs or attributes but Bob's, so a
repository planted under .bob/checkpoints runs nothing.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
import shutil
import stat
import subprocess
import threading
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable

from bob_acp import bobdir, threads
from bob_acp.atomic import OutsideRoot, write_beneath
from bob_acp.cancel import Cancel
from bob_acp.exceptions import BobError, Cancelled
from bob_acp.workspace import PRIVATE_FOLDERS

if TYPE_CHECKING:
    from bob_acp.log import Logger
    from bob_acp.workspace import Workspace

FILE, EXECUTABLE, LINK, REPOSITORY = "100644", "100755", "120000", "160000"
READ_ONLY_TOOLS = frozenset({"read_file", "read_skill", "update_plan"})  # a call of any other may change files
GIT_TIMEOUT = 300.0  # seconds one git command may take (a first snapshot of a very large project)
TAG = "checkpoint"  # the key on a turn's user message naming its record
CONFIG = ("[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = false\n\tlogallrefupdates = false\n"
          "\tfsmonitor = false\n\thooksPath = /dev/null\n\tautocrlf = false\n\tsymlinks = true\n\tquotepath = false\n"
          "[gc]\n\tauto = 0\n")
EXCLUDE = ".bob/\n.git\n"
ATTRIBUTES = "* -text -eol -filter -ident -working-tree-encoding -diff -merge\n"
Mode = tuple[str, str]  # (git file mode, blob id)


class CheckpointError(BobError):
    """A snapshot or a restore could not be made; str(self) says why."""


def git_missing() -> bool:
    return shutil.which("git") is None


# ---- one root's shadow repository ---------------------------------------------------------------

_locks: dict[str, threading.Lock] = {}
_locks_guard = threading.Lock()


class Shadow:
    """The shadow repository of one root. Every use holds its lock: a thread lock in this
    process, and an flock on its lock file for other Bobs on the same project."""

    def __init__(self, root: str, store: str, max_bytes: int):
        self.root = root
        self.git_dir = os.path.join(store, hashlib.sha256(root.encode("utf-8", "surrogateescape")).hexdigest()[:16]
                                    + ".git")
        self.max_bytes = max_bytes
        with _locks_guard:
            self._lock = _locks.setdefault(self.git_dir, threading.Lock())

    def snapshot(self, cancel: Cancel | None = None) -> tuple[str, dict[str, list[int]]]:
        """(the tree of the root as it is now, the files left out for their size: path -> [size,
        mtime_ns])."""
        with self._held():
            listed = self._git(["ls-files", "-z", "-o", "-m", "--exclude-standard"], cancel=cancel)
            big: dict[str, list[int]] = {}
            for raw in filter(None, listed.split(b"\0")):
                try:
                    info = os.lstat(os.path.join(os.fsencode(self.root), raw))
                except OSError:
                    continue
                if stat.S_ISREG(info.st_mode) and info.st_size > self.max_bytes:
                    big[os.fsdecode(raw)] = [info.st_size, info.st_mtime_ns]
            if big:  # (a file that grew past the bound since the last snapshot leaves the index too)
                self._git(["rm", "-q", "--cached", "--ignore-unmatch", "--pathspec-from-file=-", "--pathspec-file-nul"],
                          b"".join(b":(literal)" + os.fsencode(p) + b"\0" for p in big), cancel)
            specs = b".\0" + b"".join(b":(exclude,literal)" + os.fsencode(p) + b"\0" for p in big)
            # (--ignore-errors: a file it cannot read, or a repository inside without a commit, is
            # left out of the record, and the rest is recorded: exit status 1)
            self._git(["add", "-A", "--ignore-errors", "--pathspec-from-file=-", "--pathspec-file-nul"], specs, cancel,
                      allowed=(0, 1))
            tree = self._git(["write-tree"], cancel=cancel).decode().strip()
        return tree, big

    def changes(self, before: str, after: str) -> list[tuple[str, Mode | None, Mode | None]]:
        """(path, its mode and blob before, after) for each file that differs; None: absent."""
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
            path = os.fsdecode(raw)
            found.append((path, None if old_mode == "000000" else (old_mode, old_id),
                          None if new_mode == "000000" else (new_mode, new_id)))
        return found

    @property
    def cold(self) -> bool:
        """Whether no snapshot was ever made here (the first one reads every file)."""
        return not os.path.exists(os.path.join(self.git_dir, "index"))

    def blob(self, blob_id: str) -> bytes:
        with self._held():
            return self._git(["cat-file", "blob", blob_id])

    def keep(self, ref: str, tree: str) -> None:
        with self._held():
            self._git(["update-ref", ref, tree])

    def drop(self, prefix: str) -> None:
        """Every ref under `prefix` deleted, and the objects nothing holds any more pruned."""
        with self._held():
            refs = self._git(["for-each-ref", "--format=%(refname)", prefix]).decode().split()
            if not refs:
                return
            self._git(["update-ref", "--stdin"], "".join(f"delete {ref}\n" for ref in refs).encode())
            self._git(["prune", "--expire=now"])

    # ---- plumbing --------------------------------------------------------------------------------

    def _held(self) -> _Held:
        return _Held(self)

    def _prepare(self) -> None:
        """The repository made, or its settings written again (one found here may be planted)."""
        if not os.path.isdir(os.path.join(self.git_dir, "objects")):
            self._git(["init", "-q", "--bare", "--template=", self.git_dir], work_tree=False)  # (no hooks at all)
        for name, text in (("config", CONFIG), ("info/exclude", EXCLUDE), ("info/attributes", ATTRIBUTES)):
            path = os.path.join(self.git_dir, name)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w", encoding="utf-8") as handle:
                handle.write(text)
        # (index.lock: left by a git killed with its Bob; under the flock no other git runs here)
        for planted in ("objects/info/alternates", "objects/info/http-alternates", "shallow", "commondir", "index.lock"):
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
                   *args]
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
        import fcntl

        self.shadow._lock.acquire()
        try:
            store = os.path.dirname(self.shadow.git_dir)
            if os.path.islink(os.path.dirname(store)) or os.path.islink(store):
                raise CheckpointError(f"{store} is a link: checkpoints are kept only in a folder of the project's own")
            os.makedirs(store, exist_ok=True)
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


# ---- a session's records ---------------------------------------------------------------------------

@dataclass
class Record:
    """One turn that changed files: each root's tree before and after it."""

    id: str
    trees: dict[str, list[str]]  # root -> [before, after]
    unrecorded: list[str] = field(default_factory=list)  # files it changed that were too large to keep
    undone: bool = False
    messages: list[dict] = field(default_factory=list)  # what /undo took out of the conversation, for /redo

    def data(self) -> dict:
        return {"id": self.id, "trees": self.trees, "unrecorded": self.unrecorded, "undone": self.undone,
                "messages": self.messages}


class Checkpoints:
    """One session's checkpoints: taken during its turns (by the engine), walked back and forth by
    /undo and /redo (on the turn's thread, under the turn lock: never two at once)."""

    def __init__(self, ws: Workspace, session_id: str, keep: int, max_bytes: int, log: Logger | None = None,
                 key: bytes | None = None):
        self.workspace = ws
        self.session_id = session_id
        self.keep = keep
        self.log = log
        store = os.path.join(ws.cwd, bobdir.NAME, "checkpoints")
        self.shadows = {root: Shadow(root, store, max_bytes) for root in ws.roots}
        self.records: list[Record] = []
        self._key = key if key is not None else user_key()
        self._before: dict[str, tuple[str, dict[str, list[int]]]] | None = None  # this turn's, once taken
        self._failed = False  # this turn's snapshot failed: no record of it (said once)
        self._ahead: Cancel | None = None  # the first snapshot made ahead, until the session ends
        self._turn_id = ""

    def prewarm(self) -> None:
        """A project's first snapshot reads every file (about a second for 10,000): made now, in
        the background, so that the first turn that changes files pays only for what changed."""
        cold = [shadow for shadow in self.shadows.values() if shadow.cold]
        if not cold:
            return
        ahead = self._ahead = Cancel()

        def run() -> None:
            for shadow in cold:
                try:
                    shadow.snapshot(ahead)
                except Cancelled:
                    return
                except (OSError, CheckpointError) as exc:
                    if self.log is not None:
                        self.log.info(f"[acp] checkpoints: first snapshot of {shadow.root} not made ahead: {exc}")

        try:
            threads.start(run, "bob-checkpoint-ahead")
        except threads.ThreadLimit:
            pass  # (made by the first turn that changes files instead)

    def close(self) -> None:
        """The session ends: a snapshot still being made ahead stops (its git is killed)."""
        if self._ahead is not None:
            self._ahead.set()

    # ---- during a turn -------------------------------------------------------------------------

    def begin_turn(self) -> None:
        """A new turn: what /undo took back can no longer be put again (the files go on from here)."""
        self._before = None
        self._failed = False
        dropped = [r for r in self.records if r.undone]
        if dropped:
            self.records = [r for r in self.records if not r.undone]
            self._drop(dropped)

    def before_change(self, messages: list[dict], cancel: Cancel) -> None:
        """Before the first call of the turn that may change files: each root as it is now."""
        if self._before is not None or self._failed:
            return
        self._turn_id = uuid.uuid4().hex
        try:
            taken = {root: shadow.snapshot(cancel) for root, shadow in self.shadows.items()}
        except (CheckpointError, OSError):
            self._failed = True  # (said once: the turn's other calls do not try again)
            raise
        self._before = taken
        question = next((m for m in reversed(messages) if m["role"] == "user" and not m.get("summary")), None)
        if question is not None:
            question[TAG] = self._turn_id

    def end_turn(self) -> Record | None:
        """After the turn: its record, when it changed anything."""
        before, self._before = self._before, None
        if before is None:
            return None
        trees: dict[str, list[str]] = {}
        unrecorded: list[str] = []
        for root, shadow in self.shadows.items():
            tree, big = shadow.snapshot()  # (after a cancel too: what it changed can still be taken back)
            trees[root] = [before[root][0], tree]
            unrecorded += [self._shown(root, path) for path in sorted(set(big) | set(before[root][1]))
                           if big.get(path) != before[root][1].get(path)]
        if all(old == new for old, new in trees.values()) and not unrecorded:
            return None
        record = Record(self._turn_id, trees, unrecorded)
        for root, (old, new) in trees.items():
            self.shadows[root].keep(self._ref(record, "before"), old)
            self.shadows[root].keep(self._ref(record, "after"), new)
        self.records.append(record)
        if len(self.records) > self.keep:
            old_records, self.records = self.records[:-self.keep], self.records[-self.keep:]
            self._drop(old_records)
        return record

    # ---- /undo and /redo -----------------------------------------------------------------------

    def undo(self, messages: list[dict], write: Writer) -> str:
        record = next((r for r in reversed(self.records) if not r.undone), None)
        if record is None:
            return ("↩️ Nothing to undo: no turn of this session changed files"
                    + (f" (or only turns older than the last {self.keep}, which are not kept)." if self.keep else "."))
        outcome = self._apply(record, 0, write)
        index = next((i for i, m in enumerate(messages) if m.get(TAG) == record.id), None)
        if index is not None:
            record.messages = messages[index:]
            del messages[index:]
        record.undone = True
        said = [f"↩️ Undid the turn “{_title(record.messages)}”" if record.messages else "↩️ Undid the last turn that "
                "changed files (the conversation no longer held it)", outcome]
        return "\n".join(line for line in said if line)

    def redo(self, messages: list[dict], write: Writer) -> str:
        undone = [r for r in self.records if r.undone]
        if not undone:
            return "↪️ Nothing to redo: /redo puts back what the last /undo took, until a new turn."
        record = undone[0]
        outcome = self._apply(record, 1, write)
        messages.extend(record.messages)
        title = _title(record.messages)
        record.messages = []
        record.undone = False
        return "\n".join(line for line in (f"↪️ Redid the turn “{title}”" if title else "↪️ Redid the turn", outcome)
                         if line)

    def _apply(self, record: Record, to: int, write: Writer) -> str:
        """Each file the turn changed, to its state before it (`to` 0) or after it (1), unless it
        changed since; what was done and left, in words."""
        restored, removed, kept, failed, nested = [], [], [], [], []
        for root, trees in record.trees.items():
            shadow = self.shadows.get(root)
            if shadow is None:
                failed.append(f"{root} (not a folder of this session any more)")
                continue
            for path, before, after in shadow.changes(trees[0], trees[1]):
                wanted, expected = (before, after) if to == 0 else (after, before)
                shown = self._shown(root, path)
                if any(part in PRIVATE_FOLDERS for part in path.split("/")):
                    continue  # (never recorded: checked all the same)
                if any(state is not None and state[0] == REPOSITORY for state in (before, after)):
                    nested.append(shown)  # (a git repository inside: only its commit was recorded)
                    continue
                if current(root, path) != expected:
                    kept.append(shown)
                    continue
                try:
                    if wanted is None:
                        remove(root, path)
                        removed.append(shown)
                    else:
                        write(root, path, shadow.blob(wanted[1]), wanted[0])
                        restored.append(shown)
                except (OSError, CheckpointError) as exc:
                    failed.append(f"{shown} ({getattr(exc, 'strerror', None) or exc})")
        lines = []
        if restored:
            lines.append("Restored: " + ", ".join(restored) + ".")
        if removed:
            lines.append("Removed (it did not exist then): " + ", ".join(removed) + ".")
        if not restored and not removed and not kept and not failed and not nested:
            lines.append("No file needed changing.")
        if kept:
            lines.append("Left as they are, changed since that turn: " + ", ".join(kept) + ".")
        if record.unrecorded:
            lines.append("Not recorded, too large to keep (tools.checkpointMaxBytes), so not taken back: "
                         + ", ".join(record.unrecorded) + ".")
        if nested:
            lines.append("Not taken back, git repositories of their own inside the project (only their commit is "
                         "recorded): " + ", ".join(nested) + ".")
        if failed:
            lines.append("Could not be written: " + "; ".join(failed) + ".")
        return " ".join(lines)

    # ---- kept with the session -----------------------------------------------------------------

    def data(self, redact: Callable[[object], object] | None = None) -> list[dict]:
        """The records, signed, for the session's file; `redact`: what they go through first (the
        configuration's secrets out of the messages an /undo took), so that the signature holds
        for what is written."""
        signed = []
        for record in self.records:
            item = record.data()
            if redact is not None:
                item = redact(item)  # type: ignore[assignment]
            item["mac"] = _mac(self._key, self.session_id, item)
            signed.append(item)
        return signed

    def load(self, items: object) -> int:
        """The records of a session's file, those signed with this user's key for this session;
        how many were left out."""
        left_out = 0
        for item in items if isinstance(items, list) else []:
            record = _record(item)
            if record is None or not hmac.compare_digest(str(item.get("mac", "")),
                                                         _mac(self._key, self.session_id, record.data())):
                left_out += 1
                continue
            if set(record.trees) <= set(self.shadows):
                self.records.append(record)
        if left_out and self.log is not None:
            self.log.warning(f"[acp] session {self.session_id}: {left_out} checkpoint record(s) of its file left out "
                             "(not signed by this user's key: from elsewhere, or edited)")
        self.records = self.records[-self.keep:]
        return left_out

    def forget(self) -> None:
        """The session is deleted: its trees go too."""
        self._drop(self.records)
        self.records = []

    def _drop(self, records: list[Record]) -> None:
        for record in records:
            for root in record.trees:
                shadow = self.shadows.get(root)
                if shadow is not None:
                    try:
                        shadow.drop(f"refs/bob/{self.session_id}/{record.id}/")
                    except (OSError, CheckpointError) as exc:
                        if self.log is not None:
                            self.log.info(f"[acp] checkpoints: refs of {record.id} not dropped: {exc}")

    def _ref(self, record: Record, which: str) -> str:
        return f"refs/bob/{self.session_id}/{record.id}/{which}"

    def _shown(self, root: str, path: str) -> str:
        return path if root == self.workspace.cwd else os.path.join(root, path)


Writer = Callable[[str, str, bytes, str], None]  # (root, path in it, content, git mode)


def forget(cwd: str, session_id: str) -> None:
    """A deleted session's trees, dropped from every shadow repository of its folder."""
    store = os.path.join(cwd, bobdir.NAME, "checkpoints")
    try:
        names = [n for n in os.listdir(store) if n.endswith(".git")]
    except OSError:
        return
    for name in names:
        shadow = Shadow("", store, 0)
        shadow.git_dir = os.path.join(store, name)
        with _locks_guard:
            shadow._lock = _locks.setdefault(shadow.git_dir, threading.Lock())
        try:
            shadow.drop(f"refs/bob/{session_id}/")
        except (OSError, CheckpointError):
            pass


def current(root: str, path: str) -> Mode | None | str:
    """A file's state as git would record it: (mode, blob id), None when it is absent, "other"
    for what a snapshot never holds (a folder)."""
    full = os.path.join(root, path)
    try:
        info = os.lstat(full)
    except FileNotFoundError:
        return None
    if stat.S_ISLNK(info.st_mode):
        return LINK, _blob_id(os.fsencode(os.readlink(full)))
    if not stat.S_ISREG(info.st_mode):
        return "other"
    with open(full, "rb") as handle:
        data = handle.read()
    return (EXECUTABLE if info.st_mode & 0o100 else FILE), _blob_id(data)


def _blob_id(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def write_disk(root: str, path: str, data: bytes, mode: str) -> None:
    """A file back as it was: its bytes and its executable bit, or the link it was; never through
    a link out of the root, never into .git or .bob."""
    if mode == LINK:
        parent = _folder_inside(root, path)
        os.makedirs(parent, exist_ok=True)
        temp = os.path.join(parent, f".{os.path.basename(path)}.{secrets.token_hex(6)}.link")
        os.symlink(os.fsdecode(data), temp)
        os.replace(temp, os.path.join(root, path))
        return
    full = os.path.join(root, path)
    if os.path.islink(full):  # (a link the turn put in its place: replaced, never written through)
        remove(root, path, prune=False)
    write_beneath(root, path, data, refuse=lambda relative: any(p in PRIVATE_FOLDERS for p in relative.split(os.sep)))
    fd = os.open(full, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)  # (the file just written, not a link since)
    try:
        os.fchmod(fd, 0o755 if mode == EXECUTABLE else 0o644)
    finally:
        os.close(fd)


def _folder_inside(root: str, path: str) -> str:
    """The folder of `path` in `root`, when it lies in the root with every link followed;
    OutsideRoot otherwise (a link put in its way since the turn)."""
    folder = os.path.dirname(os.path.join(root, path))
    if not (os.path.realpath(folder) + os.sep).startswith(os.path.realpath(root).rstrip(os.sep) + os.sep):
        raise OutsideRoot(13, f"{path} leads out of {root}")
    return folder


def remove(root: str, path: str, prune: bool = True) -> None:
    """A file the turn made, gone again (and the folders it made for it, once empty)."""
    full = os.path.join(root, path)
    _folder_inside(root, path)
    os.unlink(full)
    folder = os.path.dirname(full)
    while prune and folder != root and folder.startswith(root.rstrip(os.sep) + os.sep):
        try:
            os.rmdir(folder)  # (only an empty one)
        except OSError:
            break
        folder = os.path.dirname(folder)


def _title(messages: list[dict]) -> str:
    from bob_acp import history

    for message in messages:
        if message["role"] == "user" and not message.get("summary"):
            line = next((part.strip() for part in history.text_of(message).splitlines() if part.strip()), "")
            return line if len(line) <= 80 else line[:79] + "…"
    return ""


def _record(item: object) -> Record | None:
    if not isinstance(item, dict) or not isinstance(item.get("id"), str) or not isinstance(item.get("trees"), dict):
        return None
    trees = item["trees"]
    if not all(isinstance(root, str) and isinstance(pair, list) and len(pair) == 2
               and all(isinstance(t, str) and len(t) in (40, 64) and all(c in "0123456789abcdef" for c in t)
                       for t in pair) for root, pair in trees.items()):
        return None
    unrecorded = item.get("unrecorded", [])
    messages = item.get("messages", [])
    if not isinstance(unrecorded, list) or not all(isinstance(u, str) for u in unrecorded):
        return None
    if not isinstance(messages, list) or not all(isinstance(m, dict) for m in messages):
        return None
    return Record(item["id"], trees, unrecorded, item.get("undone") is True, messages)


def _mac(key: bytes, session_id: str, item: dict) -> str:
    import json

    body = {k: v for k, v in item.items() if k != "mac"}
    text = json.dumps([session_id, body], sort_keys=True, ensure_ascii=True, separators=(",", ":"))
    return hmac.new(key, text.encode(), hashlib.sha256).hexdigest()


_key_lock = threading.Lock()
_session_key: list[bytes] = []  # (where no key file can be kept: this process's own)


def user_key(env: dict | None = None) -> bytes:
    """The key that signs this user's records: kept in their state folder (0600), made once;
    where it cannot be kept, one for this process (records then hold only within it)."""
    variables = os.environ if env is None else env
    base = variables.get("XDG_STATE_HOME") or os.path.join(variables.get("HOME") or os.path.expanduser("~"),
                                                           ".local", "state")
    path = os.path.join(base, "bob", "checkpoint.key")
    with _key_lock:
        for _ in range(2):
            try:
                with open(path, "rb") as handle:
                    key = handle.read()
                if len(key) >= 32 and stat.S_IMODE(os.stat(path).st_mode) & 0o077 == 0:
                    return key
                break  # (short, or readable by others: not trusted)
            except FileNotFoundError:
                try:
                    os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
                    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
                    with os.fdopen(fd, "wb") as handle:
                        handle.write(secrets.token_bytes(32))
                except FileExistsError:
                    continue  # (another Bob made it meanwhile: read that one)
                except OSError:
                    break
            except OSError:
                break
        if not _session_key:
            _session_key.append(secrets.token_bytes(32))
        return _session_key[0]
