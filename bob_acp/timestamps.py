"""UTC timestamps as Bob writes them everywhere (session files, session/list, session_info_update,
the log): ISO 8601 with microseconds and a Z, `2026-12-04T10:15:30.123456Z`."""

from __future__ import annotations

import time

_second: list[tuple[int, str]] = [(-1, "")]  # the last whole second formatted (log lines come many a second)


def iso(seconds: float) -> str:
    """`seconds` since the epoch, in UTC (time.gmtime and %: several times cheaper than datetime)."""
    whole = int(seconds // 1)
    known, text = _second[0]  # (one tuple, swapped whole: threads never see half of it)
    if known != whole:
        text = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(whole))
        _second[0] = (whole, text)
    return f"{text}.{int((seconds - whole) * 1e6):06d}Z"


def utc_now() -> str:
    return iso(time.time())
