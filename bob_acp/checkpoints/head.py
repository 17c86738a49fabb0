"""A root's git HEAD, read as data a command may have planted: whether a command committed,
checked out or switched branches is seen by comparing these bytes before and after it."""

from __future__ import annotations

import os

from bob_acp.files.beneath import Place

MAX_HEAD = 4096  # bytes of .git/HEAD and of the ref it names that are read


def git_head(root: str) -> bytes:
    """The root's git HEAD and the commit its branch names, as bytes to compare (b"" without git).
    Read as data a command may have planted: each a regular file beneath the root's .git, opened
    through descriptors without following a link and without waiting (a FIFO, a device, a link,
    an absolute or `..` ref is not read)."""
    head = small_file(root, ".git/HEAD")
    if head is None:
        return b""
    if head.startswith(b"ref: "):
        ref = os.fsdecode(head[5:].strip())
        parts = ref.split("/")
        if ref.startswith("/") or any(part in ("", ".", "..") for part in parts) or "\0" in ref:
            return head + b"(refused)"
        named = small_file(root, ".git/" + ref)
        head += named if named is not None else b"(packed)"
    return head


def small_file(root: str, relative: str) -> bytes | None:
    """A regular file's first MAX_HEAD bytes beneath `root`, never through a link or a wait."""
    try:
        with Place(root, relative) as place:
            return place.read(MAX_HEAD) if place.lstat() is not None else None
    except ValueError:
        return b"(too large)"
    except OSError:
        return None
