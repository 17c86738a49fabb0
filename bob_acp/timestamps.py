"""UTC timestamps as Bob writes them everywhere (session files, session/list, session_info_update,
the log): ISO 8601 with microseconds and a Z, `2026-12-04T10:15:30.123456Z`."""

from __future__ import annotations

import time


def iso(seconds: float) -> str:
    """`seconds` since the epoch, in UTC (time.gmtime and %: several times cheaper than datetime)."""
    whole = int(seconds // 1)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(whole)) + f".{int((seconds - whole) * 1e6):06d}Z"


def utc_now() -> str:
    return iso(time.time())
