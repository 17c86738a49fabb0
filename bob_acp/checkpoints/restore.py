"""Putting a record's paths back (/undo) or forward again (/redo), touching only what it recorded.

Each path is looked at first (never through a link: bob_acp.files.beneath.Place): one that is as the
record left it is changed; one already as wanted is done (a retry after a failure or a kill
finishes without blaming anyone); anything else was changed by someone since and is kept and
named, as is a file whose open buffer in the editor differs from what the turn wrote. Then
what goes away goes, deepest first (a folder only once empty), and what comes back comes,
shallowest first, with every mode bit, each through a descriptor of its own folder.
"""

from __future__ import annotations

import errno
import os
import stat
from dataclasses import dataclass, field
from typing import Callable, Protocol

from bob_acp.checkpoints.look import blob_id
from bob_acp.checkpoints.records import Change, State
from bob_acp.files.beneath import OutsideRoot, Place
from bob_acp.files.workspace import PRIVATE_FOLDERS, PROTECTED_FILES

BLOCKED = "blocked"  # a link or a file where the record has a folder on the way
EDITOR_READS = 16  # the editor's buffers asked at once when a restore reads them
OTHER = "other"  # something a record never holds (a FIFO, a file too large to compare)


class Editor(Protocol):
    """The editor's files (tools.clientFs): its buffer is read before a file is put back, and
    written through it, so an open buffer follows and unsaved text is never overwritten."""

    can_read: bool
    can_write: bool

    def read(self, path: str) -> str: ...

    def write(self, path: str, text: str) -> None: ...


@dataclass
class Outcome:
    restored: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)  # changed since the turn
    open_in_editor: list[str] = field(default_factory=list)  # an open buffer differs from what the turn wrote
    refused: list[str] = field(default_factory=list)  # a place Bob never writes (.git, .bob, AGENTS.md)
    failed: list[str] = field(default_factory=list)
    during: list[str] = field(default_factory=list)  # put back, though they changed while a command ran
    gaps: list[str] = field(default_factory=list)  # someone else changed them between Bob's calls

    @property
    def complete(self) -> bool:
        return not self.failed


def never_written(path: str) -> bool:
    parts = path.split("/")
    return any(part in PRIVATE_FOLDERS for part in parts) or parts[-1] in PROTECTED_FILES


def read_state(root: str, path: str, max_bytes: int) -> tuple[State | None, bytes]:
    """(what is at `path` as a record states it, its bytes or a link's target), read without
    following any link; OutsideRoot when a link or a file stands where a folder on its way was,
    NotRegular for what no record holds, ValueError past `max_bytes`."""
    with Place(root, path) as place:
        info = place.lstat()
        if info is None:
            return None, b""
        if stat.S_ISLNK(info.st_mode):
            target = os.fsencode(place.readlink())
            return {"type": "link", "blob": blob_id(target)}, target
        if stat.S_ISDIR(info.st_mode):
            return {"type": "folder", "mode": stat.S_IMODE(info.st_mode)}, b""
        data = place.read(max_bytes)  # (NotRegular for a FIFO, a device, a socket)
        return {"type": "file", "mode": stat.S_IMODE(info.st_mode), "blob": blob_id(data)}, data


def current(root: str, path: str, max_bytes: int) -> State | None | str:
    """What is at `path` now, as a record states it (BLOCKED when a link or a file stands where
    a folder on its way was; OTHER for what no record holds)."""
    try:
        return read_state(root, path, max_bytes)[0]
    except OutsideRoot:
        return BLOCKED
    except (FileNotFoundError, NotADirectoryError):
        return None  # (gone while it was looked at)
    except (OSError, ValueError):
        return OTHER  # (a link or something else put in its place meanwhile, or past the bound)


def same(a: State | None | str, b: State | None) -> bool:
    if a is None or b is None or isinstance(a, str):
        return a is b
    if a["type"] != b["type"]:
        return False
    if a["type"] == "folder":
        return True  # (a folder's mode is put back, never a reason to keep it)
    return a["blob"] == b["blob"] and a.get("mode") == b.get("mode")


def apply(changes: list[Change], to: int, blob: Callable[[str], bytes], shown: Callable[[Change], str],
          max_bytes: int, editor: Editor | None = None) -> Outcome:
    """Each change to its state before the turn (`to` 0) or after it (1)."""
    outcome = Outcome()
    going: list[tuple[Change, State | None | str]] = []  # (change, what is there now) to take away
    coming: list[tuple[Change, State | None | str]] = []
    items: list[tuple[Change, str, State | None, State | None, State | None | str]] = []
    for change in changes:
        wanted, expected = (change.before, change.after) if to == 0 else (change.after, change.before)
        name = shown(change)
        if never_written(change.path):
            outcome.refused.append(name)
            continue
        items.append((change, name, wanted, expected, current(change.root, change.path, max_bytes)))
    # The editor's buffers, where it has them: the file as the user sees it (an edit it holds
    # unsaved, unsaved lines of the user's), asked for every text file at once.
    buffers = _buffers(editor, [(c, state) for c, _n, wanted, expected, now in items
                                if isinstance(now, dict) and now["type"] == "file" for state in (expected, wanted)], blob)
    for change, name, wanted, expected, now in items:
        buffer = buffers.get(os.path.join(change.root, change.path))
        if buffer is not None:  # (compared line ends aside: an editor may give its own)
            if _same_lines(buffer, _file_text(wanted, blob)):
                _done(outcome, change, name, wanted)  # (a retry: this one was put back already)
                continue
            if not _same_lines(buffer, _file_text(expected, blob)):
                (outcome.open_in_editor if same(now, expected) else outcome.kept).append(name)
                continue
        elif same(now, wanted):
            _done(outcome, change, name, wanted)  # (a retry: this one was put back already)
            continue
        elif not same(now, expected):
            outcome.kept.append(name)
            continue
        if wanted is None or (now is not None and isinstance(now, dict) and now["type"] != wanted["type"]):
            going.append((change, now))
        if wanted is not None:
            coming.append((change, now))
    for change, now in sorted(going, key=lambda item: -item[0].path.count("/")):
        name = shown(change)
        try:
            with Place(change.root, change.path) as place:
                if isinstance(now, dict) and now["type"] == "folder":
                    place.rmdir()
                else:
                    place.unlink()
        except OSError as exc:
            if exc.errno in (errno.ENOTEMPTY, errno.EEXIST):
                outcome.kept.append(name + " (it holds files that are not the turn's)")
            else:
                outcome.failed.append(f"{name} ({_why(exc)})")
            coming = [item for item in coming if item[0] is not change]
            continue
        wanted = change.before if to == 0 else change.after
        if wanted is None:
            _done(outcome, change, name, wanted)
    for change, now in sorted(coming, key=lambda item: item[0].path.count("/")):
        name = shown(change)
        wanted = change.before if to == 0 else change.after
        assert wanted is not None
        try:
            _put(change, wanted, now, blob, editor)
        except (OSError, ValueError) as exc:
            outcome.failed.append(f"{name} ({_why(exc)})")
            continue
        _done(outcome, change, name, wanted)
    return outcome


def _done(outcome: Outcome, change: Change, name: str, wanted: State | None) -> None:
    (outcome.removed if wanted is None else outcome.restored).append(name)
    if change.during:
        outcome.during.append(name)
    if change.gap:
        outcome.gaps.append(name)


def _put(change: Change, wanted: State, now: State | None | str, blob: Callable[[str], bytes],
         editor: Editor | None) -> None:
    kind = wanted["type"]
    with Place(change.root, change.path, make=True) as place:
        if kind == "folder":
            if place.lstat() is None:
                place.mkdir(wanted["mode"])
            else:
                place.chmod(wanted["mode"])
            return
        data = blob(wanted["blob"])
        if kind == "link":
            place.symlink(os.fsdecode(data))
            return
        text = _text(data)
        if (editor is not None and editor.can_write and text is not None and isinstance(now, dict)
                and now["type"] == "file"):
            # (an existing file: through the editor, so its open buffer follows)
            editor.write(os.path.join(change.root, change.path), text)
            info = place.lstat()
            if info is not None and stat.S_ISREG(info.st_mode) and stat.S_IMODE(info.st_mode) != wanted["mode"]:
                place.chmod(wanted["mode"])
            return
        place.write(data, wanted["mode"])


def _file_text(state: State | None, blob: Callable[[str], bytes]) -> str | None:
    return _text(blob(state["blob"])) if state is not None and state["type"] == "file" else None


def _same_lines(a: str | None, b: str | None) -> bool:
    return a is not None and b is not None and (a == b or a.replace("\r\n", "\n") == b.replace("\r\n", "\n"))


def _buffers(editor: Editor | None, changes: list[tuple[Change, State | None]],
             blob: Callable[[str], bytes]) -> dict[str, str]:
    """The editor's text of each file about to be put back that a buffer may hold (a text file),
    asked all at once on a few threads (a 3,000-file turn is not 3,000 round trips in a row); a
    file the editor does not have is absent (the disk is what counts)."""
    if editor is None or not editor.can_read:
        return {}
    paths = list(dict.fromkeys(os.path.join(change.root, change.path) for change, state in changes
                               if _file_text(state, blob) is not None))
    if not paths:
        return {}
    from concurrent.futures import ThreadPoolExecutor

    def read(path: str) -> tuple[str, str | None]:
        try:
            return path, editor.read(path)
        except OSError:
            return path, None

    try:
        with ThreadPoolExecutor(max_workers=min(EDITOR_READS, len(paths)), thread_name_prefix="bob-undo-read") as pool:
            found = list(pool.map(read, paths))
    except RuntimeError:  # (no thread to be had: one after the other)
        found = [read(path) for path in paths]
    return {path: text for path, text in found if text is not None}


def _text(data: bytes) -> str | None:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def _why(exc: BaseException) -> str:
    return getattr(exc, "strerror", None) or str(exc)


def words(outcome: Outcome) -> str:
    """What was done and left, in sentences."""
    lines = []
    if outcome.restored:
        lines.append("Restored: " + ", ".join(outcome.restored) + ".")
    if outcome.removed:
        lines.append("Removed (it did not exist then): " + ", ".join(outcome.removed) + ".")
    if not (outcome.restored or outcome.removed or outcome.kept or outcome.failed or outcome.open_in_editor
            or outcome.refused):
        lines.append("No file needed changing.")
    if outcome.kept:
        lines.append("Left as they are, changed since that turn: " + ", ".join(outcome.kept) + ".")
    if outcome.open_in_editor:
        lines.append("Left as they are, open in the editor with other text than the turn wrote: "
                     + ", ".join(outcome.open_in_editor) + ".")
    if outcome.refused:
        lines.append("Never written by /undo (.git, .bob or AGENTS.md): " + ", ".join(outcome.refused) + ".")
    if outcome.gaps:
        lines.append("Changed by someone else between Bob's calls, and that is kept (only Bob's part after it was "
                     "taken): " + ", ".join(outcome.gaps) + ".")
    if outcome.during:
        lines.append("Changed while a command ran (Bob cannot tell whether the command alone wrote them): "
                     + ", ".join(outcome.during) + ".")
    if outcome.failed:
        lines.append("Could not be written: " + "; ".join(outcome.failed) + ".")
    return " ".join(lines)
