"""The HTTP MCP transports in-process: their messages go through Bob's JSON-RPC endpoint by
messages (no OS pipe), a request waits on its own answer with mcp.timeout (no timer thread), and
a request given up (the timeout, the user's cancel) tells the server and ends its POST."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time

import pytest

from bob_acp import log as bob_log
from bob_acp.cancel import Cancel
from bob_acp.exceptions import Cancelled
from bob_acp.mcp.connection import McpError
from bob_acp.mcp.http import HttpConnection
from bob_acp.mcp.sse import SseConnection

SERVER = os.path.join(os.path.dirname(__file__), "mcp_server.py")


@pytest.fixture(params=["http", "http+events", "sse"])
def web(request, tmp_path):
    """(a connection to a fake MCP server of that transport, what the server received)."""
    kind = request.param
    port_file, record = tmp_path / "port", tmp_path / "record.jsonl"
    option = ["--legacy-sse", str(port_file)] if kind == "sse" else ["--http", str(port_file)]
    proc = subprocess.Popen([sys.executable, SERVER, *option, "--record", str(record),
                             *(["--sse"] if kind == "http+events" else [])])
    connection = None
    try:
        wait_until(lambda: port_file.exists() or proc.poll() is not None)
        bob_log.setup("error")
        log = bob_log.get("test")
        base = f"http://127.0.0.1:{port_file.read_text()}"
        if kind == "sse":
            connection = SseConnection("web", base + "/sse", {}, log, 10)
        else:
            connection = HttpConnection("web", base + "/mcp", {}, log, 10)
        connection.request("initialize", {"protocolVersion": "2025-11-25", "capabilities": {},
                                          "clientInfo": {"name": "t", "version": "1"}}, 10)
        connection.notify("notifications/initialized")

        def received() -> list[dict]:
            lines = record.read_text().splitlines() if record.exists() else []
            return [entry for entry in map(json.loads, lines) if "method" in entry]
        yield connection, received
    finally:
        if connection is not None:
            connection.close()
        proc.terminate()
        proc.wait(10)


def wait_until(condition, timeout=30.0):
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "not within the time"
        time.sleep(0.02)


def pipes() -> int:
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            count += os.readlink(f"/proc/self/fd/{fd}").startswith("pipe:")
        except OSError:
            pass
    return count


def posts_alive() -> list[str]:
    """The HTTP transport's POSTs of requests under way (the SSE transport's one poster, which
    lives as long as its connection, is not one)."""
    return [t.name for t in threading.enumerate() if t.name.startswith("bob-mcp-web-post #") and t.is_alive()]


def slow_call(connection, cancel=None) -> tuple[threading.Thread, list[BaseException]]:
    """The server's slow tool called on a thread of its own: (the thread, what the call raised)."""
    outcome: list[BaseException] = []

    def call() -> None:
        try:
            connection.request("tools/call", {"name": "slow", "arguments": {}}, 60, cancel)
        except BaseException as exc:
            outcome.append(exc)

    caller = threading.Thread(target=call, daemon=True)
    caller.start()
    return caller, outcome


def test_requests_go_by_messages_with_no_pipe(web):
    connection, received = web
    before = pipes()
    assert connection.request("tools/call", {"name": "echo", "arguments": {"message": "hi"}}, 10) == {
        "content": [{"type": "text", "text": "echo: hi"}], "isError": False}
    assert connection.request("tools/call", {"name": "add", "arguments": {"a": 2, "b": 3}}, 10)["content"][0]["text"] == "5"
    assert pipes() == before == pipes()  # (the connection, open since the fixture, holds none either)
    methods = [m["method"] for m in received()]
    assert methods[:3] == ["initialize", "notifications/initialized", "tools/call"]


def test_a_request_past_its_timeout_tells_the_server_without_a_timer_thread(web):
    connection, received = web
    seen: list[str] = []
    stop = threading.Event()

    def watch() -> None:  # every thread alive while the request waits: a Timer would be one
        while not stop.is_set():
            seen.extend(type(t).__name__ for t in threading.enumerate())
            time.sleep(0.05)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        started = time.monotonic()
        with pytest.raises(McpError, match=r"tools/call: no answer within 1 s \(mcp.timeout\)"):
            connection.request("tools/call", {"name": "slow", "arguments": {}}, 1)
        assert time.monotonic() - started < 10
    finally:
        stop.set()
        watcher.join(5)
    assert seen and "Timer" not in seen
    wait_until(lambda: any(m["method"] == "notifications/cancelled" for m in received()))
    call = [m for m in received() if m["method"] == "tools/call"][-1]
    notice = [m for m in received() if m["method"] == "notifications/cancelled"][-1]
    assert notice["params"] == {"requestId": call["id"], "reason": "no answer within 1 s"}
    wait_until(lambda: posts_alive() == [])  # the POST that waited ended with it
    assert connection.request("tools/call", {"name": "echo", "arguments": {"message": "after"}}, 10)[
        "content"][0]["text"] == "echo: after"


def test_a_cancel_ends_the_request_at_once_and_tells_the_server(web):
    connection, received = web
    cancel = Cancel()
    caller, outcome = slow_call(connection, cancel)
    wait_until(lambda: any(m["method"] == "tools/call" for m in received()))
    cancel.set()
    caller.join(10)
    assert not caller.is_alive() and isinstance(outcome[0], Cancelled)
    wait_until(lambda: any(m["method"] == "notifications/cancelled" for m in received()))
    notice = [m for m in received() if m["method"] == "notifications/cancelled"][-1]
    assert notice["params"]["reason"] == "cancelled by the user"
    wait_until(lambda: posts_alive() == [])


def test_a_closed_connection_answers_what_waited_and_refuses_more(web):
    connection, received = web
    caller, outcome = slow_call(connection)
    wait_until(lambda: any(m["method"] == "tools/call" for m in received()))
    connection.close()
    caller.join(10)
    assert not caller.is_alive() and isinstance(outcome[0], McpError)  # (the server went away, or its stream ended)
    assert not connection.alive


def test_a_request_given_up_ends_its_post_though_the_server_keeps_its_stream_open(tmp_path):
    """The server begins the answer's event stream and then says nothing for 30 s: the request
    past its timeout ends the POST at once, not when the server speaks or the connection's read
    timeout (30 s here) comes."""
    port_file = tmp_path / "port"
    proc = subprocess.Popen([sys.executable, SERVER, "--http", str(port_file), "--sse"])
    connection = None
    try:
        wait_until(lambda: port_file.exists() or proc.poll() is not None)
        bob_log.setup("error")
        connection = HttpConnection("web", f"http://127.0.0.1:{port_file.read_text()}/quiet", {}, bob_log.get("t"), 30)
        connection.request("initialize", {"protocolVersion": "2025-11-25", "capabilities": {},
                                          "clientInfo": {"name": "t", "version": "1"}}, 10)
        with pytest.raises(McpError, match="no answer within 1 s"):
            connection.request("tools/call", {"name": "echo", "arguments": {"message": "x"}}, 1)
        wait_until(lambda: posts_alive() == [], timeout=15)  # (left alone, it would end after 30 s)
    finally:
        if connection is not None:
            connection.close()
        proc.terminate()
        proc.wait(10)
