"""What a call changed, from two looks or a file's two states: the changes a window records,
which paths a command's text names (the others are the ones /undo hedges about), and what the
editor held of a file."""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field
from typing import Any

from bob_acp.checkpoints import restore
from bob_acp.checkpoints.look import Seen
from bob_acp.checkpoints.records import Change, State
from bob_acp.checkpoints.store import Snapshot


@dataclass
class Window:
    """One call's window: the roots as they were before it (bash), or the file as it was."""

    name: str
    snapshots: dict[str, Snapshot] = field(default_factory=dict)
    heads: dict[str, bytes] = field(default_factory=dict)  # each root's git HEAD and branch, as they were
    command: str = ""  # a command's text (what it names, it more likely wrote)
    file: tuple[str, str] | None = None  # (root, path) of a file tool's file
    old: tuple[State | None, bytes] | None = None  # its state and bytes before
    editor_texts: dict[str, Any] = field(default_factory=dict)  # path -> the editor's text it had (the call's)
    editor_written: dict[str, str] = field(default_factory=dict)  # path -> the text written through the editor



def state_of(seen: Seen | None) -> State | None:
    """A path's state as a look found it."""
    if seen is None:
        return None
    if seen.link:
        return {"type": "link", "blob": seen.blob}
    return {"type": "file", "mode": stat.S_IMODE(seen.mode), "blob": seen.blob}


def changes(before: Snapshot, after: Snapshot) -> list[tuple[str, Seen | None, Seen | None]]:
    """(path, as it was, as it is; None: absent) for each file or link that differs (an
    unchanged file keeps the very Seen of the look before: most are passed over by identity)."""
    found: list[tuple[str, Seen | None, Seen | None]] = []
    old_files = before.files
    for path, new in after.files.items():
        old = old_files.get(path)
        if old is new or (old is not None and old.blob == new.blob and old.mode == new.mode):
            continue
        found.append((path, old, new))
    found += [(path, old_files[path], None) for path in old_files.keys() - after.files.keys()]
    return found


def named(path: str, command: str) -> bool:
    """Whether a command's text names a path it changed (its name, or a folder of it): then it
    most likely wrote it. A path it never names (a file saved in the editor while a test ran) is
    the one /undo hedges about."""
    return bool(command) and any(part in command for part in path.split("/") if len(part) > 1)


def folders_changed(root: str, before: Snapshot, after: Snapshot, command: str) -> list[Change]:
    """Folders the command made or took away, each with its mode as the look found it."""
    found = [Change(root, path, None, {"type": "folder", "mode": after.folders[path]}, "bash",
                    during=not named(path, command)) for path in sorted(after.folders.keys() - before.folders.keys())]
    found += [Change(root, path, {"type": "folder", "mode": before.folders[path]}, None, "bash",
                     during=not named(path, command)) for path in sorted(before.folders.keys() - after.folders.keys())]
    return found


def same_text(a: bytes, b: bytes) -> bool:
    return a == b or a.replace(b"\r\n", b"\n") == b.replace(b"\r\n", b"\n")


def in_editor(texts: dict[str, Any], root: str, relative: str) -> bytes | None:
    """The editor's text of a file (a call's reads or writes, by the path it named), as bytes."""
    wanted = os.path.join(root, relative)
    for path, text in texts.items():
        if isinstance(text, str) and os.path.realpath(path) == os.path.realpath(wanted):
            return text.encode("utf-8", "surrogateescape")
    return None


def file_state(root: str, relative: str, max_bytes: int) -> tuple[State | None, bytes]:
    """A file tool's file as it is: a regular file, a link, or nothing (anything else, OSError)."""
    state, data = restore.read_state(root, relative, max_bytes)
    if state is not None and state["type"] == "folder":
        raise IsADirectoryError(f"{relative} is a folder")
    return state, data


def collapse(chain: list[Change]) -> Change | None:
    """One change for a path from Bob's calls in order: back to where a contiguous run of
    Bob's changes began; where someone else's change came between, only after it."""
    last = chain[-1]
    before, during, gap = last.before, last.during, False
    for change in reversed(chain[:-1]):
        if not restore.same(change.after, before):
            gap = True
            break
        before, during = change.before, during or change.during
    if restore.same(before, last.after) and not gap:
        return None  # (made and taken away again within the turn)
    return Change(last.root, last.path, before, last.after, last.by, during, gap)
