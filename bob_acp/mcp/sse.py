"""An MCP server over HTTP with server-sent events (MCP 2024-11-05's transport, which editors
still hand over: `{type: sse, url, headers}`): a GET event stream the server speaks on, whose
first event (`endpoint`) names where each message is POSTed.

The messages go through Bob's own JSON-RPC endpoint, as a stdio server's frames do, but as
messages (no pipe, nothing parsed twice): each message of the stream is consumed by it, and each
message it sends is POSTed. Threads: one reads the stream, the endpoint's dispatcher, one posts. A POST the server
refuses answers its request with the words the streamable HTTP transport uses (`HTTP 500`);
a message endpoint on another host than the stream's is refused (the headers, keys among them,
would go there); each event is bounded as one HTTP answer is."""

from __future__ import annotations

import queue
import threading
from typing import TYPE_CHECKING, Any
from urllib.parse import urljoin

from bob_acp import jsontext, threads
from bob_acp.mcp.connection import (
    MAX_ANSWER,
    EndpointConnection,
    McpError,
    ServerGone,
    closed,
    opened,
    refused,
    too_long,
)
from bob_acp.providers import httpio

if TYPE_CHECKING:
    import requests

    from bob_acp.cancel import Cancel
    from bob_acp.log import Logger

POST_TIMEOUT = (10, 30)  # seconds to connect, and for the server to accept a message


class SseConnection(EndpointConnection):
    def __init__(self, name: str, url: str, headers: dict[str, str], log: Logger, timeout: float):
        self.name = name
        self.url = url
        self._log = log
        self._http = httpio.new_session()
        self._headers = dict(headers)
        self._hidden = httpio.url_secrets(url)
        self._lock = threading.Lock()
        self._closed = False
        self._response: requests.Response | None = None
        self._post_url: str | None = None
        self._problem: str | None = None  # why the stream ended, or never began
        self._ready = threading.Event()  # the endpoint is known, or the stream has ended
        self._outbox: queue.SimpleQueue[dict[str, Any] | None] = queue.SimpleQueue()  # to be POSTed; None: the end
        self._endpoint = self.endpoint_for(self._outbox.put, log, self)
        opened(self)  # (Bob ending meanwhile: closed, and McpError)
        try:
            self._endpoint.start()
            threads.start(self._read, f"bob-mcp-{name}-events")
            threads.start(self._post_all, f"bob-mcp-{name}-post")
        except (threads.ThreadLimit, RuntimeError) as exc:
            self.close()
            raise McpError(str(exc)) from None
        if not self._ready.wait(timeout) or self._post_url is None:
            problem = self._problem or f"no endpoint event within {timeout:g} s (mcp.timeout)"
            self.close()
            raise McpError(problem)

    @property
    def alive(self) -> bool:
        return not self._closed and not self._endpoint.closed

    def request(self, method: str, params: dict[str, Any], timeout: float, cancel: Cancel | None = None) -> dict[str, Any]:
        try:
            return super().request(method, params, timeout, cancel)
        except ServerGone:  # (the stream ended under the request: why, as the HTTP transport says it)
            if self._problem:
                raise McpError(f"{method}: {self._problem}") from None
            raise

    # ---- the stream -----------------------------------------------------------------------------

    def _read(self) -> None:
        import requests
        import urllib3

        response = None
        try:
            # The headers within mcp.timeout's share of the handshake; the stream then lasts as
            # long as it does (a quiet server sends nothing for minutes).
            response = self._http.get(self.url, headers={**self._headers, "Accept": "text/event-stream"},
                                      stream=True, timeout=(10, 30), allow_redirects=False)
            with self._lock:
                if self._closed:
                    return
                self._response = response
            refusal = _refusal(response)
            if refusal is not None:
                self._problem = refusal
                return
            httpio.no_read_timeout(response)
            lines = (raw.decode("utf-8", "replace")
                     for raw in httpio.arriving_lines(response.raw, MAX_ANSWER, too_long, per_line=True))
            for name, data in httpio.events(lines):
                if len(data) > MAX_ANSWER:
                    raise too_long(MAX_ANSWER)
                if name == "endpoint":
                    self._take_endpoint(data.strip())
                elif name == "message" and data.strip() and self._post_url is not None:
                    self.deliver(data)
            self._problem = self._problem or "the server ended its event stream"
        except McpError as exc:
            self._problem = self._problem or str(exc)
        except (OSError, ValueError, urllib3.exceptions.HTTPError) as exc:  # (requests' are OSErrors too)
            kind = f"{type(exc).__name__}: " if isinstance(exc, requests.exceptions.RequestException) else ""
            broken = "the event stream broke: " if isinstance(exc, urllib3.exceptions.HTTPError) else ""
            self._problem = self._problem or self.scrub(f"{broken}{kind}{jsontext.clean(str(exc))[:200]}")
        finally:
            if response is not None:
                response.close()
            self._endpoint.end()  # what waits on the server is answered
            up = self._ready.is_set() and self._post_url is not None
            self._ready.set()
            if not self._closed and self._problem:
                self._log.info(f"[mcp] {self.name}: {self._problem}")
                if up:  # (it had started: its tools go now, and the user is told why)
                    self.on_gone(self._problem)

    def _take_endpoint(self, data: str) -> None:
        target = urljoin(self.url, data)
        if not httpio.same_origin(target, self.url):
            raise McpError(f"the server named its message endpoint on another host ({httpio.public_url(target)}); "
                           "Bob posts only where the stream is (the server's headers would go with each message)")
        if self._post_url is None:
            self._post_url = target
            self._ready.set()

    # ---- posting ----------------------------------------------------------------------------------

    def _post_all(self) -> None:
        self._ready.wait()
        while True:
            message = self._outbox.get()
            if message is None or self._post_url is None or self._closed:
                return  # (it ended, or never started: nothing more is posted)
            self._post(message)

    def _post(self, message: dict[str, Any]) -> None:
        """One message POSTed; a request the server refused is answered here, with the words of
        the streamable HTTP transport."""
        assert self._post_url is not None
        try:
            response = self._http.post(self._post_url, data=jsontext.dumps(message), timeout=POST_TIMEOUT,
                                       allow_redirects=False, headers={**self._headers, "Content-Type": "application/json"})
            response.close()
            problem = refused(response)
        except (OSError, ValueError) as exc:
            problem = self.scrub(f"{type(exc).__name__}: {jsontext.clean(str(exc))[:200]}")
        if problem is None:
            return
        self._log.info(f"[mcp] {self.name}: the server refused {message.get('method', 'an answer')}: {problem}")
        if "id" in message and "method" in message and not self._closed:
            self.error_answer(message["id"], problem)

    # ---- the end ----------------------------------------------------------------------------------

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            response = self._response
        self._endpoint.stop()
        if response is not None:
            httpio.shutdown(response)  # (the reader's wait ends at once)
        self._ready.set()
        self._outbox.put(None)  # (the poster ends)
        self._http.close()
        closed(self)


def _refusal(response: requests.Response) -> str | None:
    """Why an answer to the GET is not an event stream to read, in the HTTP transport's words."""
    problem = refused(response)
    if problem is not None:
        return problem
    kind = response.headers.get("Content-Type", "")
    if not kind.startswith("text/event-stream"):
        return f"the answer is not an event stream ({jsontext.clean(kind)[:80] or 'no Content-Type'})"
    return None

