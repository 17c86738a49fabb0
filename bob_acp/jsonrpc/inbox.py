"""What the reader has read and the dispatcher has not dispatched yet: a queue bounded in frames
and bytes. Past the bound the reader waits for room (so a client that floods Bob is slowed down
by its own pipe, never answered "server busy"), except for urgent notifications (a cancel),
which never wait; the dispatcher wakes it once there is room for a run, not at every frame."""

from __future__ import annotations

import queue
import threading

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

MAX_PENDING_FRAMES = 256  # frames read and waiting for the dispatcher
MAX_PENDING_BYTES = 16 * 1024 * 1024
HANDOFF_FRAMES = 64  # frames the reader hands to the dispatcher at most at once
HANDOFF_BYTES = 1024 * 1024  # (or bytes: a run past it is handed on)
STOP = object()  # (behind the runs queued: the dispatcher ends there)


class Inbox:
    def __init__(self, closed: threading.Event):
        # SimpleQueue (C) hands a run to the dispatcher faster than a Condition; the bound is
        # kept beside it, under its own lock, whose Condition the reader waits on when full.
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self.frames = 0
        self.bytes = 0
        self._lock = threading.Lock()
        self._room = threading.Condition(self._lock)
        self.reader_waiting = False
        self._closed = closed  # (set under the lock: a reader waiting for room sees it)

    def close(self) -> bool:
        """Mark the end (False when it was marked already); a reader waiting for room goes on."""
        with self._lock:
            if self._closed.is_set():
                return False
            self._closed.set()
            self._room.notify_all()
            return True

    def stop(self) -> None:
        self._queue.put(STOP)

    def hand(self, run: list[Any], urgent: bool = False) -> None:
        """Queue a run of (frame, size), frame by frame within the bound: as many of its frames as
        there is room for go at once, the reader waits for room for the rest."""
        start = 0
        while start < len(run):
            with self._lock:
                while (not urgent and not self._closed.is_set() and self.frames and
                       (self.frames >= MAX_PENDING_FRAMES or self.bytes + run[start][1] > MAX_PENDING_BYTES)):
                    self.reader_waiting = True  # (the dispatcher clears it when it wakes the reader)
                    self._room.wait()
                self.reader_waiting = False
                end, added = start + 1, run[start][1]  # (one frame always goes: there is room, or nothing waits)
                while end < len(run) and (urgent or (self.frames + end - start < MAX_PENDING_FRAMES and
                                                     self.bytes + added + run[end][1] <= MAX_PENDING_BYTES)):
                    added += run[end][1]
                    end += 1
                self.frames += end - start
                self.bytes += added
            self._queue.put(run[start:end] if start or end < len(run) else run)
            start = end

    def get(self) -> Any:
        """The next run (STOP at the end), waited for."""
        return self._queue.get()

    def empty(self) -> bool:
        return self._queue.empty()

    def taken(self, size: int) -> None:
        """A frame is dispatched: its room is free. A waiting reader is woken once there is room
        for a run (or half the bound), not at every frame: under a flood it would wake for each."""
        with self._lock:
            self.frames -= 1
            self.bytes -= size
            if (self.reader_waiting and self.frames <= MAX_PENDING_FRAMES - min(HANDOFF_FRAMES, MAX_PENDING_FRAMES // 2)
                    and self.bytes <= MAX_PENDING_BYTES // 2):
                self.reader_waiting = False
                self._room.notify()
