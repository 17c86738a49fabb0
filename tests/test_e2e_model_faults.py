"""Issue 24 against the real bob-acp and the fake model servers: numbers and reasoning a server
gets wrong never wreck a turn or a session, every wait of a turn ends at a cancel, and a reply's
end and errors say what happened."""

from __future__ import annotations

import json
import time

import pytest
from bob_client import allow, message_text, updates
from fake_model import Response, _sse
from test_e2e_mcp import stdio

from bob_acp.context import history

pytestmark = pytest.mark.e2e
KEY = "sk-faults-key-0123456789abcdef"


def summary_requests(server):
    return [r for r in server.requests if (r["body"] or {}).get("messages", [{}])[0].get("content", "").startswith(
        "You summarise")]


# ---- 1. numbers from the model are sane before Bob acts on them -----------------------------------------

def test_an_absurd_prompt_count_neither_compresses_nor_costs(bob_http, server, workdir):
    server.enqueue(server.openai_text("first", usage=9223372036854775807), server.openai_text("second"))
    bob, sid = bob_http(extra={"sessions": {"enabled": True}}, price={"input": 3.0, "output": 15.0})
    _, frames = bob.prompt(sid, "one")
    usage = updates(frames, "usage_update")[-1]
    assert usage["used"] < 1000 and usage["cost"]["amount"] < 0.01
    _, frames = bob.prompt(sid, "two")
    assert message_text(frames) == "second" and summary_requests(server) == []
    saved = json.loads((workdir / ".bob" / "sessions" / f"{sid}.json").read_text())
    assert [history.text_of(m) for m in saved["messages"][1:]] == ["one", "first", "two", "second"]
    bob.wait_stderr("reported a prompt of 9223372036854775807 tokens")


def test_a_count_no_double_can_hold_does_not_fail_a_streamed_answer(bob_http, server):
    server.enqueue(Response(events=[
        _sse({"choices": [{"index": 0, "delta": {"content": "the answer"}}]}),
        _sse({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}),
        _sse('{"choices": [], "usage": {"prompt_tokens": 1e400, "completion_tokens": 1e400}}'),
        _sse("[DONE]")]))
    bob, sid = bob_http()
    response, frames = bob.prompt(sid, "go")
    assert response["result"]["stopReason"] == "end_turn" and message_text(frames) == "the answer"


def test_a_failing_compression_is_tried_at_most_twice_a_turn_and_said_once(bob_http, server):
    calls = [server.openai_tool_call("bash", {"command": f"echo {n}"}, call_id=f"c{n}") for n in range(5)]
    # context.window 256 with threshold 0.01: every model call of the turn wants to compress.
    server.enqueue(server.openai_text("earlier turn"))
    bob, sid = bob_http(extra={"context": {"window": 256, "threshold": 0.01, "keepLastTurns": 1},
                                "permissions": {"mode": "allow-all"}})
    bob.prompt(sid, "an earlier turn")
    for n, call in enumerate(calls):
        if n < 2:
            server.enqueue(server.status(400, {"error": {"message": "summaries are off today"}}))
        server.enqueue(call)
    server.enqueue(server.openai_text("done"))
    response, frames = bob.prompt(sid, "now work")
    assert response["result"]["stopReason"] == "end_turn"
    assert len(summary_requests(server)) == 2
    told = [u["content"]["text"] for u in updates(frames, "agent_message_chunk") if "compression failed" in
            u["content"]["text"]]
    assert len(told) == 1 and "summaries are off today" in told[0]


# ---- 2. reasoning never breaks a turn or a session -------------------------------------------------------

def test_a_malformed_reasoning_piece_is_dropped(bob_http, server):
    server.enqueue(Response(events=[
        _sse({"choices": [{"index": 0, "delta": {"reasoning_content": "thinking it over"}}]}),
        _sse({"choices": [{"index": 0, "delta": {"reasoning_content": 5}}]}),
        _sse({"choices": [{"index": 0, "delta": {"content": "the reply"}, "finish_reason": "stop"}]}),
        _sse("[DONE]")]))
    bob, sid = bob_http()
    response, frames = bob.prompt(sid, "go")
    assert response["result"]["stopReason"] == "end_turn" and message_text(frames) == "the reply"
    assert [u["content"]["text"] for u in updates(frames, "agent_thought_chunk")] == ["thinking it over"]
    bob.wait_stderr("a reasoning piece was dropped")


def test_unsigned_thinking_is_shown_and_never_sent_back(bob_http, server):
    start = {"type": "message_start", "message": {"usage": {"input_tokens": 10}}}
    server.enqueue(server.anthropic_events(
        start,
        {"type": "content_block_start", "index": 0, "content_block": {"type": "thinking", "thinking": ""}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "hmm"}},
        {"type": "content_block_stop", "index": 0},
        {"type": "content_block_start", "index": 1, "content_block": {"type": "redacted_thinking"}},
        {"type": "content_block_stop", "index": 1},
        {"type": "content_block_start", "index": 2, "content_block": {"type": "tool_use", "id": "t1", "name": "bash",
                                                                     "input": {}}},
        {"type": "content_block_delta", "index": 2, "delta": {"type": "input_json_delta",
                                                             "partial_json": '{"command": "echo x"}'}},
        {"type": "content_block_stop", "index": 2},
        {"type": "message_delta", "delta": {"stop_reason": "tool_use"}},
        {"type": "message_stop"}), server.anthropic_text("done"), server.anthropic_text("again"))
    bob, sid = bob_http("anthropic", thinking=2048)
    _, frames = bob.prompt(sid, "go", answer=allow)
    assert "hmm" in "".join(u["content"]["text"] for u in updates(frames, "agent_thought_chunk"))
    bob.prompt(sid, "more")
    for request in server.requests[1:]:
        assistant = [m for m in request["body"]["messages"] if m["role"] == "assistant"]
        kinds = [b["type"] for m in assistant for b in m["content"]]
        assert "thinking" not in kinds and "redacted_thinking" not in kinds
    assert server.refused == []


# ---- 3. a cancel is answered at once, whatever Bob is waiting on -------------------------------------------

def test_a_cancel_before_the_model_servers_headers_is_answered_at_once(bob_http, server):
    server.enqueue(Response(silent=30, events=[_sse("[DONE]")]))
    bob, sid = bob_http(timeout=40)
    msg_id = bob.request_async("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "go"}]})
    while len(server.requests) < 1:
        time.sleep(0.02)
    started = time.monotonic()
    bob.notify("session/cancel", {"sessionId": sid})
    response, _ = bob.wait_response(msg_id, timeout=20)
    assert response["result"] == {"stopReason": "cancelled"}
    assert time.monotonic() - started < 5  # not the 30 s the server stays silent (speed: scripts/bench.py)


def test_a_cancel_during_an_http_mcp_call_without_headers_is_answered_at_once(mcp_bob, http_mcp):
    base, _ = http_mcp()
    server = {"type": "http", "name": "web", "url": base + "/silent", "headers": []}
    bob, sid = mcp_bob([{"replies": [{"tool_calls": [{"name": "mcp__web__echo", "arguments": {"message": "x"}}]},
                                     {"text": "after"}]}], [server], permissions={"mode": "allow-all"},
                       mcp={"timeout": 60})
    msg_id = bob.request_async("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "go"}]})
    while not any(f.get("method") == "session/update" and f["params"]["update"].get("status") == "in_progress"
                  for f in bob.frames):
        bob.read_frame()
    started = time.monotonic()
    bob.notify("session/cancel", {"sessionId": sid})
    response, _ = bob.wait_response(msg_id, timeout=20)
    assert response["result"] == {"stopReason": "cancelled"} and time.monotonic() - started < 5


def test_a_tool_list_refresh_ends_at_a_cancel_and_within_mcp_timeout(mcp_bob, tmp_path):
    record = tmp_path / "mcp-record.jsonl"
    server = stdio("test", "--record", str(record))
    server["env"] = [{"name": "MCP_TEST_ENDLESS_PAGES", "value": "1"}]
    turns = [{"match": "grow", "replies": [{"tool_calls": [{"name": "mcp__test__grow", "arguments": {}}]},
                                           {"text": "grown"}]},
             {"replies": [{"text": "plain"}]}]
    bob, sid = mcp_bob(turns, [server], permissions={"mode": "allow-all"}, mcp={"timeout": 4})
    msg_id = bob.request_async("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "grow"}]})
    while not any(f.get("method") == "session/update" and f["params"]["update"].get("status") == "completed"
                  for f in bob.frames):
        bob.read_frame()
    deadline = time.monotonic() + 30  # the next model call now waits on the endless tools/list: seen asked
    while not any('"tools/list"' in line and '"cursor": "page1' in line
                  for line in (record.read_text().splitlines() if record.exists() else [])):
        assert time.monotonic() < deadline, "the refresh's endless pages never began"
        time.sleep(0.02)
    started = time.monotonic()
    bob.notify("session/cancel", {"sessionId": sid})
    response, _ = bob.wait_response(msg_id, timeout=20)
    assert response["result"] == {"stopReason": "cancelled"} and time.monotonic() - started < 3
    started = time.monotonic()
    response, frames = bob.prompt(sid, "something else", timeout=30)  # no cancel: mcp.timeout bounds it
    assert response["result"]["stopReason"] == "end_turn" and time.monotonic() - started < 15


# ---- 4. a model's end and errors say what happened ---------------------------------------------------------

@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_a_reply_cut_by_the_token_limit_says_max_tokens_and_stays(bob_http, server, provider):
    cut = server.openai_cut("half an ans") if provider == "openai" else server.anthropic_cut("half an ans")
    server.enqueue(cut, server.openai_text("next") if provider == "openai" else server.anthropic_text("next"))
    bob, sid = bob_http(provider)
    response, frames = bob.prompt(sid, "go")
    assert response["result"]["stopReason"] == "max_tokens" and message_text(frames) == "half an ans"
    bob.prompt(sid, "go on")
    sent = json.dumps(server.requests[-1]["body"]["messages"])
    assert "half an ans" in sent


def test_a_cut_tool_call_does_not_run(bob_http, server, workdir):
    server.enqueue(Response(events=[
        _sse({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "id": "c1", "type": "function",
                                                                 "function": {"name": "write_file",
                                                                              "arguments": '{"path": "x.txt", "con'}}]}}]}),
        _sse({"choices": [{"index": 0, "delta": {}, "finish_reason": "length"}]}), _sse("[DONE]")]))
    bob, sid = bob_http()
    response, frames = bob.prompt(sid, "go", answer=allow)
    assert response["result"]["stopReason"] == "max_tokens" and updates(frames, "tool_call") == []
    assert not (workdir / "x.txt").exists()


def test_a_404_names_the_url_that_was_requested(spawn_bob, server):
    server.enqueue(server.status(404, b"Not Found"))
    bob = spawn_bob({"model": {"baseUrl": server.url + "/v1/v1?key=hidden-query-token", "retries": 0}},
                    env={"OPENAI_API_KEY": KEY})
    bob.initialize()
    sid = bob.new_session()
    response, _ = bob.prompt(sid, "go")
    line = response["error"]["data"]["error"]
    assert line == f"model API 404 at POST {server.url}/v1/v1/chat/completions: Not Found"
    assert "hidden-query-token" not in json.dumps(bob.frames) + bob.stderr()


def test_a_server_that_dies_mid_reply_is_said_in_words(bob_http, server):
    server.enqueue(Response(events=[_sse({"choices": [{"index": 0, "delta": {"content": "partial"}}]})],
                            then="short"))
    bob, sid = bob_http()
    response, frames = bob.prompt(sid, "go")
    assert response["error"]["data"]["error"] == (
        "model API stream broken: the model server closed the connection in the middle of its reply")
    assert message_text(frames) == "partial"


@pytest.mark.parametrize("asked", [False, True])
def test_a_retry_is_an_event_only_for_a_client_that_asked(spawn_bob, server, asked):
    """Issue 25: retries reach a client as a `_bob/retry` extension notification (schema-checked)
    when it asked with `_meta.bob.retries` (bob-acp chat does); other clients get nothing new."""
    server.enqueue(server.status(503, {"error": {"message": "overloaded"}}), server.openai_text("after"))
    bob = spawn_bob({"model": {"baseUrl": server.url + "/v1", "retries": 1}},
                    env={"OPENAI_API_KEY": "sk-retry-event-0123456789"})
    capabilities = {"_meta": {"bob": {"retries": True}}} if asked else {}
    bob.result("initialize", {"protocolVersion": 1, "clientCapabilities": capabilities})
    sid = bob.new_session()
    response, frames = bob.prompt(sid, "hi")
    assert response["result"]["stopReason"] == "end_turn"
    retries = [f["params"] for f in frames if f.get("method") == "_bob/retry"]
    if asked:
        assert len(retries) == 1 and retries[0]["sessionId"] == sid and retries[0]["attempt"] == 1
        assert retries[0]["reason"].startswith("model API 503: overloaded") and retries[0]["delay"] >= 0
    else:
        assert retries == []
