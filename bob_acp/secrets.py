"""Secrets in text and in Bob's own environment block: their redaction, in every form a secret
can take in a text (raw, repr-escaped and JSON-escaped), and their removal from what a child can
read of Bob's process. Which values are secrets is bob_acp.config.environment's business."""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Iterable

MIN_SECRET = 6  # shorter values ("1", "true") would redact ordinary words


def hide_from_children(names: Iterable[str]) -> int:
    """Take these variables out of this process's own environment block, so a child cannot
    read them in /proc/<Bob's pid>/environ (Bob keeps their values in memory). The bytes the
    kernel shows there are overwritten in place, then the variables are unset. Returns how many
    were hidden; 0 where this cannot be done (not Linux, no libc)."""
    import os
    import sys

    names = {name for name in names if name in os.environ}
    if not names or not sys.platform.startswith("linux"):
        return 0
    try:
        import ctypes

        libc = ctypes.CDLL(None)
        environ = ctypes.POINTER(ctypes.c_void_p).in_dll(libc, "environ")
    except (OSError, ValueError, AttributeError):
        return 0
    prefixes = tuple(name.encode() + b"=" for name in names)
    hidden, index = 0, 0
    while environ[index]:
        address = environ[index]
        item = ctypes.string_at(address)
        if item.startswith(prefixes):
            ctypes.memset(address, 0, len(item))
            hidden += 1
        index += 1
    for name in names:
        os.environ.pop(name, None)
    return hidden


def forms(secret: str) -> list[str]:
    """A secret as a text may hold it: raw, inside a repr, inside a JSON string."""
    import json

    found = {secret, repr(secret)[1:-1], json.dumps(secret)[1:-1]}
    return sorted(found, key=len, reverse=True)


class Redactor:
    """Replaces every known secret, in each of its forms, by [redacted]."""

    def __init__(self, secrets: Iterable[str] = ()):
        self._forms: list[str] = []
        self.add(secrets)

    def add(self, secrets: Iterable[str]) -> None:
        for secret in secrets:
            if secret and len(secret) >= MIN_SECRET:
                for form in forms(secret):
                    if form not in self._forms:
                        self._forms.append(form)
        self._forms.sort(key=len, reverse=True)

    def __bool__(self) -> bool:
        return bool(self._forms)

    def found(self, text: str) -> bool:
        """Whether `text` holds a secret in any of its forms."""
        return any(form in text for form in self._forms)

    def text(self, text: str) -> str:
        for form in self._forms:
            if form in text:
                text = text.replace(form, "[redacted]")
        return text

    def tree(self, value: object) -> Any:
        """A JSON-like value with every string redacted (a session file before it is written)."""
        if not self._forms:
            return value
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {k: self.tree(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self.tree(v) for v in value]
        return value
