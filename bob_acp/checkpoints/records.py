"""What a turn changed, as kept in the session's file: one record a turn, one change a path, each
with the path's state before Bob's calls touched it and after; signed with a key of the user's
own, outside every project, so a record that a cloned repository brings along, or one edited by
hand, is never used to write a file.

A state is None (nothing there), {"type": "file", "mode": 0o644, "blob": id},
{"type": "link", "blob": id of its target} or {"type": "folder", "mode": 0o755}: every mode bit
is kept (a 0600 secret comes back 0600).
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
import stat
import threading
from dataclasses import dataclass, field
from typing import Any

State = dict[str, Any]  # see the module's docstring; None where nothing is there
BY = ("bash", "write_file", "edit_file")


@dataclass
class Change:
    """One path a turn changed: `before` Bob's first call that touched it, `after` its last.
    `during`: it changed while a command ran, when someone else may have written it too; `gap`:
    someone else changed it between Bob's calls, so only Bob's part after that is taken back."""

    root: str
    path: str  # relative to the root, "/"-separated, no link, .git or .bob on the way
    before: State | None
    after: State | None
    by: str
    during: bool = False
    gap: bool = False

    def data(self) -> dict[str, Any]:
        item: dict[str, object] = {**_name("root", self.root), **_name("path", self.path), "before": self.before,
                                   "after": self.after, "by": self.by}
        if self.during:
            item["during"] = True
        if self.gap:
            item["gap"] = True
        return item

    def blobs(self) -> list[str]:
        return [s["blob"] for s in (self.before, self.after) if s is not None and "blob" in s]


@dataclass
class Record:
    """One turn that changed files. `pending`: an /undo (0) or /redo (1) begun and not finished
    (Bob was stopped during it): the next one finishes it."""

    id: str
    changes: list[Change]
    notes: list[str] = field(default_factory=list)  # what it changed that could not be recorded
    undone: bool = False
    messages: list[dict[str, Any]] = field(default_factory=list)  # what /undo took out of the conversation, for /redo
    pending: int | None = None
    later: bool = False  # undone before a later turn: /redo puts its files back, not its messages
    jobs: bool = False  # a command of the turn left a job running (what it does after is said at /undo)

    def data(self) -> dict[str, Any]:
        item = {"id": self.id, "changes": [c.data() for c in self.changes], "notes": self.notes,
                "undone": self.undone, "messages": self.messages}
        if self.pending is not None:
            item["pending"] = self.pending
        if self.later:
            item["later"] = True
        if self.jobs:
            item["jobs"] = True
        return item


def _name(key: str, name: str) -> dict[str, str]:
    """A root or path as a session file keeps it: as it is, or, where it is no valid UTF-8 (a
    file named with other bytes), readably under `key` and exactly under `<key>Bytes` (base64)."""
    try:
        name.encode("utf-8")
        return {key: name}
    except UnicodeEncodeError:
        import base64

        from bob_acp.jsontext import clean

        return {key: clean(name), key + "Bytes": base64.b64encode(os.fsencode(name)).decode()}


def _named(item: dict[str, Any], key: str) -> object:
    exact = item.get(key + "Bytes")
    if not isinstance(exact, str):
        return item.get(key)
    import base64
    import binascii

    try:
        return os.fsdecode(base64.b64decode(exact, validate=True))
    except (binascii.Error, ValueError):
        return None


def sign(key: bytes, session_id: str, item: dict[str, Any]) -> str:
    """The record's signature, over what the session file keeps of it (text made valid Unicode,
    as the file's JSON holds it: a name that is not is kept exactly beside, in base64)."""
    import json

    from bob_acp.jsontext import clean_tree

    body = clean_tree({k: v for k, v in item.items() if k != "mac"})
    text = json.dumps([session_id, body], sort_keys=True, ensure_ascii=True, separators=(",", ":"))
    return hmac.new(key, text.encode(), hashlib.sha256).hexdigest()


def signed(key: bytes, session_id: str, item: dict[str, Any]) -> bool:
    return hmac.compare_digest(str(item.get("mac", "")), sign(key, session_id, item))


def parse(item: object) -> Record | None:
    """A record of a session file, or None for anything else (a record of 0.16, whose trees this
    Bob no longer reads, included)."""
    if not isinstance(item, dict) or not isinstance(item.get("id"), str) or not isinstance(item.get("changes"), list):
        return None
    changes = [_change(c) for c in item["changes"]]
    notes, messages, pending = item.get("notes", []), item.get("messages", []), item.get("pending")
    if any(c is None for c in changes) or not isinstance(notes, list) or not all(isinstance(n, str) for n in notes):
        return None
    if not isinstance(messages, list) or not all(isinstance(m, dict) for m in messages) or pending not in (None, 0, 1):
        return None
    return Record(item["id"], [c for c in changes if c is not None], notes, item.get("undone") is True, messages,
                  pending, item.get("later") is True, item.get("jobs") is True)


def _change(item: object) -> Change | None:
    if not isinstance(item, dict):
        return None
    root, path, by = _named(item, "root"), _named(item, "path"), item.get("by")
    if not isinstance(root, str) or not os.path.isabs(root) or not isinstance(path, str) or by not in BY:
        return None
    parts = path.split("/")
    if not path or path.startswith("/") or "\0" in path or any(p in ("", ".", "..") for p in parts):
        return None  # (checked again where it is acted on: never a path out of its root)
    before, after = item.get("before"), item.get("after")
    if not (_state(before) and _state(after)):
        return None
    return Change(root, path, before, after, by, item.get("during") is True, item.get("gap") is True)


def _state(value: object) -> bool:
    if value is None:
        return True
    if not isinstance(value, dict):
        return False
    kind, mode, blob = value.get("type"), value.get("mode"), value.get("blob")
    if kind == "folder":
        return isinstance(mode, int) and 0 <= mode <= 0o7777 and set(value) == {"type", "mode"}
    hexed = isinstance(blob, str) and len(blob) in (40, 64) and all(c in "0123456789abcdef" for c in blob)
    if kind == "link":
        return hexed and set(value) == {"type", "blob"}
    return kind == "file" and hexed and isinstance(mode, int) and 0 <= mode <= 0o7777 and set(value) == {
        "type", "mode", "blob"}


class _Keys:
    """The lock under which the key file is read or made, and the key of this process where no
    key file can be kept."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.own: bytes | None = None


_keys = _Keys()


def user_key(env: dict[str, Any] | None = None) -> bytes:
    """The key that signs this user's records: kept in their state folder (0600), made once;
    where it cannot be kept, one for this process (records then hold only within it)."""
    from bob_acp.files import bobdir

    path = os.path.join(bobdir.user_state(env), "checkpoint.key")
    with _keys.lock:
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
        if _keys.own is None:
            _keys.own = secrets.token_bytes(32)
        return _keys.own
