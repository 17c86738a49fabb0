"""An MCP server over streamable HTTP: a POST per message, an answer as JSON or as an event
stream, over requests.

The messages go through Bob's own JSON-RPC endpoint by messages (as an SSE server's do): each
request of Bob's is POSTed on a thread of its own, whose answer (the JSON body, or each message
of the event stream) the endpoint consumes; notifications and answers are POSTed before
returning (notifications/initialized must reach the server before tools/list). The caller waits
on its request with mcp.timeout (no timer thread); a request given up ends its POST's stream."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

from bob_acp import jsontext, threads
from bob_acp.mcp.connection import (
    MAX_ANSWER,
    EndpointConnection,
    McpError,
    closed,
    opened,
    read_capped,
    refused,
    too_long,
)
from bob_acp.providers import httpio

if TYPE_CHECKING:
    import requests

    from bob_acp.cancel import Cancel
    from bob_acp.log import Logger


class HttpConnection(EndpointConnection):
    """Streamable HTTP: a POST per message, an answer as JSON or as an event stream, the
    Mcp-Session-Id the server gives kept for every later request, DELETE at the end."""

    def __init__(self, name: str, url: str, headers: dict[str, str], log: Logger, timeout: float):
        self.name = name
        self.url = url
        self._log = log
        self._timeout = timeout  # (how long a POST waits for the server's first byte)
        self._http = httpio.new_session()
        self._headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
                         **headers}
        self._lock = threading.Lock()
        self._closed = False
        self._exchanges: dict[int, requests.Response | None] = {}  # POSTs of requests under way, by id
        self._hidden = httpio.url_secrets(url)  # what an error line must never show
        self._endpoint = self.endpoint_for(self._send, log, self)
        try:
            self._endpoint.start()
        except RuntimeError as exc:
            raise McpError(f"cannot start a thread: {exc}") from None
        opened(self)

    @property
    def alive(self) -> bool:
        return not self._closed

    def request(self, method: str, params: dict[str, Any], timeout: float, cancel: Cancel | None = None) -> dict[str, Any]:
        sent = self._endpoint.request(method, params)
        sent_id = sent.id
        sent.add_done_callback(lambda _done: self._end_exchange(sent_id))  # (answered, or given up)
        return self.awaited(sent, method, timeout, cancel)

    def cancel_notice(self, request_id: int, reason: str = "cancelled by the user") -> None:
        message = {"jsonrpc": "2.0", "method": "notifications/cancelled",
                   "params": {"requestId": request_id, "reason": reason}}
        try:  # (on the cancelling thread, which must not wait on the server)
            threads.start(lambda: self._post(message), f"bob-mcp-{self.name}-cancel")
        except threads.ThreadLimit:
            pass  # (the server learns it when the POST's stream ends)

    # ---- what Bob sends ---------------------------------------------------------------------------

    def _send(self, message: dict[str, Any]) -> None:
        """The endpoint's consumer: a request's POST on a thread of its own (its answer comes
        back on it), anything else POSTed at once."""
        if "method" not in message or "id" not in message:
            return self._post(message)
        msg_id = message["id"]
        with self._lock:
            self._exchanges[msg_id] = None
        try:
            threads.start(lambda: self._exchange(message), f"bob-mcp-{self.name}-post #{msg_id}")
        except threads.ThreadLimit as exc:
            self._failed(msg_id, str(exc))

    def _post(self, message: dict[str, Any]) -> None:
        try:
            self._http.post(self.url, data=jsontext.dumps(message), headers=self._headers, timeout=(10, 10),
                            allow_redirects=False).close()
        except Exception as exc:  # a notification that cannot be delivered changes nothing here
            self._log.info(f"[mcp] {self.name}: could not send {message.get('method', 'an answer')}: "
                           f"{self.scrub(str(exc))}")

    # ---- a request's exchange -----------------------------------------------------------------------

    def _exchange(self, message: dict[str, Any]) -> None:
        """POST a request and give the endpoint what comes back, until the request's answer;
        a failure answers the request with what went wrong."""
        import requests

        msg_id, method = message["id"], message["method"]
        response = None
        try:
            # Redirects are not followed: they would carry the editor's headers (keys, the MCP
            # session) to wherever the server points.
            response = self._http.post(self.url, data=jsontext.dumps(message), headers=self._headers, stream=True,
                                       timeout=(10, self._timeout), allow_redirects=False)
            with self._lock:
                waited = msg_id in self._exchanges
                if waited:
                    self._exchanges[msg_id] = response
            if waited and not self._read_answer(response, msg_id, method):
                self._failed(msg_id, "the event stream ended without the answer")
        except McpError as exc:
            self._failed(msg_id, str(exc))
        except (OSError, ValueError) as exc:  # requests' exceptions are OSErrors too (a shut-down stream as well)
            kind = f"{type(exc).__name__}: " if isinstance(exc, requests.exceptions.RequestException) else ""
            self._failed(msg_id, f"{kind}{jsontext.clean(str(exc))[:200]}")
        finally:
            with self._lock:
                self._exchanges.pop(msg_id, None)
            if response is not None:
                response.close()

    def _read_answer(self, response: requests.Response, msg_id: int, method: str) -> bool:
        """Whether the request's answer came (and was given to the endpoint)."""
        problem = refused(response)
        if problem is not None:
            raise McpError(problem)
        session = response.headers.get("Mcp-Session-Id")
        if session and method == "initialize":
            self._headers["Mcp-Session-Id"] = session
        if response.headers.get("Content-Type", "").startswith("text/event-stream"):
            lines = (raw.decode("utf-8", "replace") for raw in httpio.arriving_lines(response.raw, MAX_ANSWER, too_long))
            for _name, data in httpio.events(lines):
                if not data.strip():
                    continue  # a priming event
                message = self.deliver(data)  # (notifications, the server's requests: served)
                if isinstance(message, dict) and message.get("id") == msg_id and "method" not in message:
                    return True
            return False
        body = read_capped(response.raw, method)
        try:
            message = jsontext.loads(body)
        except (jsontext.JSONDecodeError, RecursionError):
            raise McpError("the answer is not JSON") from None
        if not isinstance(message, dict) or message.get("id") != msg_id or "method" in message:
            raise McpError("the answer is not a JSON-RPC answer to the request")
        self._endpoint.consume(message, len(body))
        return True

    def _failed(self, msg_id: int, problem: str) -> None:
        """The request is answered with what went wrong (once: a later answer is one the endpoint
        no longer awaits)."""
        with self._lock:
            if msg_id not in self._exchanges:
                return  # (settled already: answered, or given up by the caller)
        self.error_answer(msg_id, self.scrub(problem))

    def _end_exchange(self, msg_id: int) -> None:
        """The request is settled: its POST's stream, if one is still read, ends at once."""
        with self._lock:
            response = self._exchanges.pop(msg_id, None)
        if response is not None:
            httpio.shutdown(response)

    # ---- the end ----------------------------------------------------------------------------------

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            under_way = [r for r in self._exchanges.values() if r is not None]
            self._exchanges.clear()
        self._endpoint.stop()  # (requests still waited for end: the server is gone)
        for response in under_way:
            httpio.shutdown(response)
        if "Mcp-Session-Id" in self._headers:
            try:
                self._http.delete(self.url, headers=self._headers, timeout=(2, 2))
            except Exception as exc:  # 405 or gone: nothing to end
                self._log.debug(f"[mcp] {self.name}: ending the session: {exc!r}")
        self._http.close()
        closed(self)
