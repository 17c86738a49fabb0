"""Client MCP servers (issue 19) through the real bob-acp, with the test server of
tests/mcp_server.py over stdio and HTTP, and the fake model calling its tools."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid

import pytest
from bob_client import allow, allow_always, message_text, updates
from procs import wait_gone, wait_present

pytestmark = pytest.mark.e2e

SERVER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "mcp_server.py")


def marker():
    """Digits (it ends up in `sleep 300.<marker>`), rare enough to find in /proc."""
    return str(int(uuid.uuid4().hex[:10], 16))[:10]


def stdio(name="test", *extra, mark=None):
    return {"name": name, "command": sys.executable, "args": [SERVER, *extra, "--marker", mark or marker()], "env": []}


def calls(*names_and_args, end="done"):
    return [{"replies": [{"tool_calls": [{"name": n, "arguments": a}]} for n, a in names_and_args] + [{"text": end}]}]


def test_without_mcp_enabled_servers_are_counted_and_no_process_starts(spawn_bob, workdir):
    mark = marker()
    bob = spawn_bob({})
    init = bob.initialize()
    assert init["agentCapabilities"]["mcpCapabilities"] == {"http": False, "sse": False}
    bob.result("session/new", {"cwd": str(workdir), "mcpServers": [stdio(mark=mark), stdio("two", mark=mark)]})
    bob.wait_stderr("2 MCP server(s) ignored")
    assert not wait_present_quietly(mark)


def wait_present_quietly(mark, seconds=0.5):
    try:
        wait_present(mark, timeout=seconds)
        return True
    except AssertionError:
        return False


def test_http_and_sse_are_advertised_only_with_mcp_enabled(spawn_bob):
    bob = spawn_bob({"mcp": {"enabled": True}})
    assert bob.initialize()["agentCapabilities"]["mcpCapabilities"] == {"http": True, "sse": True}


def test_the_servers_tools_reach_the_model_and_run_behind_the_permission_gate(spawn_bob, server, workdir):
    server.enqueue(server.openai_tool_call("mcp__test__echo", {"message": "hi"}, call_id="m1"),
                   server.openai_tool_call("mcp__test__fail", {}, call_id="m2"),
                   server.openai_tool_call("mcp__test__image", {}, call_id="m3"),
                   server.openai_text("all done"))
    bob = spawn_bob({"model": {"baseUrl": server.url + "/v1", "retries": 0}, "mcp": {"enabled": True}})
    bob.initialize()
    sid = bob.result("session/new", {"cwd": str(workdir), "mcpServers": [stdio()]})["sessionId"]
    bob.read_frame()  # available_commands_update
    asked = []
    response, frames = bob.prompt(sid, "use them", answer=lambda req: asked.append(req["params"]["toolCall"]) or allow(req))
    assert response["result"]["stopReason"] == "end_turn"
    names = [t["function"]["name"] for t in server.requests[0]["body"]["tools"]]
    assert names[:5] == ["bash", "read_file", "write_file", "edit_file", "read_skill"]
    assert {"mcp__test__echo", "mcp__test__add", "mcp__test__slow", "mcp__test__weird_name_with_spaces",
            "mcp__test__spawn"} <= set(names)  # both pages of tools/list
    echo = next(t["function"] for t in server.requests[0]["body"]["tools"] if t["function"]["name"] == "mcp__test__echo")
    assert echo["description"] == "Say the message back." and echo["parameters"]["required"] == ["message"]
    system = server.requests[0]["body"]["messages"][0]["content"]
    assert "mcp__test__echo" in system and "Say the message back" not in system  # by name only
    assert [a["title"] for a in asked] == ["test: echo", "test: fail", "test: image"]
    first = updates(frames, "tool_call")[0]
    assert first["kind"] == "read" and updates(frames, "tool_call")[1]["kind"] == "execute"
    finals = [u for u in updates(frames, "tool_call_update") if u.get("status") in ("completed", "failed")]
    assert [u["status"] for u in finals] == ["completed", "failed", "completed"]
    assert finals[0]["rawOutput"]["output"] == "echo: hi"
    assert finals[2]["rawOutput"]["output"] == "a picture:\n[image: image/png, about 5 bytes, not shown]"
    results = [m["content"] for m in server.requests[-1]["body"]["messages"] if m["role"] == "tool"]
    assert results == ["echo: hi", "it broke", "a picture:\n[image: image/png, about 5 bytes, not shown]"]


def test_allow_always_covers_an_mcp_tool_by_name_or_by_call(mcp_bob):
    turns = calls(("mcp__test__echo", {"message": "a"}), ("mcp__test__echo", {"message": "b"}),
                  ("mcp__test__echo", {"message": "a"}))
    bob, sid = mcp_bob(turns, [stdio()])
    asked = []
    bob.prompt(sid, "go", answer=lambda req: asked.append(req) or allow_always(req))
    assert len(asked) == 1
    bob2, sid2 = mcp_bob(turns, [stdio()], permissions={"allowAlways": "command"})
    asked2 = []
    bob2.prompt(sid2, "go", answer=lambda req: asked2.append(req) or allow_always(req))
    assert len(asked2) == 2  # "b" is another call; the second "a" is remembered


def test_list_changed_refreshes_the_tools_before_the_next_model_call(spawn_bob, server, workdir):
    server.enqueue(server.openai_tool_call("mcp__test__grow", {}, call_id="g"),
                   server.openai_tool_call("mcp__test__extra", {}, call_id="e"), server.openai_text("ok"))
    bob = spawn_bob({"model": {"baseUrl": server.url + "/v1", "retries": 0}, "mcp": {"enabled": True},
                     "permissions": {"mode": "allow-all"}})
    bob.initialize()
    sid = bob.result("session/new", {"cwd": str(workdir), "mcpServers": [stdio()]})["sessionId"]
    _, frames = bob.prompt(sid, "grow")
    names = [[t["function"]["name"] for t in r["body"]["tools"]] for r in server.requests]
    assert "mcp__test__extra" not in names[0] and "mcp__test__extra" in names[1]
    assert updates(frames, "tool_call_update")[-1]["rawOutput"]["output"] == "extra tool ran"


def test_a_cancel_tells_the_server_and_ends_the_turn_at_once(mcp_bob, tmp_path):
    record = tmp_path / "record.jsonl"
    bob, sid = mcp_bob(calls(("mcp__test__slow", {})), [stdio("test", "--record", str(record))],
                       permissions={"mode": "allow-all"})
    msg_id = bob.request_async("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "go"}]})
    while not any(f.get("params", {}).get("update", {}).get("status") == "in_progress" for f in bob.frames):
        bob.read_frame()
    bob.notify("session/cancel", {"sessionId": sid})
    response, _ = bob.wait_response(msg_id, timeout=10)  # the tool would take 60 s
    assert response["result"]["stopReason"] == "cancelled"
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        received = [json.loads(line) for line in record.read_text().splitlines()]
        if any(r.get("cancelled") is not None for r in received):
            break
        time.sleep(0.02)
    calls_made = [r for r in received if r.get("method") == "tools/call"]
    cancels = [r for r in received if r.get("method") == "notifications/cancelled"]
    assert cancels and cancels[0]["params"]["requestId"] == calls_made[0]["id"]


def test_a_call_past_mcp_timeout_is_a_failed_result_the_model_reads(mcp_bob):
    bob, sid = mcp_bob(calls(("mcp__test__slow", {})), [stdio()], mcp={"timeout": 1},
                       permissions={"mode": "allow-all"})
    response, frames = bob.prompt(sid, "go", timeout=20)
    assert response["result"]["stopReason"] == "end_turn"
    final = updates(frames, "tool_call_update")[-1]
    assert final["status"] == "failed" and "no answer within 1 s (mcp.timeout)" in final["rawOutput"]["output"]


@pytest.mark.parametrize("bad, problem", [
    ({"name": "missing", "command": "/no/such/mcp-server", "args": [], "env": []}, "could not start"),
    (None, "did not answer"),  # garbage on stdout, then it exits: filled in below
])
def test_a_server_that_fails_is_one_line_and_the_session_goes_on(mcp_bob, bad, problem):
    server = bad or stdio("garbage", "--garbage")
    bob, sid = mcp_bob(calls(("mcp__test__echo", {"message": "still here"})), [server, stdio()],
                       mcp={"timeout": 3}, permissions={"mode": "allow-all"})
    chunks = [u["content"]["text"] for u in updates(bob.frames, "agent_message_chunk")]
    assert len(chunks) == 1 and chunks[0].startswith("⚠️ MCP server") and "not available" in chunks[0]
    log = bob.wait_stderr("[mcp] session")
    assert ("could not start" in log) if bad else ("garbage" in log)
    response, frames = bob.prompt(sid, "go")
    assert updates(frames, "tool_call_update")[-1]["rawOutput"]["output"] == "echo: still here"


def test_a_server_that_dies_fails_its_call_and_leaves_the_session_working(mcp_bob):
    bob, sid = mcp_bob(calls(("mcp__test__crash", {}), ("mcp__test__echo", {"message": "x"}), ("bash", {"command": "echo ok"})),
                       [stdio()], permissions={"mode": "allow-all"})
    response, frames = bob.prompt(sid, "go")
    assert response["result"]["stopReason"] == "end_turn"
    finals = [u for u in updates(frames, "tool_call_update") if u.get("status") in ("completed", "failed")]
    assert [u["status"] for u in finals] == ["failed", "failed", "completed"]
    assert "went away" in finals[0]["rawOutput"]["output"] or "gone" in finals[0]["rawOutput"]["output"]


def test_startup_is_parallel_and_bounded(mcp_bob, tmp_path):
    records = [tmp_path / f"r{n}.jsonl" for n in range(2)]
    servers = [stdio(f"slow{n}", "--slow-start", "1.5", "--record", str(records[n])) for n in range(2)]
    servers.append(stdio("never", "--no-answer"))
    started = time.monotonic()
    bob, sid = mcp_bob([{"replies": [{"text": "x"}]}], servers, mcp={"timeout": 3})
    elapsed = time.monotonic() - started
    first = [json.loads(r.read_text().splitlines()[0])["at"] for r in records]
    assert abs(first[0] - first[1]) < 1.0  # both handshakes began together, not one after the other
    assert elapsed < 15  # bounded by mcp.timeout (3 s), whatever "never" does
    chunks = [u["content"]["text"] for u in updates(bob.frames, "agent_message_chunk")]
    assert len(chunks) == 1 and "'never' did not answer within 3 s" in chunks[0]


@pytest.mark.parametrize("how", ["close", "evict", "eof", "sigterm", "sighup"])
def test_servers_and_their_children_end_with_their_session(mcp_bob, spawn_bob, how):
    mark = marker()
    extra = {"limits": {"maxSessions": 1, "sessionOverflow": "evict_oldest"}} if how == "evict" else {}
    bob, sid = mcp_bob(calls(("mcp__test__spawn", {"marker": mark})), [stdio(mark=mark)],
                       permissions={"mode": "allow-all"}, acp={"sessionHistory": how == "close"},
                       sessions={"enabled": how == "close"}, **extra)
    bob.prompt(sid, "go")
    assert len(wait_present(mark, count=2)) >= 2  # the server and the child it started
    if how == "close":
        bob.result("session/close", {"sessionId": sid})
    elif how == "evict":
        bob.new_session()
    elif how == "eof":
        bob.proc.sendeof()
        assert bob.wait(10) == 0
    else:
        os.kill(bob.pid, signal.SIGTERM if how == "sigterm" else signal.SIGHUP)
        assert bob.wait(10) == 0
    assert wait_gone(mark, timeout=10) == []


@pytest.mark.parametrize("sse", [False, True])
def test_an_http_server_answering_json_or_events(mcp_bob, tmp_path, sse):
    port_file = tmp_path / "port"
    record = tmp_path / "record.jsonl"
    proc = subprocess.Popen([sys.executable, SERVER, "--http", str(port_file), "--record", str(record),
                             *(["--sse"] if sse else [])])
    try:
        deadline = time.monotonic() + 10
        while not port_file.exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        url = f"http://127.0.0.1:{port_file.read_text()}/mcp"
        server = {"type": "http", "name": "web", "url": url, "headers": [{"name": "X-Test", "value": "1"}]}
        bob, sid = mcp_bob(calls(("mcp__web__echo", {"message": "over http"}), ("mcp__web__add", {"a": 2, "b": 3})),
                           [server], permissions={"mode": "allow-all"})
        response, frames = bob.prompt(sid, "go")
        outputs = [u["rawOutput"]["output"] for u in updates(frames, "tool_call_update") if u.get("status") == "completed"]
        assert outputs == ["echo: over http", "5"]
        assert bob.close() == 0
        received = [json.loads(line) for line in record.read_text().splitlines()]
        assert [r.get("method") for r in received if "method" in r][:3] == ["initialize", "notifications/initialized",
                                                                           "tools/list"]
        assert any("deleted" in r and r["deleted"] == "session-1" for r in received)  # the session ended
    finally:
        proc.terminate()
        proc.wait(5)


# ---- the older HTTP+SSE transport (type: sse) ----------------------------------------------------------

@pytest.fixture
def legacy_sse(tmp_path):
    """A server of MCP 2024-11-05's HTTP+SSE transport; its URL and what it received."""
    started = []

    def start(*options):
        port_file = tmp_path / f"sse-port-{len(started)}"
        record = tmp_path / f"sse-record-{len(started)}.jsonl"
        proc = subprocess.Popen([sys.executable, SERVER, "--legacy-sse", str(port_file), "--record", str(record),
                                 *options])
        started.append(proc)
        deadline = time.monotonic() + 30
        while not port_file.exists() and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.02)
        received = lambda: [json.loads(line) for line in record.read_text().splitlines()] if record.exists() else []
        return f"http://127.0.0.1:{port_file.read_text()}/sse", received
    yield start
    for proc in started:
        proc.terminate()
        proc.wait(10)


def sse(url, name="old"):
    return {"type": "sse", "name": name, "url": url, "headers": [{"name": "X-Key", "value": "k-123"}]}


def completed(frames):
    return [(u["status"], u["rawOutput"]["output"]) for u in updates(frames, "tool_call_update")
            if u.get("status") in ("completed", "failed")]


def test_an_sse_server_s_tools_run_with_its_headers_on_every_request(mcp_bob, legacy_sse):
    url, received = legacy_sse()
    bob, sid = mcp_bob(calls(("mcp__old__echo", {"message": "over sse"}), ("mcp__old__add", {"a": 2, "b": 3})),
                       [sse(url)], permissions={"mode": "allow-all"})
    _, frames = bob.prompt(sid, "go")
    assert completed(frames) == [("completed", "echo: over sse"), ("completed", "5")]
    assert bob.close() == 0
    seen = received()
    assert [r["method"] for r in seen if "post" in r][:4] == ["initialize", "notifications/initialized", "tools/list",
                                                             "tools/list"]
    assert all(r["headers"].get("X-Key") == "k-123" for r in seen if "post" in r or "get" in r)
    assert seen[0]["headers"]["Accept"] == "text/event-stream"
    wait_until(lambda: any("stream_ended" in r for r in received()))  # Bob's end closed the stream


def wait_until(condition, timeout=30.0):
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "not within the time"
        time.sleep(0.05)


def test_an_sse_server_naming_another_host_is_refused_and_nothing_is_posted_there(mcp_bob, legacy_sse):
    url, received = legacy_sse("--foreign-endpoint", "http://127.0.0.2:9/steal")
    bob, sid = mcp_bob(calls(("mcp__old__echo", {"message": "x"})), [sse(url)])
    assert "named its message endpoint on another host (http://127.0.0.2:9/steal)" in bob.stderr()
    assert [r for r in received() if "post" in r] == []
    _, frames = bob.prompt(sid, "go")
    assert completed(frames)[0][0] == "failed"  # (no such tool in the session)


@pytest.mark.parametrize("endpoint", ["http://127.0.0.1:{other}\\@127.0.0.1:{port}/messages?session=1",
                                      "http://user:pw@127.0.0.1:{port}/messages?session=1"])
def test_an_endpoint_the_parsers_could_read_two_ways_is_refused(mcp_bob, legacy_sse, endpoint):
    """`http://127.0.0.1:O\\@127.0.0.1:P/msg` is on P for urlsplit and on O for the connection:
    refused (as is user information), and nothing reaches the other server."""
    other, elsewhere = legacy_sse()
    port = other.split(":")[2].split("/")[0]
    url, received = legacy_sse("--foreign-endpoint", endpoint.replace("{other}", port))
    bob, sid = mcp_bob([{"replies": [{"text": "done"}]}], [sse(url)])
    assert "named its message endpoint on another host" in bob.stderr()
    assert [r for r in received() + elsewhere() if "post" in r] == []


@pytest.mark.parametrize("where", ["another server", "the same server"])
def test_a_message_post_never_follows_a_redirect(mcp_bob, legacy_sse, where):
    """The server answers a message POST with a 307: not followed, to another server (its
    headers would go there) nor to another path of its own (the endpoint event named where
    messages go), and said in the HTTP transport's words."""
    other, elsewhere = legacy_sse()
    target = other.replace("/sse", "/messages?session=1") if where == "another server" else "/moved?session=1"
    url, received = legacy_sse("--redirect-posts", target)
    bob, sid = mcp_bob([{"replies": [{"text": "done"}]}], [sse(url)])
    posts = [r for r in received() if "post" in r]
    assert posts, "Bob posted nothing"
    assert [r for r in elsewhere() if "post" in r] == [] and [r for r in posts if r["post"].startswith("/moved")] == []
    assert "does not follow redirects" in bob.stderr() + message_text(bob.frames)


def test_an_sse_server_that_refuses_a_call_says_so_in_the_http_words(mcp_bob, legacy_sse):
    url, _ = legacy_sse("--refuse", "tools/call")
    bob, sid = mcp_bob(calls(("mcp__old__echo", {"message": "x"})), [sse(url)], permissions={"mode": "allow-all"})
    _, frames = bob.prompt(sid, "go")
    status, output = completed(frames)[0]
    assert status == "failed" and "tools/call: HTTP 500" in output


def test_an_sse_server_that_never_names_its_endpoint_fails_within_mcp_timeout(mcp_bob, legacy_sse):
    url, _ = legacy_sse("--no-endpoint")
    bob, _ = mcp_bob([{"replies": [{"text": "x"}]}], [sse(url)], mcp={"timeout": 1})
    wait_until(lambda: "MCP server 'old'" in bob.stderr())
    assert "no endpoint event within 1 s (mcp.timeout)" in bob.stderr() or \
        "MCP server 'old' did not answer within 1 s" in bob.stderr()


def test_an_sse_event_past_the_bound_ends_the_stream_in_the_http_words(mcp_bob, legacy_sse):
    url, _ = legacy_sse()
    bob, sid = mcp_bob(calls(("mcp__old__big", {"size": 5 << 20})), [sse(url)], permissions={"mode": "allow-all"})
    _, frames = bob.prompt(sid, "go")
    status, output = completed(frames)[0]
    assert status == "failed" and "tools/call: the answer exceeds 4 MiB: not read further" in output


def counts(pid: int) -> tuple[int, int]:
    """(open descriptors, threads) of a process."""
    return len(os.listdir(f"/proc/{pid}/fd")), len(os.listdir(f"/proc/{pid}/task"))


@pytest.mark.parametrize("how", ["refused", "no endpoint"])
def test_sse_servers_that_fail_to_start_leave_nothing_behind(mcp_bob, legacy_sse, how):
    """Each failed start (a GET refused, a stream that never names its endpoint) leaves no
    descriptor and no thread in Bob: hundreds of them leave its counts flat."""
    url, _ = legacy_sse(*(["--no-endpoint"] if how == "no endpoint" else []))
    if how == "refused":
        url = url.replace("/sse", "/nothing-here")
    bob, sid = mcp_bob([{"replies": [{"text": "done"}]}], [sse(url)], mcp={"timeout": 0.2})
    tries = 200 if how == "refused" else 20

    def start_many(n: int) -> None:
        for _ in range(n):
            response, frames = bob.call("session/new", {"cwd": bob.workdir, "mcpServers": [sse(url)]})
            assert "result" in response, response

    start_many(5)
    wait_until(lambda: counts(bob.pid)[1] <= counts(bob.pid)[1])  # (settled)
    before = counts(bob.pid)
    start_many(tries)
    wait_until(lambda: counts(bob.pid)[0] <= before[0] + 2 and counts(bob.pid)[1] <= before[1] + 2)


def test_an_sse_server_that_dies_while_the_session_is_idle_is_said_at_once(mcp_bob, legacy_sse, tmp_path):
    """The server process dies between turns: its stream breaks (no traceback in Bob), the user
    is told at once which server went away and that its tools are gone, and the next turn runs."""
    url, received = legacy_sse()
    bob, sid = mcp_bob([{"replies": [{"text": "still here"}]}], [sse(url)])
    server = next(p for p in psutil_children() if "--legacy-sse" in " ".join(p[1]))
    os.kill(server[0], 9)
    deadline = time.monotonic() + 30
    said = ""
    while "went away" not in said:
        assert time.monotonic() < deadline, said
        frame = bob.read_frame(timeout=max(0.1, deadline - time.monotonic()))
        if frame.get("method") == "session/update":
            said += json.dumps(frame["params"]["update"])
    assert "MCP server 'old' went away" in said and "no longer available" in said
    response, frames = bob.prompt(sid, "go")
    assert response["result"]["stopReason"] == "end_turn"
    assert "Traceback" not in bob.stderr()


def psutil_children() -> list[tuple[int, list[str]]]:
    """(pid, argv) of this test process's children."""
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat") as handle:
                    parent = int(handle.read().rsplit(")", 1)[1].split()[1])
                with open(f"/proc/{name}/cmdline", "rb") as handle:
                    argv = [a.decode() for a in handle.read().split(b"\0") if a]
            except (OSError, ValueError):
                continue
            if parent == os.getpid():
                found.append((int(name), argv))
    return found
