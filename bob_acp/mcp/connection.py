"""What every way to reach an MCP server offers (stdio.py, a child process; http.py, streamable
HTTP; sse.py, the older HTTP with server-sent events): request() with a timeout and a cancel,
notify(), close(); the registry of open connections Bob ends with it, and the words of their
failures, the same for every transport."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any, Callable
from urllib.parse import urlsplit

from bob_acp import jsontext
from bob_acp.cancel import Cancel
from bob_acp.exceptions import Cancelled
from bob_acp.jsonrpc.endpoint import Endpoint, PeerError, Route, Sent
from bob_acp.jsonrpc.errors import INTERNAL_ERROR, RpcError
from bob_acp.jsonrpc.messages import error_frame
from bob_acp.jsonrpc.streams import MAX_FRAME, Writer
from bob_acp.threads import Live

if TYPE_CHECKING:
    import requests
    from urllib3.response import BaseHTTPResponse

    from bob_acp.log import Logger


MAX_ANSWER = MAX_FRAME  # bytes of one HTTP answer (JSON or event stream), as a stdio frame


class McpError(Exception):
    """One line saying what went wrong with a server."""


class ServerGone(McpError):
    """The server's end of the connection closed while a request waited."""


class Connection:
    name = ""
    on_notification: Callable[[str, dict[str, Any]], None] = staticmethod(lambda method, params: None)
    on_gone: Callable[[str], None] = staticmethod(lambda why: None)  # the server went away by itself: why
    _hidden: list[str] = []  # what an error line must never show (a URL's tokens)

    def scrub(self, text: str) -> str:
        for secret in self._hidden:
            text = text.replace(secret, "[redacted]")
        return text

    def request(self, method: str, params: dict[str, Any], timeout: float, cancel: Cancel | None = None) -> dict[str, Any]:
        raise NotImplementedError

    def notify(self, method: str, params: dict[str, Any] | None = None) -> None:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError

    @property
    def alive(self) -> bool:
        raise NotImplementedError


_open: Live[Connection] = Live()  # every connection not closed yet, for the end of Bob


def opened(connection: Connection) -> None:
    """Register a connection; one opened after close_all() (a handshake racing Bob's end) is
    closed at once."""
    if not _open.add(connection):
        connection.close()
        raise McpError("Bob is shutting down")


def closed(connection: Connection) -> None:
    _open.discard(connection)


def close_all(timeout: float = 3.0) -> None:
    """Bob is ending: close every connection (servers still in their handshake too), in parallel."""
    held = _open.end()
    threads = [threading.Thread(target=c.close, name=f"bob-mcp-close-{c.name}", daemon=True) for c in held]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout)


def error_of(what: str, error: object) -> McpError:
    message = error.get("message") if isinstance(error, dict) else error
    return McpError(f"{what}: {jsontext.clean(str(message))[:300]}")


def result_of(what: str, result: object) -> dict[str, Any]:
    if not isinstance(result, dict):
        raise McpError(f"{what}: the answer is not an object")
    return result


def settle(sent: Sent, what: str, cancel: Cancel | None, timeout: float) -> dict[str, Any]:
    """The result of a settled request, or why it ended early (the user's cancel, mcp.timeout,
    the server gone), in the words every transport uses."""
    if cancel is not None and cancel.is_set():
        raise Cancelled()
    if sent.timed_out:
        raise McpError(f"{what}: no answer within {timeout:g} s (mcp.timeout)")
    if sent.cancelled():
        raise ServerGone(f"{what}: the server went away")
    try:
        return result_of(what, sent.result())
    except PeerError as exc:
        raise error_of(what, exc.error) from None


def refused(response: requests.Response) -> str | None:
    """Why an HTTP answer is no answer to read (a redirect, an error status), in the words every
    HTTP transport uses, or None."""
    if 300 <= response.status_code < 400:
        try:
            where = urlsplit(response.headers.get("Location") or "")
            target = f" to {where.scheme}://{where.hostname}" if where.hostname else ""
        except ValueError:
            target = ""
        return (f"the server redirected (HTTP {response.status_code}){target}; Bob does not follow redirects (they "
                "would carry the server's headers elsewhere): configure the final URL")
    if response.status_code >= 400:
        return f"HTTP {response.status_code}"
    return None


def too_long(limit: int) -> McpError:
    return McpError(f"the answer exceeds {limit // (1024 * 1024)} MiB: not read further")


def read_capped(raw: BaseHTTPResponse, method: str) -> bytes:
    """A whole answer body, read in chunks and refused past MAX_ANSWER bytes (never held whole)."""
    chunks: list[bytes] = []
    total = 0
    while True:
        chunk = raw.read(65536, decode_content=True)
        if not chunk:
            return b"".join(chunks)
        total += len(chunk)
        if total > MAX_ANSWER:
            raise McpError(f"{method}: {too_long(MAX_ANSWER)}")
        chunks.append(chunk)


class EndpointConnection(Connection):
    """A server spoken to through Bob's own domain-free JSON-RPC endpoint (its requests, ping
    served, the tools-changed notification in order), whatever carries the frames."""

    _endpoint: Endpoint
    _log: Logger

    @staticmethod
    def endpoint_for(output: Writer | Callable[[dict[str, Any]], None], log: Logger, owner: Connection) -> Endpoint:
        """The endpoint: over a byte stream (a Writer of lines, a stdio server), or by messages
        (a consumer of each message of ours, an HTTP server)."""
        changed = "notifications/tools/list_changed"
        # In order: a server that adds a tool says so before answering the call that added it,
        # and the turn must see the change before its next model call.
        return Endpoint(output, {"ping": Route(lambda _params: {})},
                        {changed: lambda params: owner.on_notification(changed, params)}, log,
                        in_order=frozenset({changed}))

    def request(self, method: str, params: dict[str, Any], timeout: float, cancel: Cancel | None = None) -> dict[str, Any]:
        return self.awaited(self._endpoint.request(method, params), method, timeout, cancel)

    def awaited(self, sent: Sent, method: str, timeout: float, cancel: Cancel | None) -> dict[str, Any]:
        """The result of a request sent: waited for until its answer, mcp.timeout or the user's
        cancel (each of which tells the server), in the words every transport uses."""

        def cancelled() -> None:
            if sent.cancel():
                self.cancel_notice(sent.id)

        unsubscribe = cancel.subscribe(cancelled) if cancel is not None else (lambda: None)
        try:
            sent.settled(timeout)  # (mcp.timeout: no timer thread; a cancel settles it at once)
        finally:
            unsubscribe()
        if sent.timed_out:
            self.cancel_notice(sent.id, f"no answer within {timeout:g} s")  # (as MCP asks of a timeout)
        return settle(sent, method, cancel, timeout)

    def cancel_notice(self, request_id: int, reason: str = "cancelled by the user") -> None:
        """Tell the server that a request was given up (on the cancelling thread: quick)."""
        self.notify("notifications/cancelled", {"requestId": request_id, "reason": reason})

    # ---- what an HTTP transport hands the endpoint -------------------------------------------------

    def deliver(self, data: str) -> object:
        """One message the server sent as an event or a body, to the endpoint; the message, or
        None when it is not JSON (passed over: the endpoint would answer it with an error no one
        reads)."""
        try:
            message = jsontext.loads(data)
        except (jsontext.JSONDecodeError, RecursionError):
            self._log.debug(f"[mcp] {self.name}: a message that is not JSON passed over")
            return None
        self._endpoint.consume(message, len(data))
        return message

    def error_answer(self, msg_id: int, problem: str) -> None:
        """A request of ours answered here with what went wrong on its way (a POST refused or
        broken): the caller reads it as the server's error, in the same words."""
        self._endpoint.consume(error_frame(msg_id, RpcError(INTERNAL_ERROR, problem)))

    def notify(self, method: str, params: dict[str, Any] | None = None) -> None:
        self._endpoint.notify(method, params if params is not None else {})
