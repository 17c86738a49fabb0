"""The JSON-RPC endpoint: reader thread, bounded inbound queue, dispatcher thread, worker threads,
and Bob's own outbound requests. Domain-free: routes come in as a method table.

Threads and how each stops:
- reader: reads frames until EOF (or stop()); then resolves pending outbound requests as closed,
  calls on_close, and puts the STOP sentinel behind the frames still queued;
- dispatcher: routes frames until it takes STOP off the queue; short handlers run inline,
  `worker=True` routes each run on a thread of their own so the dispatcher stays free;
- workers: end with their handler; serve() waits for them (bounded) before it returns;
- writer (streams.Writer): stopped by serve() once everything owed has been queued.
"""

from __future__ import annotations

import itertools
import queue
import threading
import traceback
from typing import Any, BinaryIO, Callable

import orjson

from bob_acp.jsonrpc.errors import RpcError
from bob_acp.jsonrpc.streams import MAX_FRAME, Oversized, Writer, read_frames

MAX_PENDING_FRAMES = 256
MAX_PENDING_BYTES = 16 * 1024 * 1024
MAX_WORKERS = 256
_STOP = object()
_NO_ID = object()


class Route:
    """A method's handler. `worker`: run it on a worker thread (long handlers: prompts, loads).
    `prepare(params)`: run first on the dispatcher thread, in frame order, its result passed to
    the handler as a second argument (e.g. registering a turn before a later cancel is routed)."""

    __slots__ = ("handler", "worker", "prepare")

    def __init__(self, handler: Callable[..., Any], worker: bool = False,
                 prepare: Callable[[dict], Any] | None = None):
        self.handler = handler
        self.worker = worker
        self.prepare = prepare


class Reply:
    """A handler result with work to run once the response has been queued for writing
    (e.g. a notification that must follow the response)."""

    __slots__ = ("result", "after")

    def __init__(self, result: Any, after: Callable[[], None] | None = None):
        self.result = result
        self.after = after


class Outcome:
    """What came back for one of Bob's own requests."""

    __slots__ = ("result", "error", "closed")

    def __init__(self, result: Any = None, error: Any = None, closed: bool = False):
        self.result = result
        self.error = error  # the error object, or a string saying why there is no valid answer
        self.closed = closed  # no answer: cancelled by us, or the connection ended

    @property
    def ok(self) -> bool:
        return self.error is None and not self.closed


class _Pending:
    __slots__ = ("event", "outcome")

    def __init__(self) -> None:
        self.event = threading.Event()
        self.outcome: Outcome | None = None


class Endpoint:
    def __init__(
        self,
        writer: Writer,
        routes: dict[str, Route],
        notifications: dict[str, Callable[[dict], None]],
        log: Any,
        on_close: Callable[[], None] | None = None,
        urgent: frozenset[str] = frozenset(),
        max_frame: int = MAX_FRAME,
    ):
        self._writer = writer
        self._routes = routes
        self._notifications = notifications
        self._log = log
        self._on_close = on_close
        self._urgent = urgent  # notifications never refused by the inbound bound (e.g. cancel)
        self._max_frame = max_frame
        # SimpleQueue (C) hands a frame to the dispatcher faster than a Condition; the bound is
        # kept beside it, under its own lock.
        self._inbox: queue.SimpleQueue = queue.SimpleQueue()
        self._inbox_frames = 0
        self._inbox_bytes = 0
        self._inbox_lock = threading.Lock()
        self._pending: dict[int, _Pending] = {}
        self._pending_lock = threading.Lock()
        self._ids = itertools.count(0)
        self._workers: set[threading.Thread] = set()
        self._workers_lock = threading.Lock()
        self._closed = threading.Event()

    # ---- outbound -------------------------------------------------------------------------

    def notify(self, method: str, params: Any) -> None:
        self._send({"jsonrpc": "2.0", "method": method, "params": params})

    def request(self, method: str, params: Any, cancel: threading.Event | None = None) -> Outcome:
        """Send a request and block until its answer, `cancel` being set, or the connection closing.
        Safe from any thread but the reader's."""
        if self._closed.is_set():
            return Outcome(closed=True)
        request_id = next(self._ids)
        slot = _Pending()
        with self._pending_lock:
            self._pending[request_id] = slot
        self._send({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
        while not slot.event.wait(0.02):
            if (cancel is not None and cancel.is_set()) or self._closed.is_set():
                break
        with self._pending_lock:
            self._pending.pop(request_id, None)
        return slot.outcome or Outcome(closed=True)

    def _send(self, frame: dict) -> None:
        try:
            data = orjson.dumps(frame)
        except TypeError:
            self._log.error("unencodable frame dropped", detail=traceback.format_exc())
            if "id" in frame and "method" not in frame:
                data = orjson.dumps(_error_frame(frame["id"], RpcError.internal_error("unencodable result")))
            else:
                return
        self._writer.send(data)

    def _respond(self, msg_id: Any, result: Any) -> None:
        self._send({"jsonrpc": "2.0", "id": msg_id, "result": result})

    def _respond_error(self, msg_id: Any, error: RpcError) -> None:
        self._send(_error_frame(msg_id, error))

    # ---- serving --------------------------------------------------------------------------

    def serve(self, stream: BinaryIO, drain_timeout: float = 0.8) -> None:
        """Serve until the input ends or stop() is called; returns once the dispatcher and the
        workers are done (waiting at most drain_timeout for workers still running)."""
        reader = threading.Thread(target=self._read_loop, args=(stream,), name="bob-reader", daemon=True)
        dispatcher = threading.Thread(target=self._dispatch_loop, name="bob-dispatcher", daemon=True)
        reader.start()
        dispatcher.start()
        self._closed.wait()
        dispatcher.join(drain_timeout)
        with self._workers_lock:
            workers = list(self._workers)
        for worker in workers:
            worker.join(drain_timeout)

    def stop(self) -> None:
        """End serving as at EOF (from a signal handler's thread, for instance)."""
        self._close()

    @property
    def closed(self) -> bool:
        return self._closed.is_set()

    def _close(self) -> None:
        if self._closed.is_set():
            return
        self._closed.set()
        with self._pending_lock:
            pending = list(self._pending.values())
        for slot in pending:
            slot.outcome = Outcome(closed=True)
            slot.event.set()
        if self._on_close is not None:
            try:
                self._on_close()
            except Exception:
                self._log.error("on_close failed", detail=traceback.format_exc())
        # Frames already queued are still answered (what is owed); on_close has told the
        # handlers to refuse new long work, so this stays quick.
        self._inbox.put((_STOP, 0))

    # ---- reader ---------------------------------------------------------------------------

    def _read_loop(self, stream: BinaryIO) -> None:
        try:
            for frame in read_frames(stream, self._max_frame):
                if self._closed.is_set():
                    break
                self._take(frame)
        except Exception:
            self._log.error("input stream failed", detail=traceback.format_exc())
        finally:
            self._close()

    def _take(self, frame: bytes | Oversized) -> None:
        if isinstance(frame, Oversized):
            self._log.warning(f"frame of {frame.size} bytes refused (cap {self._max_frame})")
            return self._respond_error(None, RpcError.invalid_request(f"frame exceeds {self._max_frame} bytes"))
        if not frame or frame.isspace():
            return
        try:
            msg = orjson.loads(frame)
        except (orjson.JSONDecodeError, RecursionError) as exc:
            return self._respond_error(None, RpcError.parse_error(str(exc).split(":")[0]))
        problem = _envelope_problem(msg)
        if problem:
            return self._respond_error(None, RpcError.invalid_request(problem))
        if "method" in msg:
            return self._enqueue(msg, len(frame))
        self._settle(msg)

    def _settle(self, msg: dict) -> None:
        """A response to one of our requests; anything not well-formed settles it as an error."""
        msg_id = msg.get("id")
        with self._pending_lock:
            slot = self._pending.pop(msg_id, None) if type(msg_id) is int else None
        if slot is None:
            self._log.info(f"response to unknown request id {msg_id!r} ignored")
            return
        if msg.get("jsonrpc") != "2.0":
            outcome = Outcome(error="answer without jsonrpc 2.0")
        elif "error" in msg:
            outcome = Outcome(error=msg["error"] if msg["error"] is not None else "null error")
        elif "result" in msg:
            outcome = Outcome(result=msg["result"])
        else:
            outcome = Outcome(error="answer with neither result nor error")
        slot.outcome = outcome
        slot.event.set()

    def _enqueue(self, msg: dict, size: int) -> None:
        with self._inbox_lock:
            full = self._inbox_frames >= MAX_PENDING_FRAMES or self._inbox_bytes + size > MAX_PENDING_BYTES
            if not full or msg["method"] in self._urgent:
                self._inbox_frames += 1
                self._inbox_bytes += size
        if full and msg["method"] not in self._urgent:
            if "id" in msg:
                self._respond_error(msg["id"], RpcError.server_busy())
            else:
                self._log.warning(f"notification {msg['method']} dropped: server busy")
            return
        self._inbox.put((msg, size))

    # ---- dispatcher -----------------------------------------------------------------------

    def _dispatch_loop(self) -> None:
        while True:
            msg, size = self._inbox.get()
            if msg is _STOP:
                return
            with self._inbox_lock:
                self._inbox_frames -= 1
                self._inbox_bytes -= size
            self._dispatch(msg)

    def _dispatch(self, msg: dict) -> None:
        method = msg["method"]
        msg_id = msg.get("id", _NO_ID)
        if msg_id is _NO_ID:
            handler = self._notifications.get(method)
            if handler is None:
                self._log.debug(f"unknown notification {method} ignored")
                return
            params = msg.get("params")
            try:
                handler(params if isinstance(params, dict) else {})
            except Exception:
                self._log.error(f"notification {method} failed", detail=traceback.format_exc())
            return
        route = self._routes.get(method)
        if route is None:
            return self._respond_error(msg_id, RpcError.method_not_found(method))
        params = msg.get("params", {})
        if not isinstance(params, dict):
            return self._respond_error(msg_id, RpcError.invalid_params("params must be an object"))
        if not route.worker:
            return self._call(route, method, msg_id, (params,))
        with self._workers_lock:
            if len(self._workers) >= MAX_WORKERS:
                return self._respond_error(msg_id, RpcError.server_busy())
        args: tuple = (params,)
        if route.prepare is not None:
            try:
                args = (params, route.prepare(params))
            except RpcError as exc:
                return self._respond_error(msg_id, exc)
            except Exception:
                self._log.error(f"{method} failed", detail=traceback.format_exc())
                return self._respond_error(msg_id, RpcError.internal_error())
        with self._workers_lock:
            worker = threading.Thread(
                target=self._run_worker, args=(route, method, msg_id, args), name=f"bob-{method}", daemon=True
            )
            self._workers.add(worker)
        worker.start()

    def _run_worker(self, route: Route, method: str, msg_id: Any, args: tuple) -> None:
        try:
            self._call(route, method, msg_id, args)
        finally:
            with self._workers_lock:
                self._workers.discard(threading.current_thread())

    def _call(self, route: Route, method: str, msg_id: Any, args: tuple) -> None:
        try:
            result = route.handler(*args)
        except RpcError as exc:
            return self._respond_error(msg_id, exc)
        except Exception:
            self._log.error(f"{method} failed", detail=traceback.format_exc())
            return self._respond_error(msg_id, RpcError.internal_error())
        after = None
        if isinstance(result, Reply):
            result, after = result.result, result.after
        self._respond(msg_id, result)
        if after is not None:
            try:
                after()
            except Exception:
                self._log.error(f"{method}: follow-up failed", detail=traceback.format_exc())


def _error_frame(msg_id: Any, error: RpcError) -> dict:
    return {"jsonrpc": "2.0", "id": msg_id, "error": error.to_dict()}


def _envelope_problem(msg: Any) -> str | None:
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
    if "method" in msg:
        if msg.get("jsonrpc") != "2.0":
            return 'jsonrpc must be "2.0"'
        if not isinstance(msg["method"], str):
            return "method must be a string"
        return None
    if "result" in msg or "error" in msg:
        return None  # a response; its own checks happen when it is settled
    return "neither a request, a notification nor a response"
