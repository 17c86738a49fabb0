"""What travels over a JSON-RPC endpoint, apart from the threads that move it (endpoint.py): a
route to a handler and what a handler gives back (`Route`, `Reply`), our own requests awaited
(`Awaiting`; each one a `sent.Sent`, loaded with the first), and what makes a frame a message
(its envelope, its id)."""

from __future__ import annotations

import itertools
import re
import threading

from bob_acp.jsonrpc import codec
from bob_acp.jsonrpc.errors import RpcError
from bob_acp.jsonrpc.streams import Oversized

TYPE_CHECKING = False
if TYPE_CHECKING:
    from concurrent.futures import Future
    from typing import Any, Callable, ContextManager

    from bob_acp.jsonrpc.sent import Sent


class Route:
    """A method's handler. `worker`: run it on a worker thread (long handlers: prompts, loads).
    `prepare(params)`: run first on the dispatcher thread, in frame order, its result passed to
    the handler as a second argument (e.g. registering a turn before a later cancel is routed).
    `cancel(prepared)`: how a request cancellation (the endpoint's `cancel_method`) stops a
    running request of this method, which then answers as its handler decides. `abandon(prepared)`:
    undoes what prepare did when the request cannot run after all (no thread for it). `check()`:
    what must hold before the handler runs (on its thread); an RpcError it raises is the answer."""

    __slots__ = ("handler", "worker", "prepare", "cancel", "abandon", "check")

    def __init__(self, handler: Callable[..., Any], worker: bool = False,
                 prepare: Callable[[dict[str, Any]], Any] | None = None, cancel: Callable[[Any], None] | None = None,
                 abandon: Callable[[Any], None] | None = None, check: Callable[[], Any] | None = None):
        self.handler = handler
        self.worker = worker
        self.prepare = prepare
        self.cancel = cancel
        self.abandon = abandon
        self.check = check


class Reply:
    """A handler result with more to it than a value.

    - `after`: work to run once the response has been queued (a notification that must follow it);
    - `guard`: a lock held while the response is made and written: when `result` is callable it
      is called under the lock, so a thread that takes the same lock sees the request either
      answered or not (a cancel deciding between "too late" and "cancelled").
    """

    __slots__ = ("result", "after", "guard")

    def __init__(self, result: Any, after: Callable[[], None] | None = None, guard: ContextManager[Any] | None = None):
        self.result = result
        self.after = after
        self.guard = guard


class Awaiting:
    """Our requests the peer has not answered yet, by id: each made here, settled by its answer
    (or by an answer that is no valid one), forgotten once settled however that happened."""

    def __init__(self) -> None:
        self._ids = itertools.count(0)
        self._pending: dict[int, Sent] = {}
        self._lock = threading.Lock()

    def new(self, closed: bool = False) -> Sent:
        """A request with the next id, awaited (cancelled at once when the connection is closed)."""
        from bob_acp.jsonrpc.sent import Sent  # (concurrent.futures: loaded with Bob's first request, not before)

        sent = Sent(next(self._ids))
        if closed:
            sent.cancel()
            return sent
        with self._lock:
            self._pending[sent.id] = sent
        sent.add_done_callback(self._forget)  # (on whichever thread settles it: a dict pop)
        return sent

    def _forget(self, sent: Future[Any]) -> None:
        with self._lock:
            self._pending.pop(sent.id, None)  # type: ignore[attr-defined]

    def awaits(self, msg_id: object) -> bool:
        slot_id = msg_id if type(msg_id) is int else int_text(msg_id)
        with self._lock:
            return slot_id in self._pending

    def answer(self, msg: dict[str, Any]) -> bool:
        """A response to one of our requests settles it; anything not well-formed settles it as
        an error. False when no request of ours has its id."""
        msg_id = msg.get("id")
        slot_id = msg_id if type(msg_id) is int else int_text(msg_id)
        with self._lock:
            sent = self._pending.pop(slot_id, None) if slot_id is not None else None
        if sent is None:
            return False
        from bob_acp.jsonrpc.sent import settle  # (loaded already: a request of ours was made)

        if type(msg_id) is not int:
            settle(sent, error=f"answer with the id {msg_id!r}, not the number sent")
        elif msg.get("jsonrpc") != "2.0":
            settle(sent, error="answer without jsonrpc 2.0")
        elif "error" in msg:
            settle(sent, error=msg["error"] if msg["error"] is not None else "null error")
        elif "result" in msg:
            settle(sent, msg["result"])
        else:
            settle(sent, error="answer with neither result nor error")
        return True

    def answered_by(self, frame: Oversized) -> Sent | None:
        """The request of ours an oversized line answers, when one of its ends names the id of
        one (a response: an "id" and a "result" or "error", no "method")."""
        ends = frame.head + b"\0" + frame.tail
        if b'"method"' in ends or not (b'"result"' in ends or b'"error"' in ends):
            return None
        with self._lock:
            for match in re.finditer(rb'"id"\s*:\s*(\d{1,18})\s*[,}]', ends):
                sent = self._pending.pop(int(match.group(1)), None)
                if sent is not None:
                    return sent
        return None

    def cancel_all(self) -> None:
        """The connection has ended: no answer will come."""
        with self._lock:
            pending = list(self._pending.values())
        for sent in pending:
            sent.cancel()


def answer_of(sent: Future[Any]) -> object:
    """The result of a settled request; None when it has none (an error, or no answer)."""
    if sent.cancelled() or sent.exception() is not None:
        return None
    return sent.result()


def oversized_id(frame: Oversized) -> object:
    """The id of an oversized request, read from the start of its line (before its params) or
    else from its end (after them); None when neither shows one."""
    if b'"method"' not in frame.head + frame.tail:
        return None
    pattern = re.compile(rb'"id"\s*:\s*(-?\d{1,18}(?=\s*[,}])|"(?:[^"\\]|\\.){0,256}")')
    before_params = pattern.findall(frame.head.split(b'"params"')[0])
    found = before_params[0] if before_params else (pattern.findall(frame.tail) or [None])[-1]
    if found is None:
        return None
    try:
        return codec.loads(found)
    except codec.JSONDecodeError:
        return None


def error_frame(msg_id: object, error: RpcError) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": msg_id, "error": error.to_dict()}


def id_key(msg_id: object) -> tuple[Any, ...]:
    """A request id as a key: 5 and "5" are two ids."""
    return (type(msg_id).__name__, msg_id)


def int_text(value: object) -> int | None:
    """The number a string id spells ("7"): a client that answered with the wrong id type."""
    if isinstance(value, str) and value.isascii() and value.isdigit() and len(value) < 19:
        return int(value)
    return None


def envelope_problem(msg: object) -> str | None:
    """Why a decoded frame is not a JSON-RPC 2.0 message, or None."""
    if isinstance(msg, list):
        return "batches are not supported"
    if not isinstance(msg, dict):
        return "a frame must be a JSON object"
    if "id" in msg:
        msg_id = msg["id"]
        # ACP's RequestId is null, a string or an int64 (orjson reads larger numbers as floats):
        # a fractional id could not be echoed in a valid frame.
        if isinstance(msg_id, bool) or not isinstance(msg_id, (str, int, type(None))):
            return "id must be a string, an integer or null"
        if isinstance(msg_id, int) and not -(2 ** 63) <= msg_id < 2 ** 63:
            return "id must be a string, an integer or null"
    if "method" in msg:
        if msg.get("jsonrpc") != "2.0":
            return 'jsonrpc must be "2.0"'
        if not isinstance(msg["method"], str):
            return "method must be a string"
        return None
    if "result" in msg or "error" in msg:
        return None  # a response; its own checks happen when it is settled
    return "neither a request, a notification nor a response"
