"""UTC timestamps as Bob writes them everywhere (session files, session/list, session_info_update,
the log): ISO 8601 with microseconds and a Z, `2026-12-04T10:15:30.123456Z`."""

from __future__ import annotations

import time


class PerSecond:
    """A whole second in UTC as `fmt` writes it (time.strftime), formatted once a second: log
    lines and session ids come many a second. One tuple, swapped whole: threads never see half."""

    __slots__ = ("_fmt", "_last")

    def __init__(self, fmt: str):
        self._fmt = fmt
        self._last: tuple[int, str] = (-1, "")

    def __call__(self, whole: int) -> str:
        known, text = self._last
        if known != whole:
            text = time.strftime(self._fmt, time.gmtime(whole))
            self._last = (whole, text)
        return text


_iso_second = PerSecond("%Y-%m-%dT%H:%M:%S")


def iso(seconds: float) -> str:
    """`seconds` since the epoch, in UTC (time.gmtime and %: several times cheaper than datetime)."""
    whole = int(seconds // 1)
    return f"{_iso_second(whole)}.{int((seconds - whole) * 1e6):06d}Z"


def utc_now() -> str:
    return iso(time.time())
