"""The JSON-RPC endpoint: reader thread, bounded inbound queue, dispatcher thread, worker threads,
and requests of our own to the peer. Domain-free: routes come in as a method table.

Two ways to reach the peer: a byte stream (serve(stream) reads lines; a streams.Writer writes
them), or messages (as python-lsp-jsonrpc's `Endpoint(dispatcher, consumer)`): start(), then
consume(message) for each message the peer sent, end() when it sends no more; every message of
ours goes to the `consumer` callable, already a dict (a transport that speaks HTTP encodes it
once, where it sends it). The feeding thread(s) then play the reader's part below.

Which thread runs what
- reader (`_read_loop`, or whoever calls consume()): reads and decodes frames; settles the answers to our requests (their
  Futures' done-callbacks run here); runs the route's `cancel` for the cancellation
  notification (`cancel_method`) and the handlers of `in_order` notifications, so that their
  effect is seen by whoever waits on an answer the peer sent after them. It hands the other
  frames to the dispatcher in runs; when the inbound queue is full it waits for room
  (backpressure: the peer's writes block), except for `urgent` notifications, which never wait.
- dispatcher (`_dispatch_loop`): routes each frame in order; runs notification handlers, short
  routes, and every route's `prepare`, inline; starts a worker thread for each `worker=True` route.
- workers: one per `worker=True` request, running its handler and writing its answer.
- any thread: `request()`, `notify()`, and `Sent.cancel()` (we stop waiting for an answer).
- the writer (streams.Writer) owns the output; serve()'s caller stops it once everything owed
  has been queued.

What callbacks may not do
- A route's `cancel`, an `in_order` handler and a Sent's done-callback run on the reader (a
  done-callback on whichever thread settles its Future: the reader for an answer): they must
  return at once. They may set events, cancel Futures and send notifications; they may
  never wait for an answer from the peer (only the reader could read it) nor for a lock a
  handler holds while it waits for one.
- `prepare` and short routes run on the dispatcher: they may not wait for the peer either (the
  frames behind them, cancellations included, would wait too).

Locks
The endpoint's own locks (the inbox's, with its Condition for the reader's room, `Awaiting`'s lock,
`_workers_lock`, `_cancel_lock`) are never nested and never held while a handler, a callback
or a write runs. The one order there is: a `Reply.guard` (the handler's lock) is taken before
the writer's lock, which is always the innermost.

How each stops: at EOF (or stop()) the reader cancels the requests still awaited, calls
on_close, and puts a STOP sentinel behind the frames queued, which are still answered; serve()
waits for the dispatcher, then (bounded) for the workers.
"""

from __future__ import annotations

import threading

from bob_acp.jsonrpc import codec
from bob_acp.jsonrpc.errors import PeerError, RpcError
from bob_acp.jsonrpc.inbox import HANDOFF_BYTES, HANDOFF_FRAMES, STOP, Inbox
from bob_acp.jsonrpc.messages import (
    Awaiting,
    Reply,
    Route,
    answer_of,
    envelope_problem,
    error_frame,
    id_key,
    oversized_id,
)
from bob_acp.jsonrpc.streams import FLUSH, MAX_FRAME, Oversized, Writer, read_frames

__all__ = ["Endpoint", "PeerError", "Reply", "Route", "Sent", "answer_of"]  # (the messages, re-exported)


def __getattr__(name: str) -> object:
    """`Sent`, loaded when first asked for (it loads concurrent.futures, and logging with it)."""
    if name == "Sent":
        from bob_acp.jsonrpc.sent import Sent

        return Sent
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import IO, Any, Callable

    from bob_acp.jsonrpc.sent import Sent

HELD_FRAMES = 64  # frames the dispatcher writes at most at once
MAX_HELD_FRAMES = 256  # requests held by worker routes (running or waiting, e.g. for the turn lock)
MAX_HELD_BYTES = 16 * 1024 * 1024
MAX_CANCELLED_IDS = 1024  # cancellations kept for requests not seen yet
THREAD_LIMIT = "the machine's limit on threads (ulimit -u) or memory (ulimit -v) is reached"
OUT_OF_MEMORY = "out of memory: the machine's limit on memory (ulimit -v) is reached"
_NO_ID = object()


class Endpoint:
    def _limit(self) -> str:
        return self._limit_words() if self._limit_words is not None else THREAD_LIMIT

    def __init__(
        self,
        writer: Writer | Callable[[dict[str, Any]], None],
        routes: dict[str, Route],
        notifications: dict[str, Callable[[dict[str, Any]], None]],
        log: Any,
        on_close: Callable[[], None] | None = None,
        urgent: frozenset[str] = frozenset(),
        max_frame: int = MAX_FRAME,
        in_order: frozenset[str] = frozenset(),
        cancel_method: str | None = None,
        on_read: Callable[[], None] | None = None,
        limit_words: Callable[[], str] | None = None,
    ):
        # The output: a Writer of lines, or a consumer of messages (which is never held back).
        self._writer = writer if isinstance(writer, Writer) else None
        self._consumer = None if isinstance(writer, Writer) else writer
        self._feed_lock = threading.Lock()  # (consume() may be called from more than one thread)
        self._limit_words = limit_words  # which of the machine's limits a refused thread met, in words
        self._routes = routes
        self._notifications = notifications
        self._log = log
        self._on_close = on_close
        self._urgent = urgent  # notifications that never wait for room (e.g. cancel)
        self._in_order = in_order  # notifications handled on the reader, before later answers settle
        self._max_frame = max_frame
        self._on_read = on_read  # called on the reader after each read of input, before its frames go on
        self._run: list[tuple[dict[str, Any], int]] = []  # (the reader's) frames read, not handed on yet
        self._run_bytes = 0
        self._held_frames = 0
        self._held_bytes = 0
        self._awaiting = Awaiting()
        self._workers: set[threading.Thread] = set()
        self._workers_lock = threading.Lock()
        self._closed = threading.Event()
        self._inbox = Inbox(self._closed)  # (what was read and waits for the dispatcher, bounded)
        self._dispatcher_done = threading.Event()
        # What the dispatcher sends while it answers a run of short requests is written in one
        # write at the run's end (a flood of cheap requests: 1.3x the answers a second). It is
        # written before the dispatcher starts a worker, sends a request or answers with a Reply,
        # so that nothing it sends waits behind what another thread writes.
        self._dispatcher_id: int | None = None
        self._held: list[bytes] = []
        # Request cancellation (e.g. ACP's `$/cancel_request`), when `cancel_method` names it: a
        # request cancelled before it is dispatched is answered -32800 (or, when its route can
        # cancel, dispatched and cancelled at once); a running one is stopped by its route.
        self._cancel_method = cancel_method
        self._cancel_lock = threading.Lock()
        self._cancelled_ids: set[Any] = set()
        self._running: dict[tuple[Any, ...], Any] = {}  # id key -> prepared value of a running cancellable request (None: preparing)
        self._running_routes: dict[tuple[Any, ...], Any] = {}

    # ---- outbound -------------------------------------------------------------------------

    def notify(self, method: str, params: object, give_up: Callable[[], bool] | None = None) -> bool:
        """Send a notification; waits while the client is not reading, until `give_up()` is true
        (re-checked on wake_senders())."""
        return self._send({"jsonrpc": "2.0", "method": method, "params": params}, give_up)

    def request(self, method: str, params: object, give_up: Callable[[], bool] | None = None) -> Sent:
        """Send a request: the Future of its result. A request that cannot be sent is settled at
        once (cancelled when the connection has closed, PeerError for a value JSON cannot hold)."""
        sent = self._awaiting.new(closed=self._closed.is_set())
        if sent.done():
            return sent
        if not self._send({"jsonrpc": "2.0", "id": sent.id, "method": method, "params": params}, give_up):
            sent.unsent = True
            from bob_acp.jsonrpc.sent import settle

            settle(sent, error="the request could not be sent")
        return sent

    @property
    def closed(self) -> bool:
        """True once serving has ended (the input closed, or stop())."""
        return self._closed.is_set()

    def wake_senders(self) -> None:
        """Have senders waiting for room in the output check their give_up again."""
        if self._writer is not None:
            self._writer.wake()

    def _send(self, frame: dict[str, Any], give_up: Callable[[], bool] | None = None, hold: bool = True) -> bool:
        if self._consumer is not None:
            return self._consume_out(frame)
        assert self._writer is not None
        try:
            data = codec.dumps(frame)
        except TypeError:
            self._log.error("unencodable frame not sent", detail=_traceback())
            if "id" not in frame or "method" in frame:
                return False
            data = codec.dumps(error_frame(frame["id"], RpcError.internal_error("unencodable result")))
        if len(data) > self._max_frame and "id" in frame and "method" not in frame:
            self._log.error(f"response of {len(data)} bytes exceeds the frame cap; an error is sent instead")
            data = codec.dumps(error_frame(frame["id"], RpcError.internal_error("result too large")))
        if hold and self._dispatcher_id == threading.get_ident():  # (a Writer's: see above)
            self._held.append(data)
            if len(self._held) >= HELD_FRAMES or ("method" in frame and "id" in frame):
                self._write_held()  # (a request of ours: its answer will be waited for)
            return True
        return self._writer.send(data, give_up)

    def _consume_out(self, frame: dict[str, Any]) -> bool:
        """A message of ours to the consumer; one it cannot take is not sent (an answer it
        refused is said in the log: the peer then waits on its own timeout, as for a lost line)."""
        assert self._consumer is not None
        try:
            self._consumer(frame)
        except Exception:
            self._log.error("the consumer refused a message", detail=_traceback())
            return False
        return True

    def _write_held(self) -> None:
        """(On the dispatcher: no other thread touches what it holds.)"""
        if self._held and self._dispatcher_id == threading.get_ident():
            assert self._writer is not None  # (only a Writer's frames are held)
            held, self._held = self._held, []
            self._writer.send(b"\n".join(held))

    def _respond(self, msg_id: object, result: Any, give_up: Callable[[], bool] | None = None,
                 hold: bool = True) -> None:
        self._send({"jsonrpc": "2.0", "id": msg_id, "result": result}, give_up, hold)

    def _respond_error(self, msg_id: object, error: RpcError) -> None:
        self._send(error_frame(msg_id, error))

    # ---- serving --------------------------------------------------------------------------

    def serve(self, stream: IO[bytes], drain_timeout: float = 0.8,
              wait: Callable[[threading.Event], None] | None = None) -> None:
        """Serve until the input ends or stop() is called; returns once the dispatcher and the
        workers are done (waiting at most drain_timeout for workers still running). `wait(closed)`
        is how the calling thread waits for `closed` to be set (the default: Event.wait)."""
        reader = threading.Thread(target=self._read_loop, args=(stream,), name="bob-reader", daemon=True)
        dispatcher = threading.Thread(target=self._dispatch_loop, name="bob-dispatcher", daemon=True)
        try:
            dispatcher.start()
        except RuntimeError as exc:
            return self._serve_refusing(stream, str(exc))
        try:
            reader.start()
        except RuntimeError:  # (the calling thread reads instead; it then sees the end at the next read)
            self._read_loop(stream)
        if wait is None:
            self._closed.wait()
        else:
            wait(self._closed)
        self._dispatcher_done.wait(drain_timeout)
        with self._workers_lock:
            workers = list(self._workers)
        for worker in workers:
            worker.join(drain_timeout)

    def stop(self) -> None:
        """End serving as at EOF (from a signal handler's thread, for instance)."""
        self._close()

    # ---- serving by messages ----------------------------------------------------------------

    def start(self) -> None:
        """Serve by messages: the dispatcher starts; the caller feeds consume() and calls end().
        ThreadLimit-like RuntimeError when the machine gives no thread."""
        threading.Thread(target=self._dispatch_loop, name="bob-dispatcher", daemon=True).start()

    def consume(self, message: object, size: int = 1) -> None:
        """A message the peer sent (decoded already; `size`: its length in bytes, for the bounds
        on what waits). Waits while the dispatcher is `MAX_PENDING_*` behind, as a reader does."""
        with self._feed_lock:
            if self._closed.is_set():
                return
            self._take_message(message, max(size, 1))
            self._hand_on()

    def end(self) -> None:
        """The peer sends no more: what was consumed is still answered, our requests still
        awaited are cancelled (as at the end of a byte stream)."""
        with self._feed_lock:
            self._hand_on()
        self._close()

    def _serve_refusing(self, stream: IO[bytes], why: str) -> None:
        """No thread to route with (the machine's limit): every request is still answered, on
        the calling thread, with an error that names the limit; until the input ends."""
        self._log.error(f"cannot start the dispatcher ({why}): every request is answered with an error")
        error = RpcError.internal_error(f"this agent cannot start its threads: {self._limit()}")
        for frame in read_frames(stream, self._max_frame):
            if self._closed.is_set():
                break
            if isinstance(frame, Oversized):
                self._respond_error(oversized_id(frame), error)
                continue
            if not isinstance(frame, bytes):
                continue
            try:
                msg = codec.loads(frame) if frame.strip() else None
            except (codec.JSONDecodeError, RecursionError):
                self._respond_error(None, RpcError.parse_error())
                continue
            if isinstance(msg, dict) and "method" in msg and "id" in msg:
                self._respond_error(msg["id"] if envelope_problem(msg) is None else None, error)
            elif isinstance(msg, dict) and "method" not in msg and self._awaiting.awaits(msg.get("id")):
                self._answer(msg)
        self._close()

    def _close(self) -> None:
        if not self._inbox.close():
            return
        self._awaiting.cancel_all()
        if self._on_close is not None:
            try:
                self._on_close()
            except Exception:
                self._log.error("on_close failed", detail=_traceback())
        # Frames already queued are still answered (what is owed); on_close has told the
        # handlers to refuse new long work, so this stays quick.
        self._inbox.stop()  # (behind the runs already handed on)

    # ---- reader ---------------------------------------------------------------------------

    def _read_loop(self, stream: IO[bytes]) -> None:
        """Frames are handed to the dispatcher in runs: all those one read brought (at most
        HANDOFF_FRAMES), so that a client's burst costs a wake-up per run, not per frame."""
        try:
            for frame in read_frames(stream, self._max_frame, marks=True, on_read=self._on_read):
                if self._closed.is_set():
                    break
                if frame is FLUSH:
                    self._hand_on()
                else:
                    self._take(frame)  # type: ignore[arg-type]
        except OSError as exc:  # (a terminal hung up: EIO; a device gone): the end of input, in a line
            self._log.info(f"input closed: {exc.strerror or exc}")
        except Exception:
            self._log.error("input stream failed", detail=_traceback())
        finally:
            try:
                self._hand_on()  # what was read is answered (as each frame was before the end)
            finally:
                self._close()

    def _take(self, frame: bytes | Oversized) -> None:
        if isinstance(frame, Oversized):
            self._log.warning(f"frame of {frame.size} bytes refused (cap {self._max_frame})")
            sent = self._awaiting.answered_by(frame)
            if sent is not None:  # an answer to one of ours: that request fails now, not at its timeout
                from bob_acp.jsonrpc.sent import settle

                return settle(sent, error=f"the answer of {frame.size} bytes exceeds the frame cap "
                                           f"of {self._max_frame} bytes")
            # A request is answered under its own id, read from either end of the line (a client
            # waits on that id: an error with a null id would leave its request open for ever).
            return self._respond_error(oversized_id(frame), RpcError.invalid_request(
                f"the frame of {frame.size} bytes exceeds the limit of {self._max_frame} bytes for one frame"))
        if not frame or frame.isspace():
            return
        try:
            msg = codec.loads(frame)
        except (codec.JSONDecodeError, RecursionError) as exc:
            return self._respond_error(None, RpcError.parse_error(str(exc).split(":")[0]))
        self._take_message(msg, len(frame))

    def _take_message(self, msg: Any, size: int) -> None:
        if type(msg) is dict and type(msg.get("method")) is str and msg.get("jsonrpc") == "2.0":
            msg_id = msg.get("id", _NO_ID)
            if type(msg_id) is str or (type(msg_id) is int and -(2 ** 63) <= msg_id < 2 ** 63):
                return self._enqueue(msg, size)  # a well-formed request: the common case
        problem = envelope_problem(msg)
        if not problem and "id" in msg and "method" in msg:
            return self._enqueue(msg, size)
        self._hand_on()  # what came before is queued before this takes effect
        if problem and isinstance(msg, dict) and "method" not in msg and self._awaiting.awaits(msg.get("id")):
            return self._answer(msg)  # a malformed answer to one of ours: it settles that request
        if problem:
            return self._respond_error(None, RpcError.invalid_request(problem))
        if "method" in msg:
            if "id" not in msg and msg["method"] == self._cancel_method and self._cancel_method:
                return self._cancel_request(msg.get("params"))
            if "id" not in msg and msg["method"] in self._in_order:
                return self._notified(msg)
            return self._enqueue(msg, size)
        self._answer(msg)

    def _cancel_request(self, params: object) -> None:
        """On the reader, in frame order: the request named is cancelled."""
        msg_id = params.get("requestId") if isinstance(params, dict) else None
        if isinstance(msg_id, bool) or not isinstance(msg_id, (int, str)):
            return
        key = id_key(msg_id)
        with self._cancel_lock:
            prepared = self._running.get(key, _NO_ID)
            if prepared is _NO_ID or prepared is None:
                if len(self._cancelled_ids) < MAX_CANCELLED_IDS:  # (ids never seen are not kept for ever)
                    self._cancelled_ids.add(key)
                return
            route = self._running_routes.get(key)
        if route is not None and route.cancel is not None:
            try:
                route.cancel(prepared)
            except Exception:
                self._log.error("request cancellation failed", detail=_traceback())

    def cancel_request(self, sent: Sent) -> None:
        """Tell the peer that we stopped waiting for one of our requests (with `cancel_method`)."""
        if self._cancel_method and not self._closed.is_set():
            self.notify(self._cancel_method, {"requestId": sent.id})

    def _answer(self, msg: dict[str, Any]) -> None:
        if not self._awaiting.answer(msg):
            self._log.info(f"response to unknown request id {msg.get('id')!r} ignored")

    def _enqueue(self, msg: dict[str, Any], size: int) -> None:
        """On the reader: a frame for the dispatcher, gathered into the run being read."""
        if "id" not in msg and msg["method"] in self._urgent:
            self._hand_on()
            self._inbox.hand([(msg, size)], urgent=True)
            return
        self._run.append((msg, size))
        self._run_bytes += size
        if len(self._run) >= HANDOFF_FRAMES or self._run_bytes >= HANDOFF_BYTES:
            self._hand_on()

    def _hand_on(self) -> None:
        """On the reader: the frames gathered so far, to the dispatcher."""
        if self._run:
            run, self._run, self._run_bytes = self._run, [], 0
            self._inbox.hand(run)

    # ---- dispatcher -----------------------------------------------------------------------

    def _dispatch_loop(self) -> None:
        self._dispatcher_id = threading.get_ident()
        try:
            while True:
                run = self._inbox.get()
                if run is STOP:
                    return
                for msg, msg_size in run:
                    self._inbox.taken(msg_size)  # (a frame is pending until it is dispatched)
                    self._dispatch(msg, msg_size)
                if self._inbox.empty():  # (nothing more to answer at once: written before waiting)
                    self._write_held()
        finally:
            self._write_held()
            self._dispatcher_id = None
            self._dispatcher_done.set()

    def _notified(self, msg: dict[str, Any]) -> None:
        method = msg["method"]
        handler = self._notifications.get(method)
        if handler is None:
            self._log.debug(f"unknown notification {method} ignored")
            return
        params = msg.get("params")
        try:
            handler(params if isinstance(params, dict) else {})
        except Exception:
            self._log.error(f"notification {method} failed", detail=_traceback())

    def _dispatch(self, msg: dict[str, Any], size: int) -> None:
        method = msg["method"]
        msg_id = msg.get("id", _NO_ID)
        if msg_id is _NO_ID:
            return self._notified(msg)
        route = self._routes.get(method)
        if route is None:
            return self._respond_error(msg_id, RpcError.method_not_found(method))
        params = msg.get("params", {})
        if not isinstance(params, dict):
            return self._respond_error(msg_id, RpcError.invalid_params("params must be an object"))
        key = id_key(msg_id) if self._cancel_method else None
        key_cancelled = False
        if key is not None:
            with self._cancel_lock:
                cancelled = key in self._cancelled_ids
                self._cancelled_ids.discard(key)
                if not cancelled and route.cancel is not None and route.worker:
                    self._running[key] = None  # being prepared: a cancel now is kept for below
                    self._running_routes[key] = route
            if cancelled and route.cancel is None:
                return self._respond_error(msg_id, RpcError.request_cancelled())
            key_cancelled = cancelled  # (its route stops it: prepared, cancelled at once, answered as it says)
        if not route.worker:
            return self._call(route, method, msg_id, (params,))
        with self._workers_lock:
            busy = self._held_frames >= MAX_HELD_FRAMES or self._held_bytes + size > MAX_HELD_BYTES
        if busy:
            self._forget_running(key)
            self._log.warning(f"{method} refused: {self._held_frames} requests already held (server busy)")
            return self._respond_error(msg_id, RpcError.server_busy())
        args: tuple[Any, ...] = (params,)
        if route.prepare is not None:
            try:
                args = (params, route.prepare(params))
            except RpcError as exc:
                self._forget_running(key)
                return self._respond_error(msg_id, exc)
            except Exception:
                self._forget_running(key)
                self._log.error(f"{method} failed", detail=_traceback())
                return self._respond_error(msg_id, RpcError.internal_error())
        if key is not None and route.cancel is not None and len(args) > 1:
            with self._cancel_lock:
                late = key in self._cancelled_ids  # cancelled while it was being prepared
                self._cancelled_ids.discard(key)
                if key in self._running:
                    self._running[key] = args[1]
            if late or key_cancelled:
                route.cancel(args[1])
        with self._workers_lock:
            worker = threading.Thread(
                target=self._run_worker, args=(route, method, msg_id, args, size), name=f"bob-{method} #{str(msg_id)[:40]}", daemon=True
            )
            self._workers.add(worker)
            self._held_frames += 1
            self._held_bytes += size
        try:
            self._write_held()  # (its frames come after what was answered before it)
            worker.start()
        except RuntimeError as exc:  # the machine's thread limit: this request is answered, in words
            with self._workers_lock:
                self._workers.discard(worker)
                self._held_frames -= 1
                self._held_bytes -= size
            self._forget_running(key)
            if route.abandon is not None and len(args) > 1:
                route.abandon(args[1])
            self._log.warning(f"{method} refused: cannot start a thread ({exc})")
            self._respond_error(msg_id, RpcError.internal_error(f"cannot start a thread for {method}: {self._limit()}"))

    def _forget_running(self, key: tuple[Any, ...] | None) -> None:
        if key is not None:
            with self._cancel_lock:
                self._running.pop(key, None)
                self._running_routes.pop(key, None)

    def _run_worker(self, route: Route, method: str, msg_id: object, args: tuple[Any, ...], size: int) -> None:
        try:
            # Its answer never waits for room in the output: the requests held are bounded, and
            # a worker blocked on a guard's lock would hold up a cancel on the dispatcher.
            self._call(route, method, msg_id, args, _always)
        finally:
            if self._cancel_method:
                self._forget_running(id_key(msg_id))
            with self._workers_lock:
                self._workers.discard(threading.current_thread())
                self._held_frames -= 1
                self._held_bytes -= size

    def _call(self, route: Route, method: str, msg_id: object, args: tuple[Any, ...],
              give_up: Callable[[], bool] | None = None) -> None:
        try:
            if route.check is not None:
                route.check()
            result = route.handler(*args)
        except RpcError as exc:
            return self._respond_error(msg_id, exc)
        except MemoryError:
            self._log.error(f"{method} failed: {OUT_OF_MEMORY}")
            return self._respond_error(msg_id, RpcError.internal_error(OUT_OF_MEMORY))
        except Exception:
            self._log.error(f"{method} failed", detail=_traceback())
            return self._respond_error(msg_id, RpcError.internal_error())
        if not isinstance(result, Reply):
            return self._respond(msg_id, result, give_up)
        # Written at once, after what is held (a guard's answer is written under its lock; what
        # follows the answer, after it).
        self._write_held()
        try:
            if result.guard is None:
                self._respond(msg_id, result.result, give_up, hold=False)
            else:
                with result.guard:
                    value = result.result() if callable(result.result) else result.result
                    self._respond(msg_id, value, give_up, hold=False)
        except RpcError as exc:
            self._respond_error(msg_id, exc)
        except Exception:
            self._log.error(f"{method} failed", detail=_traceback())
            self._respond_error(msg_id, RpcError.internal_error())
        else:
            if result.after is not None:
                try:
                    result.after()
                except Exception:
                    self._log.error(f"{method}: follow-up failed", detail=_traceback())


def _always() -> bool:
    return True


def _traceback() -> str:
    """The exception being handled, for the log: its traceback, or one line for an exception of
    the machine's (out of memory: formatting a traceback would need memory too)."""
    import sys

    if isinstance(sys.exc_info()[1], MemoryError):
        return OUT_OF_MEMORY
    import traceback  # lazy: only a failure pays for it

    return traceback.format_exc()
