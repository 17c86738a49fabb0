"""HTTP streaming pieces that the model providers and the MCP client share (over `requests`):
a POST that a cancel abandons at once, lines as they arrive within a size cap, server-sent
events, and the socket shut down under a blocked read. Nothing here knows models or MCP: each
caller says what its errors are.
"""

from __future__ import annotations

import socket
import threading
import time
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator

from bob_acp import __version__, threads
from bob_acp.cancel import Cancel
from bob_acp.exceptions import Cancelled

if TYPE_CHECKING:
    import requests
    from urllib3.response import BaseHTTPResponse


READ_CHUNK = 65536
USER_AGENT = f"bob-acp/{__version__}"  # what servers and their logs see (a configured header wins)


def new_session() -> requests.Session:
    """A requests session that names Bob (not python-requests) to the servers it asks, and never
    follows a redirect to another origin: the headers (a key), the body (the conversation) and
    the next requests would go there. Such an answer is handed back as it is (`redirected`)."""
    import requests  # lazy: start-up never pays for it

    class Session(requests.Session):
        def get_redirect_target(self, resp: Any) -> str | None:
            target = super().get_redirect_target(resp)
            if target is None:
                return None
            from urllib.parse import urljoin

            return target if same_origin(resp.url, urljoin(resp.url, target)) else None

    session = Session()
    session.headers["User-Agent"] = USER_AGENT
    return session


def origin(url: str) -> tuple[str, str, int]:
    """(scheme, host, port) of `url` as the connection is made (urllib3's parser, which requests
    connects with); ValueError for a URL the parsers could read differently: a backslash, user
    information, a control character or a space, a host the standard parser names otherwise."""
    from urllib.parse import urlsplit

    from urllib3.util import parse_url

    if "\\" in url or any(ord(c) < 0x21 or ord(c) == 0x7F for c in url):
        raise ValueError("a URL with a backslash, a space or a control character")
    try:
        connects, standard = parse_url(url), urlsplit(url)
        port = connects.port or {"http": 80, "https": 443}.get(connects.scheme or "", 0)
        other = standard.port or {"http": 80, "https": 443}.get(standard.scheme, 0)
    except ValueError as exc:
        raise ValueError(f"an unreadable URL ({exc})") from None
    if connects.auth is not None or standard.username is not None or standard.password is not None:
        raise ValueError("a URL with user information (user:password@)")
    found = ((connects.scheme or "").lower(), (connects.host or "").lower(), port)
    if found != (standard.scheme.lower(), (standard.hostname or "").lower(), other) or not found[1]:
        raise ValueError("a URL whose host the parsers read differently")
    return found


def same_origin(a: str, b: str) -> bool:
    """Whether two URLs reach the same server (scheme, host and port), each read as it connects;
    a URL that could be read two ways is no origin at all."""
    try:
        return origin(a) == origin(b)
    except ValueError:
        return False


def redirected(response: Any) -> str | None:
    """Where a redirect Bob did not follow leads (None: the answer is no redirect)."""
    if not 300 <= response.status_code < 400 or "location" not in response.headers:
        return None
    from urllib.parse import urljoin

    return public_url(urljoin(response.url, response.headers["location"]))


def post(session: requests.Session, url: str, cancel: Cancel, on_abandon: Callable[[], None] | None = None, **kw: Any) -> Any:
    """session.post(url, **kw), waited for in a way a cancel ends at once: the request runs on a
    thread of its own, and a cancel before the answer's headers arrive (a model still queueing
    or thinking, a server that accepted the connection and says nothing) raises Cancelled
    without waiting. The abandoned request closes its own answer when it comes, and
    `on_abandon()` runs on that thread once it is over (the session may then be reused)."""
    lock = threading.Lock()
    state: dict[str, Any] = {}
    done = threading.Event()

    def work() -> None:
        try:
            outcome: tuple[str, Any] = ("response", session.post(url, **kw))
        except BaseException as exc:  # handed to the waiter, which raises it
            outcome = ("error", exc)
        with lock:
            state[outcome[0]] = outcome[1]
            abandoned = state.get("abandoned", False)
        done.set()
        if abandoned:
            if outcome[0] == "response":
                outcome[1].close()
            if on_abandon is not None:
                on_abandon()

    unsubscribe = cancel.subscribe(done.set)
    try:
        threads.start(work, "bob-http-post")
    except threads.ThreadLimit:
        unsubscribe()
        raise
    try:
        done.wait()
    finally:
        unsubscribe()
    with lock:
        if "response" not in state and "error" not in state:
            state["abandoned"] = True
            raise Cancelled()
    if "error" in state:
        raise state["error"]
    return state["response"]


def arriving_lines(raw: BaseHTTPResponse, limit: int, too_long: Callable[[int], Exception],
                   per_line: bool = False) -> Iterator[bytes]:
    """Lines as soon as they arrive (requests' iter_lines waits for whole reads; a stream of
    model tokens must not). urllib3 2's read1 returns what is there, chunked or not. CR, LF and
    CRLF all end a line, as SSE says. Line ends are looked for only in the bytes just read, so a
    body without one costs linear time. Past `limit` bytes in all (`per_line`: in one line, for
    a stream that lasts), `too_long(limit)` is raised."""
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
        if per_line:
            total = len(lines[-1])
        yield from lines[:-1]
    if pending:
        yield b"".join(pending)


def events(lines: Iterable[str], idle_timeout: float | None = None,
           idle_error: Callable[[float], Exception] | None = None,
           clock: Callable[[], float] = time.monotonic) -> Iterator[tuple[str, str]]:
    """Server-sent events: (event name, data) for each; multi-line data joined with newlines;
    comments skipped. `idle_timeout`: seconds without an event before `idle_error(idle_timeout)`
    is raised, however many keep-alive comments (`: ping`) a proxy sends meanwhile."""
    name, data = "", []  # type: tuple[str, list[str]]
    last_event = clock()
    for line in lines:
        if not line:
            if data:
                yield name or "message", "\n".join(data)
                last_event = clock()
            name, data = "", []
            continue
        if idle_timeout is not None and idle_error is not None and clock() - last_event > idle_timeout:
            raise idle_error(idle_timeout)
        if line.startswith(":"):
            continue
        field, _, value = line.partition(":")
        if value.startswith(" "):
            value = value[1:]
        if field == "data":
            data.append(value)
        elif field == "event":
            name = value
    if data:
        yield name or "message", "\n".join(data)


def shutdown(response: object) -> None:
    """Shut the answer's socket down, so a read blocked on it returns at once."""
    sock = _socket_of(response)
    if sock is not None:
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


def no_read_timeout(response: object) -> None:
    """From now on, reads of this answer wait as long as it takes (a stream that lasts, whose
    headers came within the request's read timeout)."""
    sock = _socket_of(response)
    if sock is not None:
        try:
            sock.settimeout(None)
        except OSError:
            pass


def _socket_of(response: object) -> Any:
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


def url_secrets(url: str) -> list[str]:
    """The parts of a URL where tokens travel (query, fragment, user, password): never to be shown
    in a log or an error line."""
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(url)
        found = (parts.query, parts.fragment, parts.password, parts.username)
    except ValueError:
        return []
    return [s for s in found if s and len(s) >= 4]


def public_url(url: str) -> str:
    """`url` as it may be shown and logged: scheme, host, port and path; no user, password,
    query or fragment (where tokens travel)."""
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        port = f":{parts.port}" if parts.port else ""
    except ValueError:
        return "(invalid URL)"
    if ":" in host:
        host = f"[{host}]"
    return f"{parts.scheme}://{host}{port}{parts.path}"
