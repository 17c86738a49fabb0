"""A turn's cancellation: one object every waiter of the turn listens to.

Whoever waits on behalf of a turn (the turn queue, a permission request, a tool's worker, a
model stream) subscribes a callback that wakes it; set() runs them all at once, so nothing
polls. A callback subscribed after set() runs at once, on the subscribing thread.
"""

from __future__ import annotations

import threading

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Callable


SHUTDOWN = "shutdown"  # a cancel's reason: Bob is ending (end of input, a signal), not the user's cancel


class Cancel:
    __slots__ = ("_lock", "_event", "_callbacks", "_next", "reason")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._event = threading.Event()
        self._callbacks: dict[int, Callable[[], object]] = {}
        self._next = 0
        self.reason: str | None = None  # why, when not the user's cancel (SHUTDOWN: Bob is ending)

    def set(self, reason: str | None = None) -> None:
        with self._lock:
            if self._event.is_set():
                return
            self.reason = reason
            self._event.set()
            callbacks = list(self._callbacks.values())
            self._callbacks.clear()
        for callback in callbacks:
            try:
                callback()
            except Exception as exc:  # a waiter that cannot be woken must not stop the others
                from bob_acp import log

                log.get("bob").warning(f"a cancel's waiter failed to wake: {exc!r}")

    def is_set(self) -> bool:
        return self._event.is_set()

    def wait(self, timeout: float | None = None) -> bool:
        """Sleep until set or `timeout` seconds; True when set (a backoff that a cancel cuts short)."""
        return self._event.wait(timeout)

    def subscribe(self, callback: Callable[[], object]) -> Callable[[], None]:
        """Run `callback` once when set; returns the function that takes it back."""
        with self._lock:
            if not self._event.is_set():
                key = self._next
                self._next += 1
                self._callbacks[key] = callback
                return lambda: self._unsubscribe(key)
        callback()
        return _nothing

    def _unsubscribe(self, key: int) -> None:
        with self._lock:
            self._callbacks.pop(key, None)


def _nothing() -> None:
    pass
