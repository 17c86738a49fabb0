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

import orjson

from bob_acp.exceptions import Cancelled, ModelError

CONNECT_TIMEOUT = 10.0
TOTAL_BUDGET = 300.0  # seconds all attempts of one call may take
BACKOFF_BASE = 1.0
BACKOFF_CAP = 30.0
RETRY_STATUSES = {408, 409, 429}  # and every 5xx but these, which a retry cannot fix:
NO_RETRY_5XX = {501, 505}
MAX_REPLY_BYTES = 64 * 1024 * 1024  # far past any real reply: a server that never stops is cut off
_session_lock = threading.Lock()
_session: Any = None


def _requests_session() -> Any:
    global _session
    with _session_lock:
        if _session is None:
            import requests  # lazy: start-up never pays for it

            _session = requests.Session()
        return _session


@contextmanager
def stream_lines(url: str, headers: dict, body: dict, cfg: Any, cancel: threading.Event,
                 error_message: Callable[[Any], str | None], secret: str | None = None,
                 total_budget: float = TOTAL_BUDGET) -> Iterator[Iterator[str]]:
    """POST `body` and yield an iterator over the response's lines (decoded UTF-8).

    Retries 429/5xx/connection errors before any byte reached the caller; raises ModelError
    (one line, never the key: servers echo it in their errors) or Cancelled.
    """
    try:
        with _stream_lines(url, headers, body, cfg, cancel, error_message, total_budget) as lines:
            yield lines
    except ModelError as exc:
        if secret and secret in str(exc):
            raise ModelError(str(exc).replace(secret, "[redacted]")) from None
        raise


@contextmanager
def _stream_lines(url: str, headers: dict, body: dict, cfg: Any, cancel: threading.Event,
                  error_message: Callable[[Any], str | None], total_budget: float) -> Iterator[Iterator[str]]:
    import requests

    deadline = time.monotonic() + total_budget
    attempt = 0
    data = orjson.dumps(body)
    while True:
        if cancel.is_set():
            raise Cancelled()
        retry_after: float | None = None
        try:
            response = _requests_session().post(url, data=data, headers=headers, stream=True,
                                                timeout=(CONNECT_TIMEOUT, cfg.model.timeout))
        except requests.exceptions.ConnectTimeout:
            failure = ModelError(f"model API unreachable: {_where(url)}: connection timed out")
        except requests.exceptions.ConnectionError as exc:
            failure = ModelError(f"model API unreachable: {_where(url)}: {_reason(exc)}")
        except requests.exceptions.ReadTimeout:
            failure = ModelError(f"model API timeout: no data for {cfg.model.timeout:g} s")
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
        if cancel.wait(delay):
            raise Cancelled()
    with _closing_on_cancel(response, cancel):
        try:
            yield _lines(response, cancel, cfg.model.timeout)
        finally:
            response.close()


def _lines(response: Any, cancel: threading.Event, timeout: float) -> Iterator[str]:
    import requests
    import urllib3

    try:
        for raw in _arriving_lines(response.raw):
            if cancel.is_set():
                raise Cancelled()
            yield raw.decode("utf-8", errors="replace")
    except (requests.exceptions.RequestException, urllib3.exceptions.HTTPError, OSError, AttributeError,
            ValueError) as exc:
        if cancel.is_set():
            raise Cancelled() from None
        if "timed out" in str(exc).lower():
            raise ModelError(f"model API timeout: no data for {timeout:g} s") from None
        raise ModelError(f"model API stream broken: {_reason(exc)}") from None
    if cancel.is_set():
        raise Cancelled()


def _arriving_lines(raw: Any) -> Iterator[bytes]:
    """Lines as soon as they arrive (requests' iter_lines waits for whole reads; a stream of
    model tokens must not). urllib3 2's read1 returns what is there, chunked or not."""
    read = raw.read1 if hasattr(raw, "read1") else (lambda _size: raw.read(1))
    buffer = b""
    total = 0
    while True:
        data = read(65536)
        if not data:
            break
        total += len(data)
        if total > MAX_REPLY_BYTES:
            raise ModelError(f"model API reply exceeded {MAX_REPLY_BYTES // (1024 * 1024)} MiB: stream stopped")
        buffer += data
        if b"\n" in buffer:
            *lines, buffer = buffer.split(b"\n")
            yield from lines
    if buffer:
        yield buffer


@contextmanager
def _closing_on_cancel(response: Any, cancel: threading.Event) -> Iterator[None]:
    """While the body is read, a watcher shuts the socket down as soon as `cancel` is set, so a
    read blocked on a silent server returns at once. The watcher ends with the block."""
    done = threading.Event()

    def watch() -> None:
        while not done.is_set():
            if cancel.wait(0.05):
                _shutdown(response)
                return

    watcher = threading.Thread(target=watch, name="bob-model-cancel", daemon=True)
    watcher.start()
    try:
        yield
    finally:
        done.set()
        watcher.join()


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
    parts = urlsplit(url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
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
        text = response.content[:65536].decode("utf-8", errors="replace")
    except Exception:
        text = ""
    message = None
    try:
        message = error_message(orjson.loads(text))
    except (orjson.JSONDecodeError, TypeError, AttributeError, KeyError):
        pass
    if not message:
        message = " ".join(text.split())[:200] or response.reason or "no body"
    return f"model API {response.status_code}: {' '.join(str(message).split())}"


def _retry_after(value: str | None) -> float | None:
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())
