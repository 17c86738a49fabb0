"""The two ends of the wire: a capped line reader and the single stdout writer.

Framing only: bytes in, bytes out. Parsing and routing live in endpoint.py.
"""

from __future__ import annotations

import collections
import os
import threading

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import IO, Callable, Iterator

MAX_FRAME = 4 * 1024 * 1024  # bytes in one line, newline excluded
_LINE_CHUNK = 64 * 1024  # what a stream without a descriptor is asked for at once
MAX_BACKLOG = 16 * 1024 * 1024  # bytes of output waiting for a slow client before senders wait


EDGE = 256  # bytes an Oversized keeps of each end of its line (where an answer's id is)


class Oversized:
    """Stands for a line longer than the cap; only its size and a few bytes of each end are
    kept (`head`, `tail`), never the line."""

    def __init__(self, size: int, head: bytes = b"", tail: bytes = b""):
        self.size = size
        self.head = head
        self.tail = tail


class Flush:
    """read_frames(marks=True): every line read so far has been given; reading more may wait."""


FLUSH = Flush()


def read_frames(stream: IO[bytes], max_frame: int = MAX_FRAME, marks: bool = False,
                on_read: Callable[[], None] | None = None) -> Iterator[bytes | Oversized | Flush]:
    """Yield each line of `stream` without its newline, or Oversized for a line over the cap.

    At most about max_frame bytes of a line are ever held: past the cap the gathered part is
    dropped, the rest is read and thrown away, and reading goes on with the next line. A
    descriptor somebody made non-blocking (a terminal shared with another program) is waited
    on, never taken for the end of input. `marks`: FLUSH is yielded whenever the lines read so
    far are all given and reading more may wait, so that a caller can hand on what it gathered
    in one go. `on_read()` is called after each read, before any line of it is given. A stream
    with a descriptor is read through it, bypassing its buffer: it must not have been read
    from before.
    """
    try:
        fd = stream.fileno()
    except (AttributeError, OSError, ValueError):
        fd = -1
    if fd >= 0:
        yield from _frames(_patient_read(fd), READ_SIZE, max_frame, marks, on_read)
    else:  # (a test's BytesIO, the chat's tee): a line, or a part of one, at a time
        yield from _frames(_patient_readline(stream), _LINE_CHUNK, max_frame, marks, on_read)


READ_SIZE = 256 * 1024


def _frames(read: Callable[[int], bytes], size: int, max_frame: int, marks: bool,
            on_read: Callable[[], None] | None) -> Iterator[bytes | Oversized | Flush]:
    """Each read takes what is there (up to `size`: on a descriptor, whatever the client has
    written), every whole line in it is given, and the start of the next is kept."""
    partial: list[bytes] = []  # the start of a line whose end has not come (at most max_frame bytes)
    held = 0  # its size: kept as the reads' own pieces, never regrown (a line that passes the cap
    # costs what it held, not a copy with a growth margin on top)
    over = 0  # > 0: the size so far of a line past the cap, being thrown away
    head = tail = b""
    while True:
        chunk = read(size)
        if not chunk:
            break
        if on_read is not None:
            on_read()
        start = 0
        end = chunk.find(b"\n")
        while end >= 0:
            piece = chunk[start:end]
            if over:
                yield Oversized(over + len(piece), head, (tail + piece)[-EDGE:])
                over = 0
            elif partial:
                if held + len(piece) > max_frame:
                    yield Oversized(held + len(piece), _head([*partial, piece]), _tail([*partial, piece]))
                else:
                    yield b"".join(partial) + piece
                partial, held = [], 0
            elif len(piece) > max_frame:
                yield Oversized(len(piece), piece[:EDGE], piece[-EDGE:])
            else:
                yield piece
            start = end + 1
            end = chunk.find(b"\n", start)
        if start < len(chunk):
            rest = chunk[start:]
            if over:
                over += len(rest)
                tail = (tail + rest)[-EDGE:]
            elif held + len(rest) > max_frame:
                over = held + len(rest)
                head, tail = _head([*partial, rest]), _tail([*partial, rest])
                partial, held = [], 0
            else:
                partial.append(rest)
                held += len(rest)
        if marks:
            yield FLUSH
    if over:  # the end of input: a last line without its newline
        yield Oversized(over, head, tail)
    elif partial:
        yield b"".join(partial)


def _head(parts: list[bytes]) -> bytes:
    """The first EDGE bytes of a line held in pieces."""
    out = b""
    for part in parts:
        out += part[:EDGE - len(out)]
        if len(out) >= EDGE:
            break
    return out


def _tail(parts: list[bytes]) -> bytes:
    """The last EDGE bytes of a line held in pieces."""
    out = b""
    for part in reversed(parts):
        out = part[max(0, len(part) - (EDGE - len(out))):] + out
        if len(out) >= EDGE:
            break
    return out


def _patient_read(fd: int) -> Callable[[int], bytes]:
    """os.read, except that "no data yet" on a non-blocking descriptor waits for data (b"" is
    only ever the end of input)."""

    def patient(size: int) -> bytes:
        while True:
            try:
                return os.read(fd, size)
            except BlockingIOError:
                import select

                select.select([fd], [], [])

    return patient


def _patient_readline(stream: IO[bytes]) -> Callable[[int], bytes]:
    """stream.readline, except that "no data yet" on a non-blocking descriptor waits for data:
    only b"" from a descriptor that select() called readable is the end of input."""
    readline = stream.readline
    try:
        fd = stream.fileno()
    except (AttributeError, OSError, ValueError):
        return readline

    def patient(size: int) -> bytes:
        while True:
            try:
                chunk = readline(size)
            except BlockingIOError:
                chunk = None
            if chunk:
                return chunk
            if chunk is not None and os.get_blocking(fd):
                return b""
            import select

            readable, _, _ = select.select([fd], [], [])
            if readable:
                try:
                    chunk = readline(size)
                except BlockingIOError:
                    continue
                if chunk is not None:
                    return chunk  # b"" here is a real end of input

    return patient


class Writer:
    """Owns the protocol stream: one lock, every frame written whole and in order.

    A frame is written at once by the thread that sends it, on a non-blocking descriptor, so
    the common case costs one syscall and no thread switch. What the pipe cannot take (a slow
    client, or one that stopped reading) waits in a backlog that the writer thread drains as the
    client reads. The backlog is bounded (max_backlog bytes): past it a sender waits for room,
    so a client that stops reading slows Bob down instead of growing its memory; `give_up`
    (checked whenever wake() is called) lets a cancelled turn stop waiting and queue its last
    few frames anyway. A terminal is written blocking (its flags are shared with the shell).

    EPIPE (the client closed its end) calls on_broken once. Stop it with close(): it writes what
    is queued first (bounded by close's timeout) and restores the descriptor's blocking flag.
    """

    def __init__(self, fd: int, max_backlog: int = MAX_BACKLOG, on_broken: Callable[[], None] | None = None):
        self._fd = fd
        self._max_backlog = max_backlog
        self._on_broken = on_broken
        self._was_blocking = os.get_blocking(fd)
        self._direct = os.isatty(fd)  # blocking writes, nothing queued
        if not self._direct:
            os.set_blocking(fd, False)
        self._lock = threading.Lock()
        self._backlog: collections.deque[memoryview] = collections.deque()
        self._backlog_bytes = 0
        self._wake = threading.Condition(self._lock)  # the writer thread: backlog or closing
        self._room = threading.Condition(self._lock)  # senders waiting for room
        self._closing = False
        self._broken = threading.Event()
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, name="bob-writer", daemon=True)
        try:
            self._thread.start()
        except RuntimeError:  # (the machine's thread limit: every frame is written whole, blocking)
            self._direct = True
            os.set_blocking(fd, True)
            self._done.set()

    @property
    def broken(self) -> bool:
        return self._broken.is_set()

    def send(self, data: bytes, give_up: Callable[[], bool] | None = None) -> bool:
        """Write one encoded frame (no trailing newline), waiting while the backlog is full.
        False when it was not written: the stream is broken or closed."""
        data += b"\n"
        with self._lock:
            while (self._backlog_bytes and self._backlog_bytes + len(data) > self._max_backlog
                   and not self._closing and not self._broken.is_set() and not (give_up and give_up())):
                self._room.wait()
            if self._broken.is_set():
                return False
            if self._backlog:
                self._queue(memoryview(data))
                return True
            try:
                written = os.write(self._fd, data)
                while self._direct and written < len(data):
                    written += os.write(self._fd, memoryview(data)[written:])
            except BlockingIOError:
                written = 0
            except OSError:
                self._break()
                return False
            if written < len(data):
                self._queue(memoryview(data)[written:])
            return True

    def wake(self) -> None:
        """Have waiting senders check their give_up again (a turn was cancelled)."""
        with self._lock:
            self._room.notify_all()

    def close(self, timeout: float = 1.0) -> bool:
        """Write what is queued, then stop. True when everything was written in time."""
        with self._lock:
            self._closing = True
            written = not self._backlog  # (then the thread has nothing left to do: not waited for)
            self._wake.notify()
            self._room.notify_all()
        done = written or self._done.wait(timeout)
        try:
            os.set_blocking(self._fd, self._was_blocking)
        except OSError:
            pass
        return done

    def _queue(self, view: memoryview) -> None:
        self._backlog.append(view)
        self._backlog_bytes += len(view)
        self._wake.notify()

    def _break(self) -> None:
        """Called with the lock held."""
        first = not self._broken.is_set()
        self._broken.set()
        self._backlog.clear()
        self._backlog_bytes = 0
        self._wake.notify()
        self._room.notify_all()
        if first and self._on_broken is not None:
            threading.Thread(target=self._on_broken, name="bob-output-closed", daemon=True).start()

    def _run(self) -> None:
        import select

        poller = select.poll()
        poller.register(self._fd, select.POLLOUT)
        try:
            while True:
                with self._lock:
                    while not self._backlog and not self._closing and not self._broken.is_set():
                        self._wake.wait()
                    if not self._backlog:
                        return
                    self._drain()
                    if not self._backlog:
                        continue
                poller.poll()  # wait, unlocked, until the client reads (or closes its end)
        finally:
            self._done.set()

    def _drain(self) -> None:
        """Write as much of the backlog as the pipe takes (called with the lock held)."""
        while self._backlog:
            head = self._backlog[0]
            try:
                written = os.write(self._fd, head)
            except BlockingIOError:
                return
            except OSError:
                self._break()
                return
            self._backlog_bytes -= written
            if written < len(head):
                self._backlog[0] = head[written:]
            else:
                self._backlog.popleft()
            self._room.notify_all()
