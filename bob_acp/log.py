"""Logging: structlog to stderr (or the configured file). Nothing here ever touches stdout."""

from __future__ import annotations

import logging
import sys
from typing import Any, TextIO

import structlog

_LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING, "error": logging.ERROR}
_secrets: list[str] = []


def add_secret(value: str | None) -> None:
    """Remember a value (an API key) that must never reach a log line, whoever logs it."""
    if value and len(value) >= 4 and value not in _secrets:
        _secrets.append(value)


def _redact(text: str) -> str:
    for secret in _secrets:
        if secret in text:
            text = text.replace(secret, "[redacted]")
    return text


def _redact_processor(_logger: Any, _name: str, event: dict) -> dict:
    if _secrets:
        for key, value in event.items():
            if isinstance(value, str):
                event[key] = _redact(value)
            elif key == "exception" or not isinstance(value, (int, float, bool, type(None))):
                event[key] = _redact(str(value)) if not isinstance(value, str) else value
    return event


def _json_renderer(_logger: Any, _name: str, event: dict) -> str:
    import orjson

    return orjson.dumps(event, default=str).decode()


def setup(level: str = "info", fmt: str = "console", file: str | None = None) -> TextIO:
    """Configure structlog once for the process; returns the stream logs go to."""
    stream: TextIO = open(file, "a", encoding="utf-8", buffering=1) if file else sys.stderr
    renderer = _json_renderer if fmt == "json" else structlog.dev.ConsoleRenderer(colors=False, pad_event_to=0)
    structlog.configure(
        processors=[
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            _redact_processor,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(_LEVELS[level]),
        logger_factory=structlog.PrintLoggerFactory(file=stream),
        cache_logger_on_first_use=True,
    )
    return stream


def get(name: str = "bob", **bound: Any) -> Any:
    return structlog.get_logger(name, **bound)
