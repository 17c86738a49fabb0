"""Logging to stderr (or the configured file): console lines, or JSON lines through structlog.
Nothing here ever touches stdout.

Log calls only queue the event, stamped with the time it happened; one log thread formats and
writes it, so a slow stderr never slows a turn. For JSON lines that thread imports structlog
(which pulls in asyncio: ~80 ms) a moment after start-up, so answering `initialize` never waits
for it; console lines need no import.
The queue is bounded: when stderr is not read, lines past the bound are dropped and counted,
and a line says how many once writing goes on.
"""

from __future__ import annotations

import collections
import os
import sys
import threading
import time

from bob_acp.timestamps import iso

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable, Iterable, Mapping, MutableMapping, TextIO

# The standard library's numbers, without importing `logging` at start-up.
DEBUG, INFO, WARNING, ERROR = 10, 20, 30, 40
_LEVELS = {"debug": DEBUG, "info": INFO, "warning": WARNING, "error": ERROR}
IMPORT_DELAY = 0.15  # seconds the log thread leaves the start-up path alone
MAX_QUEUED = 10000  # events waiting for the log thread
BATCH_WINDOW = 0.02  # seconds the log thread lets lines gather before it writes them
_STOP = object()


class _Log:
    """The process's log, its one owner of state: its settings, its queue and the thread that
    writes it (one per process: Bob is one process with one stream)."""

    def __init__(self) -> None:
        self.level = INFO
        self.format = "console"
        self.path: str | None = None
        self.stream: TextIO | None = None
        self.thread: threading.Thread | None = None
        self.inline = False  # no log thread could be started: each line written by its caller
        self.emit: Callable[[str, str, str, dict[str, Any]], None] | None = None
        self.redactor: Any = None  # a secrets.Redactor once a secret is known
        self.closing = False
        self.queue: collections.deque[Any] = collections.deque()
        self.queue_lock = threading.Lock()
        self.ready = threading.Condition(self.queue_lock)
        self.dropped = 0
        self.idle = False  # the log thread waits (or is about to) for an item
        self.lost = 0  # lines the stream or a renderer failed on
        self.lost_why = ""  # and the last reason
        self.hurry = threading.Event()  # set by flush()/close(): no more waiting for start-up to pass
        self.inline_lock = threading.Lock()


_log = _Log()


def add_secrets(values: Iterable[str]) -> None:
    """Remember values (an API key) that must never reach a log line, whoever logs them, in any
    of their forms (raw, repr-escaped, JSON-escaped)."""
    from bob_acp.secrets import Redactor

    if _log.redactor is None:
        _log.redactor = Redactor()
    _log.redactor.add(values)


def add_secret(value: str | None) -> None:
    add_secrets([value] if value else [])


def _redact_processor(_logger: object, _name: str, event: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    """Each field (JSON lines: a field's text is escaped once more when written)."""
    redactor = _log.redactor
    if redactor:
        for key, value in event.items():
            if isinstance(value, (list, dict)):
                event[key] = redactor.tree(value)  # (a record's structure kept: a stack dump's threads)
            elif not isinstance(value, (int, float, bool, type(None))):
                event[key] = redactor.text(value if isinstance(value, str) else str(value))
    return event


def _redact_line(_logger: object, _name: str, line: str) -> str:
    """A console line, whole: every field is in it as it was written (str, or repr, whose
    escaping is one of the forms a secret is looked for in), so one look covers them all."""
    redactor = _log.redactor
    return redactor.text(line) if redactor and redactor.found(line) else line


def _stamp_processor(_logger: object, _name: str, event: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    """The time the event happened (taken by the caller), not the time it is written."""
    event["timestamp"] = iso(event.pop("_at", None) or time.time())
    return event


def _exc_info_processor(logger: object, name: str, event: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    """structlog's format_exc_info, for the rare event that carries exc_info (it costs a call
    and a lookup per line otherwise)."""
    if "exc_info" not in event:
        return event
    import structlog

    return structlog.processors.format_exc_info(logger, name, event)


def _fill_processor(_logger: object, _name: str, event: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    """An event given as a template with its fields (`"[acp] session {session}: closed",
    session=sid`) as its text, the fields kept beside it: the console shows the line, JSON has
    both. A template whose names are not all given is left as it is."""
    template = event.get("event")
    if type(template) is str:
        filled = _filled(template, event)
        if filled is not None:
            event["event"], event["_shown"] = filled
    return event


def _filled(template: str, fields: Mapping[str, Any]) -> tuple[str, frozenset[str]] | None:
    """(the text, the names it used) of a template whose fields are all given (its own, not
    the event's); None when it is not such a template (the text is then shown as it came)."""
    used = _names(template) if "{" in template else frozenset()
    if not used or used & _OWN or not used <= fields.keys():
        return None
    try:
        return template.format_map({name: fields[name] for name in used}), used
    except (ValueError, KeyError, IndexError, AttributeError):
        return None


_OWN = frozenset({"event", "level", "timestamp", "_at"})  # what every event has: not a template's fields


def _names(template: str) -> frozenset[str]:
    """The field names a template uses."""
    import string

    try:
        return frozenset(name for _, name, _, _ in string.Formatter().parse(template) if name)
    except ValueError:
        return frozenset()


def _json_renderer(_logger: object, _name: str, event: MutableMapping[str, Any]) -> str:
    from bob_acp import jsontext

    event.pop("_shown", None)
    plain = (str, int, float, bool, type(None))
    try:  # (lists and mappings as JSON: a stack dump is one record with its threads in it)
        return jsontext.dumps({k: v if isinstance(v, (*plain, list, dict)) else str(v) for k, v in event.items()}).decode()
    except TypeError:  # (something inside that JSON cannot hold: as text)
        return jsontext.dumps({k: v if isinstance(v, plain) else str(v) for k, v in event.items()}).decode()


def _console_line(method: str, event: object, fields: dict[str, Any]) -> str:
    """The console line of an event: the processors structlog would run for it, run directly
    (importing structlog costs ~80 ms, which a console line does not need)."""
    record: dict[str, Any] = {**fields, "event": event, "level": method}
    for processor in (_stamp_processor, _fill_processor, _exc_info_processor):
        record = processor(None, method, record)  # type: ignore[assignment]
    return _redact_line(None, method, _console_renderer(None, method, record))


def _console_renderer(_logger: object, _name: str, event: MutableMapping[str, Any]) -> str:
    """structlog's ConsoleRenderer layout without colours (`<time> [<level>  ] <event> k=v`),
    several times cheaper per line: a log line is written for every session and turn."""
    timestamp = event.pop("timestamp", "")
    level = event.pop("level", "")
    text = event.pop("event", "")
    detail = event.pop("detail", None)
    exception = event.pop("exception", None)
    if event.pop("_shown", None) is not None:  # a template's line says it all; its fields are for JSON
        event.clear()
    line = f"{timestamp} [{level:<9}] {text}"
    if event:
        line += " " + " ".join(f"{key}={value!r}" if not isinstance(value, str) else f"{key}={value}"
                               for key, value in event.items())
    for block in (detail, exception):
        if block:
            line += "\n" + str(block).rstrip("\n")
    return line


def _configure(level: int) -> Callable[[str], Any]:
    """structlog, for JSON lines."""
    import structlog

    structlog.configure(
        processors=[
            structlog.processors.add_log_level,
            _stamp_processor,
            _fill_processor,
            _exc_info_processor,
            _redact_processor,
            _json_renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(level),
        logger_factory=lambda *_args: _lines,
        cache_logger_on_first_use=True,
    )
    return structlog.get_logger


class _Lines:
    """structlog's output: rendered lines gathered, written with one write per batch (a write
    and a flush per line cost a system call each, under load thousands a second)."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def msg(self, message: str) -> None:
        self.lines.append(message)

    debug = info = warning = error = critical = exception = log = fatal = failure = err = msg

    def write_to(self, stream: TextIO) -> None:
        if not self.lines:
            return
        stream = _current(_log.stream or stream)
        count = len(self.lines)
        text, self.lines = "\n".join(self.lines) + "\n", []
        try:
            stream.write(text)
            stream.flush()
        except Exception as exc:  # a broken stream must not take the process down: counted, said when it works
            _lost(count, f"the log stream failed: {exc!r}")


_lines = _Lines()  # (structlog's output, gathered: see _Lines)


def _current(stream: TextIO) -> TextIO:
    """The log file as it is at its configured path now: one moved away (logrotate) or deleted
    is closed and the path opened again; stderr as it is."""
    path = _log.path
    if not path:
        return stream
    try:
        here = os.stat(path)
        mine = os.fstat(stream.fileno())
        if (here.st_dev, here.st_ino) == (mine.st_dev, mine.st_ino):
            return stream
    except (OSError, ValueError):
        pass  # (gone from its path, or closed: opened again below)
    try:
        fresh: TextIO = open(path, "a", encoding="utf-8", buffering=1)
    except OSError:
        return stream  # (its folder is gone: the old file goes on taking the lines)
    old, _log.stream = stream, fresh
    try:
        old.close()
    except OSError:
        pass
    return fresh


def _take() -> list[Any]:
    """Everything queued, in one go, gathered for up to BATCH_WINDOW after the first line: under
    load the log thread wakes a few dozen times a second, not once a line (each wake-up is a
    fight for the GIL with the threads serving the client). Lines keep the time of their event;
    flush() and close() cut the wait short."""
    with _log.ready:
        _log.idle = True  # (set before the queue is looked at: see _put)
        while not _log.queue:
            _log.ready.wait()
        _log.idle = False
    _log.hurry.wait(BATCH_WINDOW)
    items = [_log.queue.popleft() for _ in range(len(_log.queue))]  # (callers append meanwhile, without the lock)
    with _log.ready:
        dropped, _log.dropped = _log.dropped, 0
        lost, why = _log.lost, _log.lost_why
        _log.lost, _log.lost_why = 0, ""
    if dropped:
        items.insert(0, ("warning", "bob", f"{dropped} log line(s) dropped: the log stream was not read fast "
                                           "enough", {"_at": time.time()}))
    if lost:
        items.insert(0, ("warning", "bob", f"{lost} log line(s) lost: {why}", {"_at": time.time()}))
    return items


def _lost(count: int, why: str) -> None:
    with _log.ready:
        _log.lost += count
        _log.lost_why = why


def _run(level: int, fmt: str, stream: TextIO, delay: float) -> None:
    _log.hurry.wait(delay)
    get_logger: Callable[[str], Any] | None = None
    if fmt == "json":
        try:
            get_logger = _configure(level)
        except Exception as exc:  # (structlog cannot load: no memory left for it) console lines instead
            _lines.lines.append(_bare_line("warning", f"structlog could not be loaded ({exc!r}): console lines", {}))
    loggers: dict[str, Any] = {}

    def emit(method: str, name: str, event: str, fields: dict[str, Any]) -> None:
        try:
            if get_logger is None:
                _lines.lines.append(_console_line(method, event, fields))
                return
            logger = loggers.get(name)
            if logger is None:  # the bound logger itself (a proxy would bind again at every call)
                logger = loggers.setdefault(name, get_logger(name).bind())
            getattr(logger, method)(event, **fields)
        except Exception as exc:  # a line that cannot be rendered must not end logging: counted and said
            _lost(1, f"a line could not be rendered: {exc!r}")

    _log.emit = emit
    while True:
        try:
            if _serve_once(emit, stream):
                return
        except MemoryError:  # (the machine's memory limit: the lines of this batch are lost, said)
            _lines.lines.clear()
            _lost(1, "no memory to write them")


def _serve_once(emit: Callable[[str, str, str, dict[str, Any]], None], stream: TextIO) -> bool:
    """One batch of the queue, written; True at the end of logging."""
    for count, item in enumerate(_take(), 1):
        if count % 32 == 0:
            time.sleep(0)  # let go of the GIL now and then: a request waiting for it is not held up
        if item is _STOP:
            _lines.write_to(stream)
            return True
        if isinstance(item, threading.Event):  # a flush marker
            _lines.write_to(stream)
            item.set()
        elif callable(item):
            if _log.closing:
                continue  # (the process ends: a line of its start-up is not worth waiting for)
            try:
                item()
            except Exception as exc:  # a deferred job must not end logging
                emit("error", "bob", f"deferred log job failed: {exc!r}", {"_at": time.time()})
        else:
            emit(*item)
    _lines.write_to(stream)
    return False


def _bare_line(method: str, event: object, fields: dict[str, Any]) -> str:
    """The least line: the time, the level, the event as it came, its detail."""
    line = f"{iso(fields.get('_at') or time.time())} [{method:<9}] {event}"
    detail = fields.get("detail")
    if detail:
        line += "\n" + str(detail).rstrip("\n")
    return _redact_line(None, method, line)


def _put(item: object, bounded: bool = True) -> None:
    """Without a lock unless the log thread sleeps: it says so (idle) before it looks at the
    queue a last time, so an item appended after that look finds it marked and wakes it."""
    if bounded and len(_log.queue) >= MAX_QUEUED:
        with _log.ready:
            _log.dropped += 1
        return
    _log.queue.append(item)
    if _log.idle:
        with _log.ready:
            _log.ready.notify()


def setup(level: str = "info", fmt: str = "console", file: str | None = None, delay: float = IMPORT_DELAY) -> TextIO:
    """Start the log thread (once per process); returns the stream logs go to. Where no thread
    can be started (the machine's limit), each line is written as it is logged instead."""
    stream: TextIO = open(file, "a", encoding="utf-8", buffering=1) if file else sys.stderr
    _log.level = _LEVELS[level]
    _log.format = fmt
    _log.path = file
    _log.stream = stream
    if _log.thread is None:
        thread = threading.Thread(target=_run, args=(_LEVELS[level], fmt, stream, delay), name="bob-log", daemon=True)
        _log.thread = thread
        try:
            thread.start()
        except RuntimeError:
            _log.thread = None
            _log.inline = True
    return stream


def json_lines() -> bool:
    """Whether the log is written as JSON records (log.format: json)."""
    return _log.format == "json"


def stream() -> TextIO:
    """Where log lines go now: the configured file (as it is at its path), else stderr."""
    return _current(_log.stream or sys.stderr)


def defer(job: Callable[[], None]) -> None:
    """Run `job` on the log thread, after start-up (work whose only purpose is to log); skipped
    when the process ends before it ran."""
    _put(job, bounded=False)


def flush(timeout: float = 1.0) -> bool:
    """Wait until everything logged so far is written."""
    if _log.thread is None:
        return True
    done = threading.Event()
    _put(done, bounded=False)
    _log.hurry.set()
    return done.wait(timeout)


def close(timeout: float = 1.0) -> bool:
    """Write what is queued, then stop the log thread (the end of the process)."""
    thread = _log.thread
    if thread is None:
        return True
    _log.closing = True
    _put(_STOP, bounded=False)
    _log.hurry.set()
    thread.join(timeout)
    return not thread.is_alive()


class Logger:
    """The call sites' logger: cheap, thread-safe, never blocks on the stream."""

    __slots__ = ("name",)

    def __init__(self, name: str):
        self.name = name

    def _record(self, method: str, level: int, event: str, fields: dict[str, Any]) -> None:
        if level >= _log.level and _log.inline:
            return _write_now(method, event, fields)
        if level >= _log.level:
            fields.setdefault("_at", time.time())  # (a line about an earlier moment may bring its time)
            emit = _log.emit
            if emit is not None and threading.current_thread() is _log.thread:  # a deferred job: in its place, now
                emit(method, self.name, event, fields)
            else:
                _put((method, self.name, event, fields))

    def debug(self, event: str, **fields: object) -> None:
        self._record("debug", DEBUG, event, fields)

    def info(self, event: str, **fields: object) -> None:
        self._record("info", INFO, event, fields)

    def warning(self, event: str, **fields: object) -> None:
        self._record("warning", WARNING, event, fields)

    def error(self, event: str, **fields: object) -> None:
        self._record("error", ERROR, event, fields)


def _write_now(method: str, event: str, fields: dict[str, Any]) -> None:
    """A line written by its caller (no log thread could be started): the plain console line."""
    fields.setdefault("_at", time.time())
    try:
        try:
            line = _console_line(method, event, fields)
        except Exception:  # (a field that cannot be shown: the event as it came)
            line = _bare_line(method, event, fields)
        with _log.inline_lock:
            out = stream()
            out.write(line + "\n")
            out.flush()
    except Exception:  # noqa: BLE001  (a log line must never take the caller down)
        pass


def get(name: str = "bob") -> Logger:
    return Logger(name)
