"""The real bob-acp against the fake OpenAI/Anthropic server: frames, files, history, faults."""

import json
import time

import pytest
from bob_client import allow, allow_always, message_text, reject, updates

pytestmark = pytest.mark.e2e
KEY = "sk-e2e-fake-key-ABCDEF0123456789"


def test_openai_turn_with_bash_write_edit_and_each_answer(bob_http, server, workdir):
    server.enqueue(
        server.openai_tool_call("bash", {"command": "echo hi"}, text="Checking. ", call_id="c1", usage=500),
        server.openai_tool_call("write_file", {"path": "f.txt", "content": "alpha\n"}, call_id="c2"),
        server.openai_tool_call("write_file", {"path": "g.txt", "content": "gamma\n"}, call_id="c3"),
        server.openai_tool_call("edit_file", {"path": "f.txt", "old_string": "alpha", "new_string": "beta"}, call_id="c4"),
        server.openai_text("All set.", chunks=2, usage=900),
    )
    bob, sid = bob_http()
    answers = iter([allow, allow_always, reject])
    response, frames = bob.prompt(sid, "do it", answer=lambda req: next(answers)(req))
    assert response["result"] == {"stopReason": "end_turn"}
    assert (workdir / "f.txt").read_text() == "alpha\n"  # the edit was rejected
    assert (workdir / "g.txt").read_text() == "gamma\n"  # allowed always: not asked
    assert message_text(frames) == "Checking. All set."
    permissions = [f["params"]["toolCall"]["title"] for f in frames if f.get("method") == "session/request_permission"]
    assert permissions == ["bash: echo hi", "write_file: f.txt", "edit_file: f.txt"]
    finals = [u for u in updates(frames, "tool_call_update") if u["status"] in ("completed", "failed")]
    assert [u["status"] for u in finals] == ["completed", "completed", "completed", "failed"]
    assert finals[0]["rawOutput"]["output"] == "hi\n[exit code: 0]"
    assert finals[1]["content"] == [{"type": "diff", "path": str(workdir / "f.txt"), "newText": "alpha\n"}]
    assert finals[3]["rawOutput"]["output"] == "[command rejected by the user]"
    # the model saw every result, in order, with the ids it gave
    last = server.requests[-1]["body"]["messages"]
    tool_messages = [m for m in last if m["role"] == "tool"]
    assert [m["tool_call_id"] for m in tool_messages] == ["c1", "c2", "c3", "c4"]
    assert tool_messages[3]["content"] == "[command rejected by the user]"
    assert all(m["content"] == "" for m in last if m["role"] == "assistant" and m.get("tool_calls") and not m["content"])
    assert KEY not in bob.stderr()


def test_anthropic_turn(bob_http, server, workdir):
    server.enqueue(server.anthropic_tool_call("write_file", {"path": "a.md", "content": "# A\n"}, text="Writing."),
                   server.anthropic_text("Written.", chunks=3))
    bob, sid = bob_http("anthropic", name="claude-test")
    response, frames = bob.prompt(sid, "write", answer=allow)
    assert response["result"]["stopReason"] == "end_turn" and (workdir / "a.md").read_text() == "# A\n"
    assert message_text(frames) == "Writing.Written."
    second = server.requests[1]["body"]
    assert second["messages"][-1]["content"][0]["type"] == "tool_result"
    assert server.requests[0]["headers"]["x-api-key"] == KEY and KEY not in bob.stderr()
    from bob_acp import __version__

    assert {r["headers"]["User-Agent"] for r in server.requests} == {f"bob-acp/{__version__}"}


def test_401_fails_the_turn_with_one_line_and_keeps_history(bob_http, server):
    server.enqueue(server.status(401, {"error": {"message": "invalid API key"}}), server.openai_text("back"))
    bob, sid = bob_http()
    response, _ = bob.prompt(sid, "first question")
    assert response["error"]["code"] == -32603
    assert response["error"]["data"] == {"error": "model API 401: invalid API key"}
    response, frames = bob.prompt(sid, "second question")
    assert message_text(frames) == "back"
    users = [m["content"] for m in server.requests[-1]["body"]["messages"] if m["role"] == "user"]
    assert users == ["second question"]  # a question with no answer at all is removed


def test_cancel_during_a_silent_stream_and_history_after_it(bob_http, server):
    server.enqueue(server.openai_text("partial answer", then="stall"), server.openai_text("next"))
    bob, sid = bob_http()
    msg_id = bob.request_async("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "one"}]})
    while bob.read_frame().get("method") != "session/update":
        pass
    started = time.monotonic()
    bob.notify("session/cancel", {"sessionId": sid})
    response, _ = bob.wait_response(msg_id, timeout=10)
    assert response["result"] == {"stopReason": "cancelled"} and time.monotonic() - started < 5  # the stream never ends
    bob.prompt(sid, "two")
    roles = [(m["role"], m["content"]) for m in server.requests[-1]["body"]["messages"][1:]]
    assert roles == [("user", "one"), ("assistant", "partial answer"), ("user", "two")]


def test_cancel_during_a_tool_leaves_every_call_answered(bob_http, server):
    server.enqueue(server.openai_tool_call("bash", {"command": "sleep 30"}, call_id="slow1"), server.openai_text("ok"))
    bob, sid = bob_http()
    msg_id = bob.prompt_until_running(sid, "go")
    bob.notify("session/cancel", {"sessionId": sid})
    assert bob.wait_response(msg_id, timeout=5)[0]["result"] == {"stopReason": "cancelled"}
    bob.prompt(sid, "again")
    messages = server.requests[-1]["body"]["messages"]
    assert messages[3] == {"role": "tool", "tool_call_id": "slow1", "content": "[cancelled by the user]"}


def test_retry_after_429_then_success(bob_http, server):
    server.enqueue(server.status(429, {"error": {"message": "rate limited"}}, {"Retry-After": "0.3"}),
                   server.openai_text("after waiting"))
    bob, sid = bob_http()
    response, frames = bob.prompt(sid, "hi")
    assert message_text(frames) == "after waiting" and len(server.requests) == 2


def test_automatic_compression_past_the_threshold(bob_http, server):
    server.enqueue(server.openai_text("first answer", usage=10),
                   server.openai_text("second answer", usage=950),
                   server.openai_text("a summary of the start"),
                   server.openai_text("third answer"))
    bob, sid = bob_http(extra={"context": {"window": 1000, "threshold": 0.8, "keepLastTurns": 1}})
    bob.prompt(sid, "q1")
    bob.prompt(sid, "q2")
    bob.prompt(sid, "q3")
    bob.wait_stderr("[acp] automatic compression — 🗜️ compressed")
    summarise = server.requests[2]["body"]
    assert "tools" not in summarise and "q1" in summarise["messages"][-1]["content"]
    final = server.requests[3]["body"]["messages"]
    assert "a summary of the start" in final[1]["content"] and final[-1]["content"] == "q3"



def test_every_openai_request_of_a_session_extends_the_previous_one_byte_for_byte(bob_http, server):
    """OpenAI-compatible servers cache prompts by prefix: no per-call timestamps, no reordering."""
    server.enqueue(server.openai_tool_call("bash", {"command": "echo 1"}, call_id="c1"),
                   server.openai_tool_call("read_skill", {"name": "greetings"}, call_id="c2"),
                   server.openai_text("first turn done"), server.openai_text("second turn done"))
    bob, sid = bob_http()
    bob.prompt(sid, "one", answer=allow_always)
    bob.prompt(sid, "two")
    bodies = [r["body"] for r in server.requests]
    assert len(bodies) == 4
    for earlier, later in zip(bodies, bodies[1:], strict=False):
        size = len(earlier["messages"])
        assert json.dumps(later["messages"][:size]) == json.dumps(earlier["messages"])
        assert json.dumps(later["tools"]) == json.dumps(earlier["tools"])


def test_each_anthropic_call_of_a_turn_reads_the_previous_calls_prefix_from_the_cache(bob_http, server):
    server.enqueue(*[server.anthropic_tool_call("bash", {"command": f"echo {n}"}, tool_id=f"t{n}", cache_usage=True)
                     for n in range(4)], server.anthropic_text("done", cache_usage=True))
    bob, sid = bob_http("anthropic", name="claude-test", extra={"permissions": {"mode": "allow-all"}})
    response, _ = bob.prompt(sid, "go")
    assert response["result"]["stopReason"] == "end_turn"
    usages = [server.cache_accounting_log[n] for n in range(5)]
    assert usages[0]["cache_read_input_tokens"] == 0
    for earlier, later in zip(usages, usages[1:], strict=False):  # every call after the first reads all the one before wrote
        assert later["cache_read_input_tokens"] >= earlier["cache_read_input_tokens"] + earlier["cache_creation_input_tokens"]
    bob.wait_stderr("read from the cache")  # the counts are logged


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_a_redirect_to_another_origin_is_not_followed_and_said(bob_http, server, provider):
    """A model server answering 307 to another host would get the whole request again: the key
    (Anthropic's x-api-key is no Authorization header requests would drop), the configured
    headers and the conversation. Not followed; the turn fails with what to set. A redirect on
    the same server is followed."""
    from fake_model import FakeModelServer

    path = "/v1/chat/completions" if provider == "openai" else "/v1/messages"
    reply = server.openai_text if provider == "openai" else server.anthropic_text
    with FakeModelServer() as elsewhere:
        elsewhere.enqueue(reply("stolen"))
        server.enqueue(server.status(307, headers={"Location": elsewhere.url + path}))
        bob, sid = bob_http(provider, name="m", headers={"X-Team-Token": "team-secret-123"})
        response, frames = bob.prompt(sid, "secret conversation")
        assert elsewhere.requests == []
        line = response["error"]["data"]["error"]
        assert "redirected to another origin" in line and "model.baseUrl" in line, line
        assert KEY not in json.dumps(frames) + bob.stderr() and "team-secret-123" not in bob.stderr()
    moved = server.url + "/moved" + path
    server.enqueue(server.status(307, headers={"Location": moved}), reply("followed"))
    response, frames = bob.prompt(sid, "again")
    assert response["result"]["stopReason"] == "end_turn" and "followed" in message_text(frames)
    assert server.requests[-1]["path"] == "/moved" + path
