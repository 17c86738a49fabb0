"""One streaming POST for the HTTP providers: timeouts, retries with backoff, and a cancel that
closes the stream at once, even when the server has gone silent mid-stream."""

from __future__ import annotations

import email.utils
import random
import threading
import time
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Callable, Iterator, Mapping
from urllib.parse import urlsplit, urlunsplit

from bob_acp import jsontext, threads
from bob_acp.cancel import Cancel
from bob_acp.config.keys import expand
from bob_acp.exceptions import Cancelled, ModelError
from bob_acp.providers import httpio
from bob_acp.providers.base import Quiet, Stream
from bob_acp.secrets import Redactor

if TYPE_CHECKING:
    import requests
    from urllib3.response import BaseHTTPResponse

    from bob_acp.config import ModelSettings


CONNECT_TIMEOUT = 10.0
TOTAL_BUDGET = 300.0  # seconds all attempts of one call may take before its first byte
BACKOFF_BASE = 1.0
BACKOFF_CAP = 30.0
RETRY_STATUSES = {408, 409, 429}  # and every 5xx but these, which a retry cannot fix:
NO_RETRY_5XX = {501, 505}
MAX_REPLY_BYTES = 64 * 1024 * 1024  # far past any real reply: a server that never stops is cut off
MAX_REDIRECTS = 5


class SessionPool:
    """The provider's HTTP sessions (keep-alive connections). A call takes one for its whole
    duration and gives it back, so calls from several threads (turns are serialised, but
    /compact, --check and tests are not bound to that) never share a session at once."""

    def __init__(self) -> None:
        self._free: list[Any] = []
        self._lock = threading.Lock()

    @contextmanager
    def session(self) -> Iterator[Lease]:
        with self._lock:
            session = self._free.pop() if self._free else None
        if session is None:
            session = httpio.new_session()
            session.max_redirects = MAX_REDIRECTS
        lease = Lease(session)
        try:
            yield lease
        finally:
            if not lease.lost:  # a request abandoned on a cancel still uses it: it closes it itself
                with self._lock:
                    self._free.append(session)


class Lease:
    __slots__ = ("session", "lost")

    def __init__(self, session: requests.Session):
        self.session = session
        self.lost = False


@contextmanager
def stream_lines(pool: SessionPool, url: str, headers: dict[str, Any], body: dict[str, Any], settings: ModelSettings, cancel: Cancel,
                 error_message: Callable[[Any], str | None], secrets: tuple[str, ...] = (),
                 stream: Stream | None = None, total_budget: float = TOTAL_BUDGET) -> Iterator[Iterator[str]]:
    """POST `body` and yield an iterator over the response's lines (decoded UTF-8; CR, LF and
    CRLF all end a line, as SSE says).

    Retries 429/5xx/connection errors before any byte reached the caller; raises ModelError
    (one line, never the key: servers echo it in their errors, requests puts it in reprs) or
    Cancelled.
    """
    hidden = httpio.url_secrets(url)
    try:
        with pool.session() as lease:
            with _stream_lines(lease, url, headers, body, settings, cancel, error_message, stream or Quiet(),
                               total_budget) as lines:
                yield lines
    except ModelError as exc:
        text = Redactor(secrets).text(str(exc))
        for secret in hidden:  # a token in the URL's query never shows in an error line
            text = text.replace(secret, "[redacted]")
        if text != str(exc):
            raise ModelError(text) from None
        raise


@contextmanager
def _stream_lines(lease: Lease, url: str, headers: dict[str, Any], body: dict[str, Any], settings: ModelSettings, cancel: Cancel,
                  error_message: Callable[[Any], str | None], stream: Stream,
                  total_budget: float) -> Iterator[Iterator[str]]:
    import requests

    session = lease.session

    deadline = time.monotonic() + total_budget
    attempt = 0
    data = jsontext.dumps(body)
    # identity: the body is read raw, as it arrives; a compressed event stream would be garbage.
    headers = {**headers, "Accept-Encoding": "identity"}
    while True:
        if cancel.is_set():
            raise Cancelled()
        retry_after: float | None = None
        try:
            # A cancel before the server's headers (a model queueing, a slow proxy) ends the
            # wait at once; the abandoned request closes its answer and its session itself.
            response = httpio.post(session, url, cancel, on_abandon=session.close, data=data, headers=headers,
                                   stream=True, timeout=(CONNECT_TIMEOUT, settings.timeout))
        except Cancelled:
            lease.lost = True
            raise
        except threads.ThreadLimit as exc:
            raise ModelError(f"model API call not made: {exc}") from None
        except requests.exceptions.ConnectTimeout:
            failure = ModelError(f"model API unreachable: {_where(url)}: connection timed out")
        except requests.exceptions.ConnectionError as exc:
            failure = ModelError(f"model API unreachable: {_where(url)}: {_reason(exc)}")
        except requests.exceptions.ReadTimeout:
            failure = ModelError(f"model API timeout: no data for {settings.timeout:g} s")
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
            failure = ModelError(_status_line(response, error_message, url))
            retry_after = _retry_after(response.headers.get("Retry-After"))
            response.close()
            if not _retryable(response.status_code):
                raise failure
        attempt += 1
        delay = retry_after if retry_after is not None else min(BACKOFF_CAP, BACKOFF_BASE * 2 ** (attempt - 1)) * (0.5 + random.random())
        if attempt > settings.retries or time.monotonic() + delay > deadline:
            raise failure
        stream.retrying(attempt, delay, str(failure))
        if cancel.wait(delay):
            raise Cancelled()
    expired = threading.Event()

    def expire() -> None:
        expired.set()
        httpio.shutdown(response)

    # A cancel (or the per-call ceiling) shuts the socket down, so a read blocked on a silent
    # server returns at once; nothing polls and nothing is left to join afterwards.
    unsubscribe = cancel.subscribe(lambda: httpio.shutdown(response))
    try:
        ceiling = threads.timer(max(0.0, settings.callTimeout), expire)
    except threads.ThreadLimit:
        unsubscribe()
        response.close()
        raise ModelError(f"model API call not made: {threads.LIMIT}") from None
    try:
        yield _lines(response, cancel, settings.timeout, expired, settings.callTimeout)
    finally:
        ceiling.cancel()
        unsubscribe()
        response.close()


def _lines(response: requests.Response, cancel: Cancel, timeout: float, expired: threading.Event, ceiling: float) -> Iterator[str]:
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
        raise ModelError(f"model API stream broken: {_broken(exc)}") from None
    stopped()


def too_long_reply(limit: int) -> Exception:
    return ModelError(f"model API reply exceeded {limit // (1024 * 1024)} MiB: stream stopped")


def arriving_lines(raw: BaseHTTPResponse, limit: int = MAX_REPLY_BYTES,
                   too_long: Callable[[int], Exception] = too_long_reply) -> Iterator[bytes]:
    """A model reply's lines as they arrive (bob_acp.providers.httpio), cut off past MAX_REPLY_BYTES."""
    return httpio.arriving_lines(raw, limit, too_long)


def endpoint_url(base: str, path: str, query: dict[str, str] | None = None) -> str:
    """`path` added to the base URL's own path; its query (a gateway's `?api-version=…`) kept,
    and `query` (model.query) added to it."""
    from urllib.parse import urlencode

    try:
        parts = urlsplit(base)
    except ValueError:  # not a URL (the request will say so)
        return base.rstrip("/") + path
    more = urlencode(query or {})
    joined = "&".join(q for q in (parts.query, more) if q)
    return urlunsplit((parts.scheme, parts.netloc, parts.path.rstrip("/") + path, joined, ""))


class Wire:
    """What every request of one configured model carries besides its body: the URL (with
    model.query), the headers (model.headers, the key in its header), model.extraBody."""

    __slots__ = ("url", "models_url", "headers", "extra_body")

    def __init__(self, settings: ModelSettings, default_base: str, path: str, key: str | None, key_header: str,
                 key_prefix: str, headers: dict[str, str], env: Mapping[str, str] | None = None,
                 models_path: str = "/models"):
        import os

        variables = os.environ if env is None else env
        self.url = endpoint_url(settings.baseUrl or default_base, path, settings.query)
        self.models_url = endpoint_url(settings.baseUrl or default_base, models_path, settings.query)
        self.headers = dict(headers)
        self.headers.update({name: expand(value, variables) for name, value in settings.headers.items()})
        if key:
            if settings.keyHeader:
                self.headers[settings.keyHeader] = key  # as it is: Azure's api-key takes no "Bearer"
            else:
                self.headers[key_header] = key_prefix + key
        self.extra_body = settings.extraBody

    def body(self, body: dict[str, Any]) -> dict[str, Any]:
        """`body` with model.extraBody merged in (its keys win: a gateway's routing, a server's
        template options)."""
        return {**body, **self.extra_body} if self.extra_body else body


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


def _broken(exc: BaseException) -> str:
    """Why a reply stopped in the middle, in words."""
    text = str(exc)
    if any(sign in text for sign in ("IncompleteRead", "Connection broken", "InvalidChunkLength",
                                     "Response ended prematurely", "Connection reset by peer")):
        return "the model server closed the connection in the middle of its reply"
    return _reason(exc)


def _status_line(response: requests.Response, error_message: Callable[[Any], str | None], url: str) -> str:
    elsewhere = httpio.redirected(response)
    if elsewhere is not None:  # (another origin: the session would not follow it)
        return (f"model API {response.status_code}: the server redirected to another origin ({elsewhere}); Bob does "
                "not follow it (the key and the conversation would go there): set model.baseUrl to the final address")
    try:
        text = response.raw.read(64 * 1024, decode_content=True).decode("utf-8", errors="replace")
    except Exception:
        text = ""
    message = None
    try:
        message = error_message(jsontext.loads(text))
    except (jsontext.JSONDecodeError, TypeError, AttributeError, KeyError, RecursionError):
        pass
    if not message:
        message = " ".join(text.split())[:200] or response.reason or "no body"
    # A 404 or 405 is most often a wrong path under model.baseUrl (a doubled /v1): say which.
    where = f" at POST {httpio.public_url(url)}" if response.status_code in (404, 405) else ""
    return f"model API {response.status_code}{where}: {' '.join(str(message).split())[:300]}"


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
