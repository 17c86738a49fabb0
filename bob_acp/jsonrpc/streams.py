"""The two ends of the wire: a capped line reader and the single stdout writer.

Framing only: bytes in, bytes out. Parsing and routing live in endpoint.py.
"""

from __future__ import annotations

import collections
import os
import threading
from typing import BinaryIO, Iterator

MAX_FRAME = 4 * 1024 * 1024  # bytes in one line, newline excluded
_DISCARD_CHUNK = 64 * 1024


class Oversized:
    """Stands for a line longer than the cap; only its size is kept, never its bytes."""

    def __init__(self, size: int):
        self.size = size


def read_frames(stream: BinaryIO, max_frame: int = MAX_FRAME) -> Iterator[bytes | Oversized]:
    """Yield each line of `stream` without its newline, or Oversized for a line over the cap.

    A line is gathered in small chunks, so at most about max_frame bytes of it are ever held:
    past the cap the gathered part is dropped, the rest is read and thrown away chunk by chunk,
    and reading goes on with the next line.
    """
    readline = stream.readline
    while True:
        chunk = readline(_DISCARD_CHUNK)
        if not chunk:
            return
        if chunk.endswith(b"\n") and len(chunk) <= max_frame + 1:
            yield chunk[:-1]  # the common case: a whole line in one read, one copy
            continue
        line = bytearray()
        oversized = 0
        while True:
            ended = chunk.endswith(b"\n")
            size = len(chunk) - ended
            if oversized:
                oversized += size
            elif len(line) + size > max_frame:
                oversized = len(line) + size
                line = bytearray()
            else:
                line += chunk[:size]
            if ended:
                break
            chunk = readline(_DISCARD_CHUNK)
            if not chunk:
                break
        if oversized:
            yield Oversized(oversized)
        elif line:
            yield bytes(line)
        if not chunk:
            return


class Writer:
    """Owns the protocol stream: one lock, every frame written whole and in order.

    A frame is written at once by the thread that sends it, on a non-blocking descriptor, so
    the common case costs one syscall and no thread switch. What the pipe cannot take (a
    client that is slow or stopped reading) is queued for the writer thread, which waits for
    the pipe; frames sent meanwhile queue behind it. So no producer ever blocks on the client.

    Stop it with close(): it writes what is queued first (bounded by close's timeout).
    """

    def __init__(self, fd: int):
        self._fd = fd
        os.set_blocking(fd, False)
        self._lock = threading.Lock()
        self._backlog: collections.deque[memoryview] = collections.deque()
        self._wake = threading.Condition(self._lock)
        self._closing = False
        self._broken = threading.Event()
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, name="bob-writer", daemon=True)
        self._thread.start()

    @property
    def broken(self) -> bool:
        return self._broken.is_set()

    def send(self, data: bytes) -> None:
        """Write one encoded frame (no trailing newline)."""
        data += b"\n"
        with self._lock:
            if self._broken.is_set() or self._closing:
                return
            if self._backlog:
                self._backlog.append(memoryview(data))
                return
            try:
                written = os.write(self._fd, data)
            except BlockingIOError:
                written = 0
            except OSError:
                self._broken.set()
                self._wake.notify()
                return
            if written < len(data):
                self._backlog.append(memoryview(data)[written:])
                self._wake.notify()

    def close(self, timeout: float = 1.0) -> bool:
        """Write what is queued, then stop. True when everything was written in time."""
        with self._lock:
            self._closing = True
            self._wake.notify()
        return self._done.wait(timeout)

    def _run(self) -> None:
        import select

        poller = select.poll()
        poller.register(self._fd, select.POLLOUT)
        try:
            while True:
                with self._lock:
                    while not self._backlog and not self._closing:
                        self._wake.wait()
                    if not self._backlog:
                        return
                    self._drain()
                    if not self._backlog:
                        continue
                poller.poll(100)  # wait, unlocked, until the client reads
        except OSError:
            self._broken.set()
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
            if written < len(head):
                self._backlog[0] = head[written:]
                return
            self._backlog.popleft()
