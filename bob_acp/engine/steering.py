"""What the user adds to a turn while it runs (`_session/steering`): held until the turn's next
model call, which reads it as the user's message. A turn opens its inbox when it starts and
closes it when it ends; what is offered to a closed inbox (no turn runs, or the running one was
cancelled) is refused, and the client sends it as a prompt of its own instead. The inbox is
bounded (MAX_WAITING messages, MAX_WAITING_BYTES of text): past it, SteeringFull."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from bob_acp.cancel import Cancel

MAX_WAITING = 32  # steers waiting for the next model call, at most
MAX_WAITING_BYTES = 1024 * 1024  # and their text together (a model request stays a model request)


class SteeringFull(Exception):
    """The running turn's inbox holds as much as it may; str(self) says so."""


class Steering:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._cancel: Cancel | None = None  # the running turn's; None: no turn runs
        self._waiting: list[dict[str, Any]] = []

    def open(self, cancel: Cancel) -> None:
        with self._lock:
            self._cancel = cancel
            self._waiting = []

    def offer(self, message: dict[str, Any]) -> bool:
        """Whether `message` joins the running turn (False: none runs, or it was cancelled);
        SteeringFull when the inbox holds as much as it may."""
        from bob_acp.context.history import text_of

        with self._lock:
            if self._cancel is None or self._cancel.is_set():
                return False
            held = sum(len(text_of(m).encode("utf-8", "surrogatepass")) for m in self._waiting)
            size = len(text_of(message).encode("utf-8", "surrogatepass"))
            if len(self._waiting) >= MAX_WAITING or held + size > MAX_WAITING_BYTES:
                raise SteeringFull(f"the running turn already holds {len(self._waiting)} message(s) "
                                   f"({held // 1024} KiB) for its next model call; at most {MAX_WAITING} and "
                                   f"{MAX_WAITING_BYTES // (1024 * 1024)} MiB wait: send more once the model has read them")
            self._waiting.append(message)
            return True

    def take(self) -> list[dict[str, Any]]:
        """What waits for the next model call, in the order it came."""
        with self._lock:
            taken, self._waiting = self._waiting, []
            return taken

    def take_or_close(self) -> list[dict[str, Any]]:
        """At the turn's last reply: what waits (the turn goes on with it), or, when nothing
        does, the inbox closed in the same step, so that nothing offered after it is lost."""
        with self._lock:
            if not self._waiting:
                self._cancel = None
            taken, self._waiting = self._waiting, []
            return taken

    def close(self) -> list[dict[str, Any]]:
        """The turn ends: nothing more joins it; what was offered and not yet read is returned."""
        with self._lock:
            self._cancel = None
            taken, self._waiting = self._waiting, []
            return taken
