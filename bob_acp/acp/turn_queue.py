"""The global turn lock as a FIFO queue: turns run one at a time, process-wide, in the order
their prompts arrived. A ticket is taken on the dispatcher, in frame order; the worker waits on
its own ticket (no polling), and a cancel withdraws a waiting ticket at once."""

from __future__ import annotations

import collections
import threading


class Ticket:
    __slots__ = ("_queue", "_event", "granted", "withdrawn")

    def __init__(self, queue: "TurnQueue"):
        self._queue = queue
        self._event = threading.Event()
        self.granted = False
        self.withdrawn = False

    def wait(self) -> bool:
        """Block until this ticket's turn comes (True) or it is withdrawn (False)."""
        self._event.wait()
        return self.granted

    def withdraw(self) -> None:
        """Give the place up: safe from any thread, at any time (a cancel's callback)."""
        self._queue._withdraw(self)

    def release(self) -> None:
        """End this ticket's turn, or give up its place if the turn never came."""
        self._queue._release(self)


class TurnQueue:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._waiting: collections.deque[Ticket] = collections.deque()
        self._holder: Ticket | None = None

    def enqueue(self) -> Ticket:
        ticket = Ticket(self)
        with self._lock:
            if self._holder is None and not self._waiting:
                self._grant(ticket)
            else:
                self._waiting.append(ticket)
        return ticket

    def waiting(self) -> int:
        with self._lock:
            return len(self._waiting)

    def _grant(self, ticket: Ticket) -> None:
        self._holder = ticket
        ticket.granted = True
        ticket._event.set()

    def _withdraw(self, ticket: Ticket) -> None:
        with self._lock:
            self._leave(ticket)  # granted already: the turn itself sees the cancel and ends

    def _leave(self, ticket: Ticket) -> None:
        """A ticket not granted gives its place up (called with the lock held)."""
        if ticket.granted or ticket.withdrawn:
            return
        ticket.withdrawn = True
        try:
            self._waiting.remove(ticket)
        except ValueError:
            pass
        ticket._event.set()

    def _release(self, ticket: Ticket) -> None:
        with self._lock:
            if self._holder is not ticket:
                self._leave(ticket)
                return
            self._holder = None
            if self._waiting:
                self._grant(self._waiting.popleft())
