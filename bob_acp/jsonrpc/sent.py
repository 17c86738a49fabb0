"""One of our requests to the peer, in flight: a Future of its result (concurrent.futures,
loaded with Bob's first request of the client, not before its first answer)."""

from __future__ import annotations

from concurrent.futures import CancelledError, Future, InvalidStateError
from concurrent.futures import TimeoutError as FutureTimeout

from bob_acp.jsonrpc.errors import PeerError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


class Sent(Future):  # type: ignore[type-arg]  # (a base class is read at run time: typing stays unloaded)
    """One of our requests in flight: a Future of the peer's result. It fails with PeerError for
    an error answer, and is cancelled (Future.cancel, from any thread) when we stop waiting for
    it or when the connection ends. `id`: what a cancellation notification names."""

    def __init__(self, request_id: int):
        super().__init__()
        self.id = request_id
        self.timed_out = False  # given up because no answer came within the time allowed
        self.unsent = False  # it could not be written: the peer's input is closed (it ended, or is ending)

    def settled(self, timeout: float | None = None) -> Sent:
        """Itself, once settled; after `timeout` seconds without an answer, cancelled (we stop
        waiting) and marked `timed_out`. (concurrent.futures.wait() would miss a cancel: outside
        an executor a cancelled Future never reaches the state it waits for.)"""
        try:
            self.exception(timeout)
        except CancelledError:
            pass
        except FutureTimeout:
            self.timed_out = self.cancel()
        return self



def settle(sent: Future[Any], result: object = None, error: object = None) -> None:
    """Settle a request unless it already is (a cancel from another thread may come first)."""
    try:
        if error is None:
            sent.set_result(result)
        else:
            sent.set_exception(PeerError(error))
    except InvalidStateError:
        pass
