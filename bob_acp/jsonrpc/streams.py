"""The two ends of the wire: a capped line reader and the single stdout writer.

Framing only: bytes in, bytes out. Parsing and routing live in endpoint.py.
"""

from __future__ import annotations

import os
import queue
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
    while True:
        line = bytearray()
        oversized = 0
        while True:
            chunk = stream.readline(_DISCARD_CHUNK)
            if not chunk:
                break
            ended = chunk.endswith(b"\n")
            if oversized:
                oversized += len(chunk) - ended
            elif len(line) + len(chunk) - ended > max_frame:
                oversized = len(line) + len(chunk) - ended
                line = bytearray()
            else:
                line += chunk
            if ended:
                break
        if oversized:
            yield Oversized(oversized)
        elif line:
            yield bytes(line[:-1]) if line.endswith(b"\n") else bytes(line)
        if not chunk:
            return


class Writer:
    """Owns the protocol stream. Frames are queued by any thread and written, whole and in order,
    by one writer thread, so a producer never blocks on a client that stopped reading.

    Stop it with close(); it writes what is queued first (bounded by the timeout given to close).
    """

    def __init__(self, fd: int):
        self._fd = fd
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._broken = threading.Event()
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, name="bob-writer", daemon=True)
        self._thread.start()

    @property
    def broken(self) -> bool:
        return self._broken.is_set()

    def send(self, data: bytes) -> None:
        """Queue one encoded frame (no trailing newline)."""
        if not self._broken.is_set():
            self._queue.put(data)

    def close(self, timeout: float = 1.0) -> bool:
        """Write what is queued, then stop. True when everything was written in time."""
        self._queue.put(None)
        return self._done.wait(timeout)

    def _run(self) -> None:
        try:
            while True:
                first = self._queue.get()
                if first is None:
                    return
                batch = [first, b"\n"]
                stop = False
                # Drain what is already queued into one write: same bytes, far fewer syscalls.
                while len(batch) < 512:
                    try:
                        item = self._queue.get_nowait()
                    except queue.Empty:
                        break
                    if item is None:
                        stop = True
                        break
                    batch += (item, b"\n")
                self._write_all(b"".join(batch))
                if stop:
                    return
        except OSError:
            self._broken.set()
        finally:
            self._done.set()

    def _write_all(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            written = os.write(self._fd, view)
            view = view[written:]
