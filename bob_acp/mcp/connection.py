"""The two ways to reach an MCP server: stdio (a child process, spoken to through Bob's own
domain-free JSON-RPC endpoint) and streamable HTTP (over requests). Both offer the same small
interface: request() with a timeout and a cancel, notify(), close()."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
from typing import TYPE_CHECKING, Any, Callable
from urllib.parse import urlsplit

from bob_acp import jsontext
from bob_acp.cancel import Cancel
from bob_acp.exceptions import Cancelled
from bob_acp.jsonrpc.endpoint import Endpoint, PeerError, Route, Sent
from bob_acp.jsonrpc.streams import MAX_FRAME, Writer
from bob_acp.providers import httpio
from bob_acp.sandbox import children
from bob_acp.threads import Live

if TYPE_CHECKING:
    import requests
    from urllib3.response import BaseHTTPResponse
    
    from bob_acp.log import Logger


MAX_ANSWER = MAX_FRAME  # bytes of one HTTP answer (JSON or event stream), as a stdio frame
STDERR_LINES, STDERR_WINDOW, STDERR_LINE = 100, 10.0, 2000  # a server's stderr in the log


class McpError(Exception):
    """One line saying what went wrong with a server."""


class Connection:
    name = ""
    on_notification: Callable[[str, dict[str, Any]], None] = staticmethod(lambda method, params: None)

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


def _opened(connection: Connection) -> None:
    """Register a connection; one opened after close_all() (a handshake racing Bob's end) is
    closed at once."""
    if not _open.add(connection):
        connection.close()
        raise McpError("Bob is shutting down")


def _closed(connection: Connection) -> None:
    _open.discard(connection)


def close_all(timeout: float = 3.0) -> None:
    """Bob is ending: close every connection (servers still in their handshake too), in parallel."""
    held = _open.end()
    threads = [threading.Thread(target=c.close, name=f"bob-mcp-close-{c.name}", daemon=True) for c in held]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout)


def _interruption(what: str, timed_out: threading.Event, cancel: Cancel | None, timeout: float) -> Exception | None:
    """Why a request ended early, when it did: the user's cancel, or mcp.timeout."""
    if cancel is not None and cancel.is_set():
        return Cancelled()
    if timed_out.is_set():
        return McpError(f"{what}: no answer within {timeout:g} s (mcp.timeout)")
    return None


def _error(what: str, error: object) -> McpError:
    message = error.get("message") if isinstance(error, dict) else error
    return McpError(f"{what}: {jsontext.clean(str(message))[:300]}")


def _result(what: str, result: object) -> dict[str, Any]:
    if not isinstance(result, dict):
        raise McpError(f"{what}: the answer is not an object")
    return result


def _settle(sent: Sent, what: str, timed_out: threading.Event, cancel: Cancel | None, timeout: float) -> dict[str, Any]:
    problem = _interruption(what, timed_out, cancel, timeout)
    if problem is not None:
        raise problem
    if sent.cancelled():
        raise McpError(f"{what}: the server went away")
    try:
        return _result(what, sent.result())
    except PeerError as exc:
        raise _error(what, exc.error) from None


def _too_long(limit: int) -> McpError:
    return McpError(f"the answer exceeds {limit // (1024 * 1024)} MiB: not read further")


def _read_capped(raw: BaseHTTPResponse, method: str) -> bytes:
    """A whole answer body, read in chunks and refused past MAX_ANSWER bytes (never held whole)."""
    chunks: list[bytes] = []
    total = 0
    while True:
        chunk = raw.read(65536, decode_content=True)
        if not chunk:
            return b"".join(chunks)
        total += len(chunk)
        if total > MAX_ANSWER:
            raise McpError(f"{method}: {_too_long(MAX_ANSWER)}")
        chunks.append(chunk)


class StdioConnection(Connection):
    """A server started as a child process in its own process group (so no process of it
    outlives its session), stdin and stdout for the protocol, stderr to Bob's log."""

    def __init__(self, name: str, command: str, args: list[str], env: dict[str, Any], cwd: str, log: Logger):
        self.name = name
        self._log = log
        self._closing = False
        self._label = children.new_label("mcp")
        self.proc = children.spawn([command, *args], self._label, env=env, stdin=subprocess.PIPE,
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=cwd)
        # (PIPE: each is there; named, so the type checker knows)
        assert self.proc.stdin is not None and self.proc.stdout is not None and self.proc.stderr is not None
        self._stdin, self._stdout, self._stderr = self.proc.stdin, self.proc.stdout, self.proc.stderr
        self._writer = Writer(self._stdin.fileno(), on_broken=self._gone)
        changed = "notifications/tools/list_changed"
        # In order: a server that adds a tool says so before answering the call that added it,
        # and the turn must see the change before its next model call.
        self._endpoint = Endpoint(self._writer, {"ping": Route(lambda _params: {})},
                                  {changed: lambda params: self.on_notification(changed, params)}, log,
                                  in_order=frozenset({changed}))
        self._served = threading.Thread(target=self._serve, name=f"bob-mcp-{name}", daemon=True)
        self._served.start()
        threading.Thread(target=self._drain_stderr, name=f"bob-mcp-{name}-stderr", daemon=True).start()
        _opened(self)

    def _serve(self) -> None:
        self._endpoint.serve(self._stdout, drain_timeout=0.1)

    def _gone(self) -> None:
        self._endpoint.stop()

    def _drain_stderr(self) -> None:
        """The server's stderr, to the log at a bounded rate (a chatty server cannot fill the
        log or the disk): at most STDERR_LINES lines of STDERR_LINE characters per
        STDERR_WINDOW seconds, and a line saying how many were left out."""
        import time

        window_start, logged, dropped = time.monotonic(), 0, 0
        stream = self._stderr
        while True:
            raw = stream.readline(STDERR_LINE * 4)
            if not raw:
                break
            now = time.monotonic()
            if now - window_start >= STDERR_WINDOW:
                if dropped:
                    self._log.info(f"[mcp] {self.name}: {dropped} stderr line(s) not logged "
                                   f"(more than {STDERR_LINES} in {STDERR_WINDOW:g} s)")
                window_start, logged, dropped = now, 0, 0
            if logged >= STDERR_LINES:
                dropped += 1
                continue
            line = jsontext.clean(raw.decode("utf-8", "replace").rstrip("\n"))[:STDERR_LINE]
            if line:
                logged += 1
                self._log.info(f"[mcp] {self.name}: {line}")
        if dropped:
            self._log.info(f"[mcp] {self.name}: {dropped} stderr line(s) not logged")

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None and not self._endpoint.closed

    def request(self, method: str, params: dict[str, Any], timeout: float, cancel: Cancel | None = None) -> dict[str, Any]:
        sent = self._endpoint.request(method, params)
        timed_out = threading.Event()

        def expire() -> None:
            timed_out.set()
            sent.cancel()

        def cancelled() -> None:
            sent.cancel()
            self.notify("notifications/cancelled", {"requestId": sent.id, "reason": "cancelled by the user"})

        timer = threading.Timer(timeout, expire)
        timer.daemon = True
        timer.start()
        unsubscribe = cancel.subscribe(cancelled) if cancel is not None else (lambda: None)
        try:
            sent.settled()
        finally:
            timer.cancel()
            unsubscribe()
        return _settle(sent, method, timed_out, cancel, timeout)

    def notify(self, method: str, params: dict[str, Any] | None = None) -> None:
        self._endpoint.notify(method, params if params is not None else {})

    def close(self) -> None:
        """Close stdin, give the server a moment, then end its whole process group."""
        if self._closing:
            return
        self._closing = True
        try:
            self._stdin.close()
        except OSError:
            pass
        self._endpoint.stop()
        for sig, grace in ((None, 0.2), (signal.SIGTERM, 0.5), (signal.SIGKILL, 2.0)):
            if sig is not None:
                try:
                    os.killpg(self.proc.pid, sig)
                except (ProcessLookupError, PermissionError):
                    pass
            try:
                self.proc.wait(grace)
                break
            except subprocess.TimeoutExpired:
                continue
        try:  # children it left in its group go too
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        if self.proc.poll() is not None:
            children.ended(self.proc)
        children.end_orphans(self._label)  # and those that left its group
        self._writer.close(0.1)
        _closed(self)


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
        _opened(self)

    def scrub(self, text: str) -> str:
        for secret in self._hidden:
            text = text.replace(secret, "[redacted]")
        return text

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
                raise _interruption(method, timed_out, cancel, timeout) or Cancelled() from None
            except McpError as exc:  # an answer cut short by the cancel or the timeout says so
                raise _interruption(method, timed_out, cancel, timeout) or exc from None
            except (OSError, ValueError) as exc:  # requests' exceptions are OSErrors too
                kind = f"{type(exc).__name__}: " if isinstance(exc, requests.exceptions.RequestException) else ""
                problem = _interruption(method, timed_out, cancel, timeout)
                raise (problem or McpError(self.scrub(f"{method}: {kind}{jsontext.clean(str(exc))[:200]}"))) from None
        finally:
            timer.cancel()
            unsubscribe()
        if "error" in answer:
            raise _error(method, answer["error"])
        return _result(method, answer.get("result"))

    def _answer(self, response: requests.Response, msg_id: int, method: str) -> dict[str, Any]:
        if 300 <= response.status_code < 400:
            where = urlsplit(response.headers.get("Location") or "")
            target = f" to {where.scheme}://{where.hostname}" if where.hostname else ""
            raise McpError(f"{method}: the server redirected (HTTP {response.status_code}){target}; Bob does not "
                           "follow redirects (they would carry the server's headers elsewhere): configure the "
                           "final URL")
        if response.status_code >= 400:
            raise McpError(f"{method}: HTTP {response.status_code}")
        session = response.headers.get("Mcp-Session-Id")
        if session and method == "initialize":
            self._headers["Mcp-Session-Id"] = session
        kind = response.headers.get("Content-Type", "")
        if kind.startswith("text/event-stream"):
            return self._from_events(response, msg_id)
        try:
            message = jsontext.loads(_read_capped(response.raw, method))
        except (jsontext.JSONDecodeError, RecursionError):
            raise McpError(f"{method}: the answer is not JSON") from None
        if not isinstance(message, dict):
            raise McpError(f"{method}: the answer is not a JSON-RPC message")
        return message

    def _from_events(self, response: requests.Response, msg_id: int) -> dict[str, Any]:
        lines = (raw.decode("utf-8", "replace") for raw in httpio.arriving_lines(response.raw, MAX_ANSWER, _too_long))
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
        _closed(self)
