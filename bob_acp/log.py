"""Logging: structlog to stderr (or the configured file). Nothing here ever touches stdout.

Log calls only queue the event; one log thread formats and writes it. That thread imports
structlog (which pulls in asyncio: ~80 ms) a moment after start-up, so answering `initialize`
never waits for it, and a slow stderr never slows a turn.
"""

from __future__ import annotations

import queue
import sys
import threading
from typing import Any, Callable, TextIO

# The standard library's numbers, without importing `logging` at start-up.
DEBUG, INFO, WARNING, ERROR = 10, 20, 30, 40
_LEVELS = {"debug": DEBUG, "info": INFO, "warning": WARNING, "error": ERROR}
IMPORT_DELAY = 0.15  # seconds the log thread leaves the start-up path alone
_secrets: list[str] = []
_state: dict[str, Any] = {"level": INFO, "thread": None}
_queue: queue.SimpleQueue = queue.SimpleQueue()
_hurry = threading.Event()  # set by flush(): no more waiting for start-up to pass


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
            if not isinstance(value, (int, float, bool, type(None))):
                event[key] = _redact(value if isinstance(value, str) else str(value))
    return event


def _json_renderer(_logger: Any, _name: str, event: dict) -> str:
    import orjson

    return orjson.dumps(event, default=str).decode()


def _configure(level: int, fmt: str, stream: TextIO) -> Callable[[str], Any]:
    import structlog

    renderer = _json_renderer if fmt == "json" else structlog.dev.ConsoleRenderer(colors=False, pad_event_to=0)
    structlog.configure(
        processors=[
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            _redact_processor,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(level),
        logger_factory=structlog.PrintLoggerFactory(file=stream),
        cache_logger_on_first_use=True,
    )
    return structlog.get_logger


def _run(level: int, fmt: str, stream: TextIO, delay: float) -> None:
    _hurry.wait(delay)
    get_logger = _configure(level, fmt, stream)
    loggers: dict[str, Any] = {}

    def emit(method: str, name: str, event: str, fields: dict) -> None:
        logger = loggers.get(name) or loggers.setdefault(name, get_logger(name))
        try:
            getattr(logger, method)(event, **fields)
        except Exception:  # a broken stream must not take the process down
            pass

    _state["emit"] = emit
    while True:
        item = _queue.get()
        if item is None:
            return
        if isinstance(item, threading.Event):  # a flush marker
            item.set()
            continue
        if callable(item):
            try:
                item()
            except Exception as exc:  # a deferred job must not end logging
                item = ("error", "bob", f"deferred log job failed: {exc!r}", {})
            else:
                continue
        emit(*item)


def setup(level: str = "info", fmt: str = "console", file: str | None = None, delay: float = IMPORT_DELAY) -> TextIO:
    """Start the log thread (once per process); returns the stream logs go to."""
    stream: TextIO = open(file, "a", encoding="utf-8", buffering=1) if file else sys.stderr
    _state["level"] = _LEVELS[level]
    if _state["thread"] is None:
        thread = threading.Thread(target=_run, args=(_LEVELS[level], fmt, stream, delay), name="bob-log", daemon=True)
        _state["thread"] = thread
        thread.start()
    return stream


def defer(job: Callable[[], None]) -> None:
    """Run `job` on the log thread, after start-up (work whose only purpose is to log)."""
    _queue.put(job)


def flush(timeout: float = 1.0) -> bool:
    """Wait until everything logged so far is written."""
    if _state["thread"] is None:
        return True
    done = threading.Event()
    _queue.put(done)
    _hurry.set()
    return done.wait(timeout)


class Logger:
    """The call sites' logger: cheap, thread-safe, never blocks on the stream."""

    __slots__ = ("name",)

    def __init__(self, name: str):
        self.name = name

    def _log(self, method: str, level: int, event: str, fields: dict) -> None:
        if level >= _state["level"]:
            if threading.current_thread() is _state["thread"]:  # a deferred job: in its place, now
                _state["emit"](method, self.name, event, fields)
            else:
                _queue.put((method, self.name, event, fields))

    def debug(self, event: str, **fields: Any) -> None:
        self._log("debug", DEBUG, event, fields)

    def info(self, event: str, **fields: Any) -> None:
        self._log("info", INFO, event, fields)

    def warning(self, event: str, **fields: Any) -> None:
        self._log("warning", WARNING, event, fields)

    def error(self, event: str, **fields: Any) -> None:
        self._log("error", ERROR, event, fields)


def get(name: str = "bob") -> Logger:
    return Logger(name)
