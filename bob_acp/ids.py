"""Random ids: a message's, a thought's, a compaction's (a version 4 UUID, as text)."""

from __future__ import annotations

import os


def new_id() -> str:
    """A random (version 4) UUID, as text. (Made here, not by the uuid module, which loads
    `platform`: Bob's first answer need not wait for it.)"""
    raw = bytearray(os.urandom(16))
    raw[6] = (raw[6] & 0x0F) | 0x40
    raw[8] = (raw[8] & 0x3F) | 0x80
    h = raw.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"
