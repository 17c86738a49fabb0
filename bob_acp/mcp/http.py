"""An MCP server over streamable HTTP: a POST per message, an answer as JSON or as an event
stream, over requests."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

from bob_acp import jsontext
from bob_acp.cancel import Cancel
from bob_acp.exceptions import Cancelled
from bob_acp.mcp.connection import (
    MAX_ANSWER,
    Connection,
    McpError,
    closed,
    error_of,
    interruption,
    opened,
    read_capped,
    refused,
    result_of,
    too_long,
)
from bob_acp.providers import httpio

if TYPE_CHECKING:
    import requests

    from bob_acp.log import Logger


class HttpConnection(Connection):
    """Streamable HTTP: a POST per message, an answer as JSON or as an event stream, the
    Mcp-Session-Id the server gives kept for every later request, DELETE at the end."""

    def __init__(self, name: str, url: str, headers: dict[str, str], log: Logger):
        self.name = name
        self.url = url
        self._log = log
        self._http = httpio.new_session()
        self._headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
                         **headers}
        self._ids = 0
        self._lock = threading.Lock()
        self._closed = False
        self._hidden = httpio.url_secrets(url)  # what an error line must never show
        opened(self)

    @property
    def alive(self) -> bool:
        return not self._closed

    def _next_id(self) -> int:
        with self._lock:
            self._ids += 1
            return self._ids

    def request(self, method: str, params: dict[str, Any], timeout: float, cancel: Cancel | None = None) -> dict[str, Any]:
        import requests

        msg_id = self._next_id()
        body = jsontext.dumps({"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params})
        timed_out = threading.Event()
        # One wake-up for both ends of waiting, the user's cancel and mcp.timeout: set before the
        # server's headers, the POST is abandoned at once; after them, the socket is shut down.
        stopped = Cancel()
        holder: dict[str, Any] = {}

        def stop() -> None:
            stopped.set()
            response = holder.get("response")
            if response is not None:
                httpio.shutdown(response)

        def expire() -> None:
            timed_out.set()
            stop()

        def cancelled() -> None:  # (on the cancelling thread: the POST goes on a thread of its own)
            stop()
            message = {"jsonrpc": "2.0", "method": "notifications/cancelled",
                       "params": {"requestId": msg_id, "reason": "cancelled by the user"}}
            threading.Thread(target=self._post, args=(message,), name=f"bob-mcp-{self.name}-cancel",
                             daemon=True).start()

        timer = threading.Timer(timeout, expire)
        timer.daemon = True
        timer.start()
        unsubscribe = cancel.subscribe(cancelled) if cancel is not None else (lambda: None)
        try:
            try:
                # Redirects are not followed: they would carry the editor's headers (keys, the
                # MCP session) to wherever the server points.
                response = httpio.post(self._http, self.url, stopped, data=body, headers=self._headers,
                                       stream=True, timeout=(10, timeout), allow_redirects=False)
                holder["response"] = response
                if stopped.is_set():  # it came just as the wait ended
                    httpio.shutdown(response)
                try:
                    answer = self._answer(response, msg_id, method)
                finally:
                    response.close()
            except Cancelled:
                raise interruption(method, timed_out, cancel, timeout) or Cancelled() from None
            except McpError as exc:  # an answer cut short by the cancel or the timeout says so
                raise interruption(method, timed_out, cancel, timeout) or exc from None
            except (OSError, ValueError) as exc:  # requests' exceptions are OSErrors too
                kind = f"{type(exc).__name__}: " if isinstance(exc, requests.exceptions.RequestException) else ""
                problem = interruption(method, timed_out, cancel, timeout)
                raise (problem or McpError(self.scrub(f"{method}: {kind}{jsontext.clean(str(exc))[:200]}"))) from None
        finally:
            timer.cancel()
            unsubscribe()
        if "error" in answer:
            raise error_of(method, answer["error"])
        return result_of(method, answer.get("result"))

    def _answer(self, response: requests.Response, msg_id: int, method: str) -> dict[str, Any]:
        problem = refused(response)
        if problem is not None:
            raise McpError(f"{method}: {problem}")
        session = response.headers.get("Mcp-Session-Id")
        if session and method == "initialize":
            self._headers["Mcp-Session-Id"] = session
        kind = response.headers.get("Content-Type", "")
        if kind.startswith("text/event-stream"):
            return self._from_events(response, msg_id)
        try:
            message = jsontext.loads(read_capped(response.raw, method))
        except (jsontext.JSONDecodeError, RecursionError):
            raise McpError(f"{method}: the answer is not JSON") from None
        if not isinstance(message, dict):
            raise McpError(f"{method}: the answer is not a JSON-RPC message")
        return message

    def _from_events(self, response: requests.Response, msg_id: int) -> dict[str, Any]:
        lines = (raw.decode("utf-8", "replace") for raw in httpio.arriving_lines(response.raw, MAX_ANSWER, too_long))
        for _name, data in httpio.events(lines):
            if not data.strip():
                continue  # a priming event
            try:
                message = jsontext.loads(data)
            except (jsontext.JSONDecodeError, RecursionError):
                continue
            if not isinstance(message, dict):
                continue
            if message.get("id") == msg_id and "method" not in message:
                return message
            if "method" in message and "id" not in message:
                self.on_notification(message["method"], message.get("params") or {})
            elif "method" in message:  # a request from the server on this stream: only ping is served
                reply = {"result": {}} if message["method"] == "ping" else {
                    "error": {"code": -32601, "message": f"Method not found: {message['method']}"}}
                self._post({"jsonrpc": "2.0", "id": message["id"], **reply})
        raise McpError("the event stream ended without the answer")

    def _post(self, message: dict[str, Any]) -> None:
        try:
            self._http.post(self.url, data=jsontext.dumps(message), headers=self._headers, timeout=(10, 10))
        except Exception as exc:  # a notification that cannot be delivered changes nothing here
            self._log.info(f"[mcp] {self.name}: could not send {message.get('method', 'an answer')}: {exc}")

    def notify(self, method: str, params: dict[str, Any] | None = None) -> None:
        """Sent before returning: notifications/initialized must reach the server before tools/list."""
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        self._post(message)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if "Mcp-Session-Id" in self._headers:
            try:
                self._http.delete(self.url, headers=self._headers, timeout=(2, 2))
            except Exception as exc:  # 405 or gone: nothing to end
                self._log.debug(f"[mcp] {self.name}: ending the session: {exc!r}")
        self._http.close()
        closed(self)
