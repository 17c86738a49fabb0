"""A live turn (issue 17) against the real bob-acp: bash output while it runs (as text, or as
Zed's terminal card when the client asks), fenced tool output, usage, reasoning, message ids."""

from __future__ import annotations

import json

import pytest
from bob_client import allow, allow_always, message_text, updates

pytestmark = pytest.mark.e2e

SLOW_PRINTER = "for i in 1 2 3 4 5 6; do echo line $i; sleep 0.15; done"


def initialize(bob, meta=None):
    capabilities = {"_meta": meta} if meta else {}
    return bob.result("initialize", {"protocolVersion": 1, "clientCapabilities": capabilities,
                                     "clientInfo": {"name": "pytest", "version": "1"}})


@pytest.fixture
def live(spawn_bob, tmp_path):
    def start(turns, meta=None, **config):
        import yaml
        path = tmp_path / "script.yaml"
        path.write_text(yaml.safe_dump({"turns": turns}))
        cfg = {"model": {"provider": "script", "script": str(path)}}
        for key, value in config.items():
            cfg.setdefault(key, {}).update(value)
        bob = spawn_bob(cfg)
        initialize(bob, meta)
        return bob, bob.new_session()
    return start


def bash_turn(command):
    return [{"replies": [{"tool_calls": [{"name": "bash", "arguments": {"command": command}}]}, {"text": "ok"}]}]


def test_bash_output_arrives_while_the_command_runs(live):
    bob, sid = live(bash_turn(SLOW_PRINTER))
    response, frames = bob.prompt(sid, "go", answer=allow)
    assert response["result"]["stopReason"] == "end_turn"
    calls = updates(frames, "tool_call_update")
    running = [u for u in calls if u.get("status") == "in_progress" and "content" in u]
    assert 2 <= len(running) <= 6  # at most about 4 a second, over ~0.9 s, only when there is new output
    texts = [u["content"][0]["content"]["text"] for u in running]
    assert texts[0].startswith("```console\nline 1") and all(t.startswith("```console\n") for t in texts)
    assert texts == sorted(texts, key=len)  # each the output so far
    final = calls[-1]
    assert final["status"] == "completed" and "line 6" in final["rawOutput"]["output"]


def test_a_flood_of_output_costs_bounded_bytes_on_the_wire(live):
    """50 MB printed: each live update carries at most the tail, never the whole output again."""
    bob, sid = live(bash_turn("head -c 50000000 /dev/zero | tr '\\0' 'x' | fold -w 100"),
                    tools={"bash": {"outputLimit": 2000}})
    response, frames = bob.prompt(sid, "go", answer=allow, timeout=60)
    running = [u for u in updates(frames, "tool_call_update") if u.get("status") == "in_progress" and "content" in u]
    for update in running:
        assert len(update["content"][0]["content"]["text"]) <= 2000 + 20
    assert sum(len(json.dumps(u)) for u in running) < 2_000_000  # not O(n²), not even O(n): 50 MB printed


def test_zed_terminal_card_when_the_client_asks(live, workdir):
    bob, sid = live(bash_turn(SLOW_PRINTER), meta={"terminal_output": True})
    response, frames = bob.prompt(sid, "go", answer=allow)
    call = updates(frames, "tool_call")[0]
    ref = call["toolCallId"]
    assert call["content"] == [{"type": "terminal", "terminalId": ref}]
    assert call["_meta"] == {"terminal_info": {"terminal_id": ref, "cwd": str(workdir)}}
    deltas = [u["_meta"]["terminal_output"] for u in updates(frames, "tool_call_update")
              if "terminal_output" in u.get("_meta", {})]
    assert all(d["terminal_id"] == ref for d in deltas)
    assert "".join(d["data"] for d in deltas) == "".join(f"line {i}\n" for i in range(1, 7))  # only new bytes
    final = updates(frames, "tool_call_update")[-1]
    assert final["status"] == "completed" and final["content"] == [{"type": "terminal", "terminalId": ref}]
    assert final["_meta"] == {"terminal_exit": {"terminal_id": ref, "exit_code": 0, "signal": None}}
    assert final["rawOutput"]["output"].endswith("[exit code: 0]")


def test_without_the_capability_there_is_no_terminal_meta(live):
    bob, sid = live(bash_turn("echo hi"))
    _, frames = bob.prompt(sid, "go", answer=allow)
    assert not any("_meta" in u for u in updates(frames))


def test_tool_text_is_a_code_block_fenced_past_any_backticks_inside(live, workdir):
    (workdir / "notes.py").write_text("x = 1  # ```` four\n")
    bob, sid = live([{"replies": [
        {"tool_calls": [{"name": "bash", "arguments": {"command": "echo '# *not* a <b>heading</b> ```'"}}]},
        {"tool_calls": [{"name": "read_file", "arguments": {"path": "notes.py", "offset": 1}}]},
        {"text": "ok"}]}])
    _, frames = bob.prompt(sid, "go", answer=allow_always)
    finals = [u for u in updates(frames, "tool_call_update") if u.get("status") == "completed"]
    bash_text = finals[0]["content"][0]["content"]["text"]
    assert bash_text.startswith("````console\n# *not* a <b>heading</b> ```\n") and bash_text.endswith("\n````")
    read_text = finals[1]["content"][0]["content"]["text"]
    assert read_text.startswith("`````python\n") and read_text.endswith("\n`````")
    assert finals[1]["rawOutput"]["output"] == "x = 1  # ```` four\n"  # raw stays raw


def test_read_file_locations_carry_the_line(live, workdir):
    (workdir / "a.txt").write_text("1\n2\n3\n")
    bob, sid = live([{"replies": [{"tool_calls": [{"name": "read_file", "arguments": {"path": "a.txt", "offset": 2}}]},
                                  {"text": "ok"}]}])
    _, frames = bob.prompt(sid, "go", answer=allow)
    assert updates(frames, "tool_call")[0]["locations"] == [{"path": str(workdir / "a.txt"), "line": 2}]


def test_usage_after_every_model_call_and_after_compact_with_a_price(live):
    bob, sid = live([{"match": "Summarise", "replies": [{"text": "summary", "usage": {"input_tokens": 50}}]},
                     {"replies": [{"text": "one", "usage": {"input_tokens": 1000, "output_tokens": 10}}]}],
                    model={"price": {"input": 3.0, "output": 15.0}}, context={"keepLastTurns": 1})
    _, frames = bob.prompt(sid, "first")
    usage = updates(frames, "usage_update")
    assert usage == [{"sessionUpdate": "usage_update", "used": 1000, "size": 128000,
                      "cost": {"amount": 0.00315, "currency": "USD"}}]
    _, frames = bob.prompt(sid, "second")
    before = updates(frames, "usage_update")[-1]["cost"]["amount"]
    _, frames = bob.prompt(sid, "/compact")
    after = updates(frames, "usage_update")
    assert len(after) == 1 and after[0]["used"] < 1000  # the history's new size
    assert after[0]["cost"]["amount"] > before  # the summary's model call is paid for too


def test_no_cost_without_a_price(live):
    bob, sid = live([{"replies": [{"text": "one", "usage": {"input_tokens": 10}}]}])
    _, frames = bob.prompt(sid, "hi")
    assert "cost" not in updates(frames, "usage_update")[0]


def test_reasoning_from_an_openai_compatible_server_streams_as_thoughts(spawn_bob, server, workdir):
    server.enqueue(server.raw_events(
        '{"choices":[{"index":0,"delta":{"reasoning_content":"Let me "}}]}',
        '{"choices":[{"index":0,"delta":{"reasoning":"think."}}]}',
        '{"choices":[{"index":0,"delta":{"content":"The answer."}}]}',
        '{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}', "[DONE]"))
    bob = spawn_bob({"model": {"baseUrl": server.url + "/v1", "retries": 0}, "sessions": {"enabled": True}})
    bob.initialize()
    sid = bob.new_session()
    _, frames = bob.prompt(sid, "why?")
    thoughts = updates(frames, "agent_thought_chunk")
    assert [t["content"]["text"] for t in thoughts] == ["Let me ", "think."]
    assert len({t["messageId"] for t in thoughts}) == 1
    assert message_text(frames) == "The answer."  # never mixed into the message
    bob.close()
    again = spawn_bob({"model": {"baseUrl": server.url + "/v1"}, "sessions": {"enabled": True}})
    again.initialize()
    _, replay = again.call("session/load", {"sessionId": sid, "cwd": str(workdir), "mcpServers": []})
    assert not updates(replay, "agent_thought_chunk")  # thoughts are not replayed


def test_anthropic_thinking_is_streamed_and_sent_back_signed_while_tools_run(spawn_bob, server):
    def thinking_then(tool):
        events = [
            {"type": "message_start", "message": {"usage": {"input_tokens": 5}}},
            {"type": "content_block_start", "index": 0, "content_block": {"type": "thinking", "thinking": ""}},
            {"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "Plan it."}},
            {"type": "content_block_delta", "index": 0, "delta": {"type": "signature_delta", "signature": "SIG"}},
            {"type": "content_block_start", "index": 1, "content_block": {"type": "tool_use", "id": "t1",
                                                                          "name": "read_skill", "input": {}}},
            {"type": "content_block_delta", "index": 1,
             "delta": {"type": "input_json_delta", "partial_json": '{"name": "greetings"}'}},
            {"type": "message_stop"}]
        return server.raw_events(*[json.dumps(e) for e in events]) if tool else None

    server.enqueue(thinking_then(True), server.anthropic_text("Done."))
    bob = spawn_bob({"model": {"provider": "anthropic", "baseUrl": server.url, "name": "claude-test",
                               "thinking": 2048, "temperature": 0.5}}, env={"ANTHROPIC_API_KEY": "sk-ant-test-000"})
    bob.initialize()
    sid = bob.new_session()
    _, frames = bob.prompt(sid, "plan")
    assert [t["content"]["text"] for t in updates(frames, "agent_thought_chunk")] == ["Plan it."]
    first, second = server.requests[0]["body"], server.requests[1]["body"]
    assert first["thinking"] == {"type": "enabled", "budget_tokens": 2048} and "temperature" not in first
    assert first["max_tokens"] >= 2048 + 1024
    assistant = second["messages"][1]
    assert assistant["role"] == "assistant"
    assert assistant["content"][0] == {"type": "thinking", "thinking": "Plan it.", "signature": "SIG"}
    assert assistant["content"][1]["type"] == "tool_use"
