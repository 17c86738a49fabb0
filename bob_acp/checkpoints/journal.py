"""The restore journal a folder's sessions share: while an /undo or /redo is under way, a marker
`restoring-<session>` in the project's store says so, so that a Bob stopped during it leaves
word for every new session in the folder until that restore is finished. (The session's own
file says it too, for the session itself: `Record.pending`.)"""

from __future__ import annotations

import contextlib
import os

from bob_acp import jsontext

PREFIX = "restoring-"


def _marker(store: str, session_id: str) -> str:
    return os.path.join(store, f"{PREFIX}{session_id}")


def mark(store: str, session_id: str, to: int) -> None:
    """A restore of this session begins (`to` 0: an /undo, else a /redo)."""
    with contextlib.suppress(OSError):
        os.makedirs(store, mode=0o700, exist_ok=True)
        fd = os.open(_marker(store, session_id), os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC,
                     0o600)
        with os.fdopen(fd, "w") as handle:
            handle.write("/undo" if to == 0 else "/redo")


def unmark(store: str, session_id: str) -> None:
    """The restore is finished."""
    with contextlib.suppress(OSError):
        os.unlink(_marker(store, session_id))


def unfinished(store: str, session_id: str) -> list[str]:
    """What a new session must hear: each /undo or /redo another session began here and did not
    finish. (Each marker read as data: never through a link, never waiting on a FIFO.)"""
    try:
        names = sorted(n for n in os.listdir(store) if n.startswith(PREFIX))
    except OSError:
        return []
    said = []
    for name in names:
        session = name[len(PREFIX):]
        if session == session_id:
            continue
        try:
            fd = os.open(os.path.join(store, name), os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
            with os.fdopen(fd, "rb") as handle:
                command = "/redo" if handle.read(16).startswith(b"/redo") else "/undo"
        except OSError:
            continue
        said.append(f"An {command} of session {jsontext.clean(session)[:40]} in this folder did not finish (Bob was "
                    "stopped during it): some of its files may be put back and others not. Load that session and "
                    f"run {command} again to finish it.")
    return said
