"""One streaming POST for the HTTP providers: timeouts, retries with backoff, and a cancel that
closes the stream at once, even when the server has gone silent mid-stream."""

from __future__ import annotations

import email.utils
import random
import socket
import threading
import time
from contextlib import contextmanager
from typing import Any, Callable, Iterator
from urllib.parse import urlsplit

from bob_acp.cancel import Cancel
from bob_acp.exceptions import Cancelled, ModelError
from bob_acp.jsonrpc import codec
from bob_acp.providers.base import Quiet, Stream
from bob_acp.secrets import Redactor

CONNECT_TIMEOUT = 10.0
TOTAL_BUDGET = 300.0  # seconds all attempts of one call may take before its first byte
BACKOFF_BASE = 1.0
BACKOFF_CAP = 30.0
RETRY_STATUSES = {408, 409, 429}  # and every 5xx but these, which a retry cannot fix:
NO_RETRY_5XX = {501, 505}
MAX_REPLY_BYTES = 64 * 1024 * 1024  # far past any real reply: a server that never stops is cut off
READ_CHUNK = 65536
MAX_REDIRECTS = 5


class SessionPool:
    """The provider's HTTP sessions (keep-alive connections). A call takes one for its whole
    duration and gives it back, so calls from several threads (turns are serialised, but
    /compact, --check and tests are not bound to that) never share a session at once."""

    def __init__(self) -> None:
        self._free: list[Any] = []
        self._lock = threading.Lock()

    @contextmanager
    def session(self) -> Iterator[Any]:
        with self._lock:
            session = self._free.pop() if self._free else None
        if session is None:
            import requests  # lazy: start-up never pays for it

            session = requests.Session()
            session.max_redirects = MAX_REDIRECTS
        try:
            yield session
        finally:
            with self._lock:
                self._free.append(session)


@contextmanager
def stream_lines(pool: SessionPool, url: str, headers: dict, body: dict, cfg: Any, cancel: Cancel,
                 error_message: Callable[[Any], str | None], secrets: tuple[str, ...] = (),
                 stream: Stream | None = None, total_budget: float = TOTAL_BUDGET) -> Iterator[Iterator[str]]:
    """POST `body` and yield an iterator over the response's lines (decoded UTF-8; CR, LF and
    CRLF all end a line, as SSE says).

    Retries 429/5xx/connection errors before any byte reached the caller; raises ModelError
    (one line, never the key: servers echo it in their errors, requests puts it in reprs) or
    Cancelled.
    """
    try:
        with pool.session() as session:
            with _stream_lines(session, url, headers, body, cfg, cancel, error_message, stream or Quiet(),
                               total_budget) as lines:
                yield lines
    except ModelError as exc:
        text = Redactor(secrets).text(str(exc))
        if text != str(exc):
            raise ModelError(text) from None
        raise


@contextmanager
def _stream_lines(session: Any, url: str, headers: dict, body: dict, cfg: Any, cancel: Cancel,
                  error_message: Callable[[Any], str | None], stream: Stream,
                  total_budget: float) -> Iterator[Iterator[str]]:
    import requests

    deadline = time.monotonic() + total_budget
    attempt = 0
    data = codec.dumps(body)
    # identity: the body is read raw, as it arrives; a compressed event stream would be garbage.
    headers = {**headers, "Accept-Encoding": "identity"}
    while True:
        if cancel.is_set():
            raise Cancelled()
        retry_after: float | None = None
        try:
            response = session.post(url, data=data, headers=headers, stream=True,
                                    timeout=(CONNECT_TIMEOUT, cfg.model.timeout))
        except requests.exceptions.ConnectTimeout:
            failure = ModelError(f"model API unreachable: {_where(url)}: connection timed out")
        except requests.exceptions.ConnectionError as exc:
            failure = ModelError(f"model API unreachable: {_where(url)}: {_reason(exc)}")
        except requests.exceptions.ReadTimeout:
            failure = ModelError(f"model API timeout: no data for {cfg.model.timeout:g} s")
        except requests.exceptions.TooManyRedirects:
            raise ModelError(f"model API redirects too often (more than {MAX_REDIRECTS}): {_where(url)}") from None
        except (requests.exceptions.InvalidURL, requests.exceptions.InvalidSchema,
                requests.exceptions.MissingSchema, requests.exceptions.InvalidHeader) as exc:
            raise ModelError(f"model API request refused before sending: {type(exc).__name__}: "
                             f"{_reason(exc)}") from None
        except (requests.exceptions.RequestException, ValueError, OverflowError) as exc:
            raise ModelError(f"model API request failed: {type(exc).__name__}: {_reason(exc)}") from None
        else:
            if response.status_code == 200:
                break
            failure = ModelError(_status_line(response, error_message))
            retry_after = _retry_after(response.headers.get("Retry-After"))
            response.close()
            if not _retryable(response.status_code):
                raise failure
        attempt += 1
        delay = retry_after if retry_after is not None else min(BACKOFF_CAP, BACKOFF_BASE * 2 ** (attempt - 1)) * (0.5 + random.random())
        if attempt > cfg.model.retries or time.monotonic() + delay > deadline:
            raise failure
        stream.retrying(attempt, delay, str(failure))
        if cancel.wait(delay):
            raise Cancelled()
    expired = threading.Event()

    def expire() -> None:
        expired.set()
        _shutdown(response)

    # A cancel (or the per-call ceiling) shuts the socket down, so a read blocked on a silent
    # server returns at once; nothing polls and nothing is left to join afterwards.
    unsubscribe = cancel.subscribe(lambda: _shutdown(response))
    ceiling = threading.Timer(max(0.0, cfg.model.callTimeout), expire)
    ceiling.daemon = True
    ceiling.start()
    try:
        yield _lines(response, cancel, cfg.model.timeout, expired, cfg.model.callTimeout)
    finally:
        ceiling.cancel()
        unsubscribe()
        response.close()


def _lines(response: Any, cancel: Cancel, timeout: float, expired: threading.Event, ceiling: float) -> Iterator[str]:
    import requests
    import urllib3

    def stopped() -> None:
        if cancel.is_set():
            raise Cancelled() from None
        if expired.is_set():
            raise ModelError(f"model API call exceeded {ceiling:g} s (model.callTimeout)") from None

    try:
        for raw in arriving_lines(response.raw):
            stopped()
            yield raw.decode("utf-8", errors="replace")
    except (requests.exceptions.RequestException, urllib3.exceptions.HTTPError, OSError, AttributeError,
            ValueError) as exc:
        stopped()
        if "timed out" in str(exc).lower():
            raise ModelError(f"model API timeout: no data for {timeout:g} s") from None
        raise ModelError(f"model API stream broken: {_reason(exc)}") from None
    stopped()


def too_long_reply(limit: int) -> Exception:
    return ModelError(f"model API reply exceeded {limit // (1024 * 1024)} MiB: stream stopped")


def arriving_lines(raw: Any, limit: int = MAX_REPLY_BYTES,
                   too_long: Callable[[int], Exception] = too_long_reply) -> Iterator[bytes]:
    """Lines as soon as they arrive (requests' iter_lines waits for whole reads; a stream of
    model tokens must not). urllib3 2's read1 returns what is there, chunked or not. Line ends
    are looked for only in the bytes just read, so a body without one costs linear time. Past
    `limit` bytes in all, `too_long(limit)` is raised."""
    read = raw.read1 if hasattr(raw, "read1") else (lambda _size: raw.read(1))
    pending: list[bytes] = []  # the start of a line not ended yet
    total = 0
    after_cr = False  # the last chunk ended in CR: an LF starting the next one belongs to it
    while True:
        data = read(READ_CHUNK)
        if not data:
            break
        total += len(data)
        if total > limit:
            raise too_long(limit)
        if after_cr and data[:1] == b"\n":
            data = data[1:]
        after_cr = data[-1:] == b"\r"
        if b"\r" in data:
            data = data.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        if b"\n" not in data:
            pending.append(data)
            continue
        lines = data.split(b"\n")
        if pending:
            lines[0] = b"".join(pending) + lines[0]
            pending = []
        if lines[-1]:
            pending.append(lines[-1])
        yield from lines[:-1]
    if pending:
        yield b"".join(pending)


def _shutdown(response: Any) -> None:
    sock = _socket_of(response)
    if sock is not None:
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


def _socket_of(response: Any) -> Any:
    raw = getattr(response, "raw", None)
    for path in (("_fp", "fp", "raw", "_sock"), ("_connection", "sock")):
        node = raw
        for name in path:
            node = getattr(node, name, None)
            if node is None:
                break
        if node is not None and hasattr(node, "shutdown"):
            return node
    return None


def _retryable(status: int) -> bool:
    return status in RETRY_STATUSES or (500 <= status < 600 and status not in NO_RETRY_5XX)


def _where(url: str) -> str:
    try:
        parts = urlsplit(url)
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        return "(invalid URL)"
    return f"{parts.hostname}:{port}"


def _reason(exc: BaseException) -> str:
    text = str(exc)
    for known in ("Connection refused", "Name or service not known", "Temporary failure in name resolution",
                  "No route to host", "Connection reset by peer", "Network is unreachable"):
        if known in text:
            return known.lower()
    return " ".join(text.split())[:200] or type(exc).__name__


def _status_line(response: Any, error_message: Callable[[Any], str | None]) -> str:
    try:
        text = response.raw.read(64 * 1024, decode_content=True).decode("utf-8", errors="replace")
    except Exception:
        text = ""
    message = None
    try:
        message = error_message(codec.loads(text))
    except (codec.JSONDecodeError, TypeError, AttributeError, KeyError, RecursionError):
        pass
    if not message:
        message = " ".join(text.split())[:200] or response.reason or "no body"
    return f"model API {response.status_code}: {' '.join(str(message).split())[:300]}"


def _retry_after(value: str | None) -> float | None:
    if not value:
        return None
    try:
        seconds = float(value)
        return max(0.0, seconds) if seconds == seconds and seconds < 1e6 else None
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    return max(0.0, when.timestamp() - time.time())
