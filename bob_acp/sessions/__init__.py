"""Sessions on disk: ids, the session file (atomic writes), validation on load, listing, replay.

File format (version 3; version-1 files, without `title`, `generation` and `choices`, and
version-2 files, whose user messages keep their text as a string beside an `images` list, still
load: their user messages are turned into parts), `<cwd>/<sessions.dir>/<id>.json`:

    {"version": 3, "id": "20261203-101530-4f2a9c1e", "cwd": "/abs/project", "title": "…",
     "createdAt": "2026-12-03T10:15:30Z", "updatedAt": "…", "generation": 7,
     "choices": {"model": "…", "mode": "ask"}, "additionalDirectories": ["/abs/other"],
     "messages": [<bob_acp.context.history messages>]}

(`additionalDirectories` only when the session has further roots: acp.additionalDirectories.)

Everything but `messages` and `checkpoints` (a signed list of bob_acp.checkpoints records, after
the messages) comes first, so a listing reads only the head of each file, walked as JSON. Only the
conversation is stored, with known secrets redacted: nothing from the config or the environment.

Two processes on one session (two editor windows) lose nothing: before a file is overwritten,
its state on disk is compared with what this process last read or wrote; when another writer
changed it, the file on disk stays and this conversation is saved under a new id instead. Within
one process, saves of a file are serialised (the check, the write and its record are one step),
so only another process can ever look like another writer.

What is written is always a history a model API accepts (bob_acp.context.history.repaired): a save in
the middle of a turn answers the calls still running as not run, and a file that lacks results
(written by an older Bob at a crash) is repaired when it is loaded. `turns` in the head counts
the user's messages, so a listing can leave out a session nobody wrote in.
"""

from __future__ import annotations

import base64
import datetime
import itertools
import os
import random
import re
import stat
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable

from bob_acp import jsontext
from bob_acp.context import history
from bob_acp.files.atomic import NotRegular, atomic_write, open_regular, read_up_to
from bob_acp.jsontext import mapping
from bob_acp.timestamps import PerSecond, iso, utc_now

if TYPE_CHECKING:
    from bob_acp.log import Logger


VERSION = 3
VERSIONS = (1, 2, 3)
SESSION_ID_RE = re.compile(r"\d{8}-\d{6}-[0-9a-f]{8}")
ID_STAMP = "%Y%m%d-%H%M%S"  # an id's time part (ids sort by time)
MAX_FILE_BYTES = 512 * 1024 * 1024
HEAD_BYTES = 16 * 1024  # what a listing reads of each file
MAX_TITLE = 80


class _Ids:
    """Session ids: distinct, not secret. Their last part walks a Weyl sequence (a random start,
    a random odd step, modulo 2**32): it looks random and never repeats within a process before
    2**32 sessions, where 32 random bits drawn anew would meet again within one second once
    thousands of sessions are opened in it (an id already held: a failed session/new). Seeded
    once from the system's randomness (a getrandom() call per session cost more than the rest of
    opening it)."""

    def __init__(self) -> None:
        seed = random.Random(os.urandom(16))
        self._start, self._step = seed.getrandbits(32), seed.getrandbits(32) | 1
        self._count = itertools.count()  # (next() on it is atomic: threads never draw the same number)
        self._second = PerSecond(ID_STAMP)

    def new(self, now: datetime.datetime | None = None) -> str:
        stamp = self._second(int(time.time())) if now is None else now.strftime(ID_STAMP)
        return f"{stamp}-{(self._start + next(self._count) * self._step) & 0xFFFFFFFF:08x}"


_ids = _Ids()
new_id = _ids.new


def valid_id(value: object) -> bool:
    return isinstance(value, str) and SESSION_ID_RE.fullmatch(value) is not None


FORK_MARK = " (fork)"


def fork_title(title: str | None) -> str:
    """The title of a conversation saved under a new id because another process took its file."""
    base = (title or "untitled").removesuffix(FORK_MARK)
    if len(base) + len(FORK_MARK) > MAX_TITLE:
        base = base[:MAX_TITLE - len(FORK_MARK) - 1] + "…"
    return base + FORK_MARK


def title_of(messages: list[dict[str, Any]]) -> str | None:
    """The first line of the first user message, at most MAX_TITLE characters."""
    for message in messages:
        if message["role"] == "user" and not message.get("summary"):
            line = next((part.strip() for part in history.text_of(message).splitlines() if part.strip()), "")
            if line:
                return line if len(line) <= MAX_TITLE else line[:MAX_TITLE - 1] + "…"
    return None


class SessionLoadError(Exception):
    def __init__(self, sid: str, reason: str, missing: bool = False):
        super().__init__(f"session {sid}: {reason}")
        self.sid = sid
        self.reason = reason
        self.missing = missing  # no such session (as opposed to a file that cannot be read)


@dataclass
class StoredSession:
    id: str
    cwd: str
    messages: list[dict[str, Any]]
    created_at: str
    updated_at: str
    title: str | None = None
    choices: dict[str, Any] = field(default_factory=dict)
    more: tuple[str, ...] = ()  # further roots (additionalDirectories)
    checkpoints: list[Any] = field(default_factory=list)  # its signed checkpoint records (bob_acp.checkpoints)


@dataclass
class ListedSession:
    id: str
    cwd: str
    title: str | None
    updated_at: str
    more: tuple[str, ...] = ()


@dataclass
class ReplayItem:
    kind: str  # user | image | agent | tool
    text: str = ""
    ref: str = ""
    name: str = ""
    arguments: dict[str, Any] | None = None
    output: str | None = None  # None: no result was recorded
    failed: bool = False  # the recorded result was a rejection or a cancel
    image: dict[str, Any] | None = None  # kind image: {mimeType, data} of a user's image


def _now() -> str:
    return utc_now()


class _Seen:
    """Each session file as this process last read or wrote it, (mtime, size, inode) by path: a
    file that differs was changed by another Bob since. Paths are absolute, so folders (and
    tests) never see each other's. With it, the lock of a save's check-write-record step, per
    file (64 shared by hash: a process that saves many sessions keeps a bounded number)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_path: dict[str, tuple[Any, ...] | None] = {}
        self._saves = [threading.Lock() for _ in range(64)]

    def save_lock(self, path: str) -> threading.Lock:
        return self._saves[hash(path) % len(self._saves)]

    def get(self, path: str) -> tuple[Any, ...] | None:
        with self._lock:
            return self._by_path.get(path)

    def note(self, path: str, signature: tuple[Any, ...] | None) -> None:
        with self._lock:
            self._by_path[path] = signature

    def forget(self, path: str) -> None:
        with self._lock:
            self._by_path.pop(path, None)


_seen = _Seen()
def _signature(path: str) -> tuple[Any, ...] | None:
    try:
        info = os.stat(path)
    except OSError:
        return None
    return info.st_mtime_ns, info.st_size, info.st_ino


class SessionStore:
    """The session files of one working directory."""

    def __init__(self, cwd: str, folder: str, redact: Callable[[Any], Any] | None = None, log: Logger | None = None):
        self.cwd = cwd
        self.folder = os.path.normpath(os.path.join(cwd, os.path.expanduser(folder)))
        self._redact = redact
        self._log = log

    def path_for(self, sid: str) -> str:
        if not valid_id(sid):  # checked before any path is built from it
            raise ValueError(f"not a valid session id: {sid!r}")
        return os.path.join(self.folder, sid + ".json")

    def save(self, sid: str, messages: list[dict[str, Any]], title: str | None = None, choices: dict[str, Any] | None = None,
             more: tuple[str, ...] = (), checkpoints: list[Any] | None = None) -> str:
        """Write the session; returns the id it was written under (another one when a second
        process changed this session's file since this process last read or wrote it)."""
        path = self.path_for(sid)
        messages = history.repaired(messages)
        with _seen.save_lock(path):
            head = self._head(path)
            known = _seen.get(path)
            now_on_disk = _signature(path)
            if now_on_disk is None or known is None or now_on_disk == known:
                self._write(path, sid, head, messages, title, choices, more, checkpoints)
                return sid
        forked = new_id()
        if self._log is not None:
            self._log.warning(f"[acp] session {sid}: its file changed on disk since this process wrote it "
                              f"(another process on the same session?); the file is kept and this "
                              f"conversation is saved as {forked}")
        return self.save(forked, messages, fork_title(title or head.get("title")), choices, more)

    def _write(self, path: str, sid: str, head: dict[str, Any], messages: list[dict[str, Any]], title: str | None,
               choices: dict[str, Any] | None, more: tuple[str, ...], checkpoints: list[Any] | None = None) -> None:
        document: dict[str, Any] = {"version": VERSION, "id": sid, "cwd": self.cwd, "title": title or head.get("title"),
                          "createdAt": head.get("createdAt") or _now(), "updatedAt": _now(),
                          "generation": int(head.get("generation") or 0) + 1, "choices": choices or {},
                          "turns": sum(1 for m in messages if m["role"] == "user")}
        if more:
            document["additionalDirectories"] = list(more)
        document["messages"] = self._redact(messages) if self._redact else messages
        if checkpoints:
            document["checkpoints"] = checkpoints  # (signed: redacted by their owner before)
        self._make_folder()
        atomic_write(path, jsontext.dumps(document, option=jsontext.OPT_INDENT_2) + b"\n")
        _seen.note(path, _signature(path))

    def _make_folder(self) -> None:
        """The sessions folder, kept out of the project's `git status`: under `.bob/`, by the
        .gitignore of Bob's folder (which leaves `.bob/skills` to be committed); elsewhere, by a
        .gitignore of `*` in the first folder Bob creates for it."""
        if os.path.isdir(self.folder):
            return
        from bob_acp.files import bobdir

        own = os.path.join(self.cwd, bobdir.NAME)
        if self.folder.startswith(own.rstrip(os.sep) + os.sep):
            bobdir.ensure(self.cwd)
            os.makedirs(self.folder, exist_ok=True)
            return
        first = self.folder
        while not os.path.isdir(os.path.dirname(first)) and os.path.dirname(first) != first:
            first = os.path.dirname(first)
        os.makedirs(self.folder, exist_ok=True)
        if first.startswith(self.cwd.rstrip(os.sep) + os.sep):
            try:
                with open(os.path.join(first, ".gitignore"), "x", encoding="utf-8") as handle:
                    handle.write("# Bob's own state (sessions): not part of the project\n*\n")
            except OSError:
                pass

    def _head(self, path: str) -> dict[str, Any]:
        try:
            return _read_parsed_head(path)
        except (OSError, ValueError):
            return {}

    def load(self, sid: str) -> StoredSession:
        try:
            path = self.path_for(sid)
        except ValueError:
            raise SessionLoadError(str(sid), "not a valid session id") from None
        try:
            with open_regular(path) as handle:
                data = read_up_to(handle, MAX_FILE_BYTES + 1)
                signature = _signature(path)
        except FileNotFoundError:
            raise SessionLoadError(sid, f"session not found in {jsontext.clean(self.folder)}", missing=True) from None
        except NotRegular:
            raise SessionLoadError(sid, f"{jsontext.clean(path)} is not a regular file") from None
        except OSError as exc:
            raise SessionLoadError(sid, f"cannot read {jsontext.clean(path)}: {exc.strerror}") from None
        if len(data) > MAX_FILE_BYTES:
            raise SessionLoadError(sid, f"file larger than {MAX_FILE_BYTES} bytes")
        document = _document(sid, path, data)
        _seen.note(path, signature)
        choices = mapping(document.get("choices"))
        title = document.get("title") if isinstance(document.get("title"), str) else None
        return StoredSession(sid, str(document.get("cwd", self.cwd)), history.upgraded(history.repaired(document["messages"])),
                             str(document.get("createdAt", "")), str(document.get("updatedAt", "")), title,
                             {k: v for k, v in choices.items() if isinstance(k, str) and isinstance(v, str)},
                             _roots(document), _list(document.get("checkpoints")))

    def delete(self, sid: str) -> bool:
        path = self.path_for(sid)
        try:
            os.unlink(path)
        except (FileNotFoundError, NotADirectoryError):  # no file, or no sessions folder at all
            return False
        _seen.forget(path)
        return True

    def entries(self) -> list[tuple[int, str]]:
        """(change time in ns, id) of each session file here: one stat each, no file read."""
        try:
            found = list(os.scandir(self.folder))
        except OSError:
            return []
        keyed = []
        for entry in found:
            sid = entry.name[:-5] if entry.name.endswith(".json") else ""
            if not valid_id(sid):
                continue
            try:
                info = entry.stat()
            except OSError:
                continue
            if stat.S_ISREG(info.st_mode):
                keyed.append((info.st_mtime_ns, sid))
        return keyed

    def listed(self, sid: str, mtime_ns: int) -> ListedSession | None:
        """What a listing shows of one session, from the head of its file alone."""
        try:
            head = _read_parsed_head(self.path_for(sid))
        except (OSError, ValueError):
            return None  # unreadable or not a session file: not listed
        if head.get("turns") == 0:
            return None  # nobody wrote in it (an editor opens a session per chat): nothing to resume
        when = head["updatedAt"] if isinstance(head.get("updatedAt"), str) else _iso(mtime_ns)
        title = head.get("title") if isinstance(head.get("title"), str) else None
        return ListedSession(sid, str(head.get("cwd") or self.cwd), title, when, _roots(head))


def _roots(document: dict[str, Any]) -> tuple[str, ...]:
    """The further roots a session file names (absolute paths only; anything else is ignored)."""
    value = document.get("additionalDirectories")
    if not isinstance(value, list):
        return ()
    return tuple(v for v in value[:64] if isinstance(v, str) and os.path.isabs(v) and "\0" not in v)


def page(stores: list["SessionStore"], cursor: str | None, limit: int,
         keep: Callable[[ListedSession], bool] | None = None) -> tuple[list[ListedSession], str | None]:
    """A page of the sessions of these stores (those `keep` accepts), the most recently updated
    first, and the cursor of the next page (None at the end). Only the page's files are read,
    and only their heads."""
    keyed = sorted({(mtime, sid, i) for i, store in enumerate(stores) for mtime, sid in store.entries()},
                   reverse=True)
    after = decode_cursor(cursor)
    if after is not None:
        keyed = [k for k in keyed if (k[0], k[1]) < after]
    listed: list[ListedSession] = []
    last: tuple[int, str] | None = None
    for mtime, sid, i in keyed:
        if len(listed) == limit and last is not None:
            return listed, encode_cursor(last)
        last = (mtime, sid)
        item = stores[i].listed(sid, mtime)
        if item is not None and (keep is None or keep(item)):
            listed.append(item)
    return listed, None


def _iso(mtime_ns: int) -> str:
    return iso(mtime_ns / 1e9)


def encode_cursor(key: tuple[int, str]) -> str:
    return base64.urlsafe_b64encode(f"{key[0]}:{key[1]}".encode()).decode()


def decode_cursor(cursor: str | None) -> tuple[int, str] | None:
    if not cursor:
        return None
    try:
        mtime, sid = base64.urlsafe_b64decode(cursor.encode()).decode().split(":", 1)
        if not valid_id(sid):
            raise ValueError(sid)
        return int(mtime), sid
    except (ValueError, UnicodeError):
        raise ValueError("not a cursor this agent gave") from None


def _read_parsed_head(path: str) -> dict[str, Any]:
    """A session file's head: from its first HEAD_BYTES, or, where the head is longer (a file
    whose large fields do not come last), from the whole file read as JSON."""
    with open_regular(path) as handle:
        data = handle.read(HEAD_BYTES)
        try:
            return _parse_head(data)
        except ValueError:
            if len(data) < HEAD_BYTES:
                raise
            data += read_up_to(handle, MAX_FILE_BYTES)
    try:
        document = jsontext.loads(data)
    except (jsontext.JSONDecodeError, RecursionError):
        raise ValueError("not valid JSON") from None
    document = _head_fields(document)
    return {k: v for k, v in document.items() if k.encode() not in (b"messages", b"checkpoints")}


_TOKEN = re.compile(rb'"(?:[^"\\]|\\.)*"|[{}\[\]]')
_BULK = (b'"messages"', b'"checkpoints"')  # the large fields, which a listing never reads


def _parse_head(data: bytes) -> dict[str, Any]:
    """The fields before the first of the large ones (`messages`, `checkpoints`), read as JSON:
    the head is walked token by token (strings whole, nesting counted), so a "messages" inside
    a string or a nested object is never taken for the top-level key. ValueError when the head
    does not end within `data` (the caller then reads the whole file)."""
    depth = 0
    for match in _TOKEN.finditer(data):
        token = match.group()
        if token in (b"{", b"["):
            depth += 1
        elif token in (b"}", b"]"):
            depth -= 1
        elif depth == 1 and token in _BULK and data[match.end():].lstrip()[:1] == b":":
            head = data[:match.start()].rstrip().rstrip(b",") + b"}"
            return _head_fields(jsontext.loads(head))
    raise ValueError("no messages key in the head")


def _head_fields(value: object) -> dict[str, Any]:
    if not isinstance(value, dict) or value.get("version") not in VERSIONS:
        raise ValueError("not a session file")
    return value


def _document(sid: str, path: str, data: bytes) -> dict[str, Any]:
    shown = jsontext.clean(path)
    try:
        document = jsontext.loads(data)
    except (jsontext.JSONDecodeError, RecursionError):
        raise SessionLoadError(sid, f"{shown} is not valid JSON") from None
    if not isinstance(document, dict):
        raise SessionLoadError(sid, f"{shown} is not a session file")
    if document.get("version") not in VERSIONS:
        raise SessionLoadError(sid, f"unsupported session file version {str(document.get('version'))[:40]!r}")
    messages = document.get("messages")
    if not isinstance(messages, list):
        raise SessionLoadError(sid, "messages: must be a list")
    for index, message in enumerate(messages):
        problem = message_problem(message)
        if problem:
            raise SessionLoadError(sid, f"malformed message {index}: {problem}")
    return document


def _list(value: object) -> list[Any]:
    return value if isinstance(value, list) else []


def message_problem(message: object) -> str | None:
    """Why `message` is not a bob_acp.context.history message, or None."""
    if not isinstance(message, dict):
        return "not an object"
    role = message.get("role")
    if role not in ("system", "user", "assistant", "tool"):
        return f"unknown role {str(role)[:40]!r}"
    content = message.get("content")
    if role == "user" and isinstance(content, list):  # (file version 3: parts)
        for part in content:
            kind = part.get("type") if isinstance(part, dict) else None
            if kind == "text" and isinstance(part.get("text"), str):
                continue
            if kind == "image" and isinstance(part.get("mimeType"), str) and isinstance(part.get("data"), str):
                continue
            return "a user message's parts must be text or images"
    elif not isinstance(content, str):
        return "content must be a string"
    if "typed" in message and not isinstance(message["typed"], str):
        return "typed must be a string"
    if "images" in message and (not isinstance(message["images"], list) or not all(
            isinstance(i, dict) and isinstance(i.get("mimeType"), str) and isinstance(i.get("data"), str)
            for i in message["images"])):
        return "images must be a list of {mimeType, data}"
    for flag in ("failed", "unanswered"):
        if flag in message and not isinstance(message[flag], bool):
            return f"{flag} must be true or false"
    if role == "tool":
        if not isinstance(message.get("tool_call_id"), str) or not isinstance(message.get("name"), str):
            return "a tool message needs tool_call_id and name strings"
    if role == "assistant" and "tool_calls" in message:
        calls = message["tool_calls"]
        if not isinstance(calls, list):
            return "tool_calls must be a list"
        for call in calls:
            if not isinstance(call, dict) or not isinstance(call.get("id"), str) or not isinstance(call.get("name"), str):
                return "a tool call needs id and name strings"
            if not isinstance(call.get("arguments"), dict):
                return "tool call arguments must be an object"
            if "ref" in call and not isinstance(call["ref"], str):
                return "a tool call ref must be a string"
    if role == "assistant" and "thinking" in message:
        blocks = message["thinking"]
        if not isinstance(blocks, list) or not all(isinstance(b, dict) for b in blocks):
            return "thinking must be a list of objects"
    return None


def replay_items(messages: list[dict[str, Any]]) -> list[ReplayItem]:
    """What session/load sends, in order (the product document's replay table)."""
    outputs = {m["tool_call_id"]: m for m in messages if m["role"] == "tool"}
    items: list[ReplayItem] = []
    for message in messages:
        role = message["role"]
        if role == "user":
            if message.get("summary"):
                items.append(ReplayItem("agent", "🗜️ " + history.summary_text(message)))
            else:  # what the user typed (`/greetings Ada`), not what the model was sent
                items.append(ReplayItem("user", message.get("typed") or history.text_of(message)))
                items += [ReplayItem("image", image=image) for image in history.images_of(message)]
        elif role == "assistant":
            if message["content"]:
                items.append(ReplayItem("agent", message["content"]))
            for call in message.get("tool_calls", ()):
                result = outputs.get(call["id"])
                output = result["content"] if result is not None and not result.get("unanswered") else None
                failed = bool(result is not None and result.get("failed")) or output in (
                    history.REJECTED, history.CANCELLED_RESULT, history.NOT_RUN)  # (files from before 0.13)
                items.append(ReplayItem("tool", ref=call.get("ref") or call["id"], name=call["name"],
                                        arguments=call["arguments"], output=output, failed=failed))
    return items
