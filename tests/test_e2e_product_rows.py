"""Rows of the product document that had no test of their own, against the real bob-acp, and
the turn-order and load-race rules (issue 12)."""

from __future__ import annotations

import json
import time

import pytest
import yaml
from bob_client import allow, allow_always, message_text, updates

from bob_acp.context import history

pytestmark = pytest.mark.e2e


@pytest.fixture
def sessions_bob(spawn_bob, tmp_path):
    def start(turns, **extra):
        path = tmp_path / "script.yaml"
        path.write_text(yaml.safe_dump({"turns": turns}), encoding="utf-8")
        cfg = {"model": {"provider": "script", "script": str(path)}, "sessions": {"enabled": True}}
        for key, value in extra.items():
            cfg.setdefault(key, {}).update(value)
        bob = spawn_bob(cfg)
        bob.initialize()
        return bob
    return start


def test_call_numbering_starts_at_1(scripted):
    bob, sid = scripted([{"replies": [{"tool_calls": [{"name": "read_skill", "arguments": {"name": "greetings"}}]},
                                      {"text": "ok"}]}])
    _, frames = bob.prompt(sid, "go")
    assert [u["toolCallId"] for u in updates(frames, "tool_call")] == ["call_1"]


def test_an_unknown_tool_from_the_model_is_kind_execute(scripted):
    bob, sid = scripted([{"replies": [{"tool_calls": [{"name": "teleport", "arguments": {"to": "mars"}}]},
                                      {"text": "ok"}]}])
    response, frames = bob.prompt(sid, "go")
    assert response["result"]["stopReason"] == "end_turn"
    call = updates(frames, "tool_call")[0]
    assert call["kind"] == "execute" and call["title"] == "teleport: unknown tool"
    final = updates(frames, "tool_call_update")[-1]
    assert final["status"] == "failed" and "unknown tool 'teleport'" in final["rawOutput"]["output"]


def test_a_slash_skill_reaches_the_model_as_dollar_notation(scripted, workdir):
    bob, sid = scripted([{"match": "$greetings Bob", "replies": [
        {"tool_calls": [{"name": "read_skill", "arguments": {"name": "greetings"}}]}, {"text": "Happy holidays, Bob!"}]},
        {"replies": [{"text": "the model did not see $greetings"}]}])
    response, frames = bob.prompt(sid, "/greetings Bob")
    assert message_text(frames) == "Happy holidays, Bob!"
    assert updates(frames, "tool_call")[0]["title"] == "read_skill: greetings"
    bob.wait_stderr("[acp] turn done: 0 command(s) · 0 file op(s) · 1 skill(s)")


def test_the_banner_names_a_skill_called_new_or_compact(spawn_bob, workdir, tmp_path):
    for name in ("new", "compact"):
        folder = tmp_path / "home" / ".config" / "bob" / "skills" / name
        folder.mkdir(parents=True)
        (folder / "SKILL.md").write_text(f"---\nname: {name}\ndescription: A skill named {name}.\n---\nDo it.\n")
    bob = spawn_bob({})
    bob.initialize()
    sid = bob.new_session()
    text = bob.wait_stderr("skill 'compact'")
    assert "skill 'new'" in text and "is not advertised" in text
    commands = [f["params"]["update"] for f in bob.frames if f.get("method") == "session/update"][-1]
    assert [c["name"] for c in commands["availableCommands"]][:2] == ["new", "compact"]
    assert [c["name"] for c in commands["availableCommands"]].count("new") == 1
    assert sid


def test_a_loaded_session_asks_permission_again_and_no_tool_runs_during_the_replay(sessions_bob, workdir):
    turns = [{"replies": [{"tool_calls": [{"name": "bash", "arguments": {"command": "echo run >> ran.txt"}}]},
                          {"text": "ok"}]}]
    bob = sessions_bob(turns)
    sid = bob.new_session()
    bob.prompt(sid, "go", answer=allow_always)
    assert (workdir / "ran.txt").read_text() == "run\n"
    assert bob.close() == 0
    again = sessions_bob(turns)
    response, frames = again.call("session/load", {"sessionId": sid, "cwd": str(workdir), "mcpServers": []})
    assert "result" in response and not any(f.get("method") == "session/request_permission" for f in frames)
    assert (workdir / "ran.txt").read_text() == "run\n"  # the replay ran nothing
    asked = []
    again.prompt(sid, "go", answer=lambda req: asked.append(req) or allow(req))
    assert len(asked) == 1  # allow-always is not carried over: the set is empty after a load


def test_replay_titles_and_kinds_for_every_tool(sessions_bob, workdir):
    (workdir / "r.txt").write_text("read me\n")
    calls = [("read_file", {"path": "r.txt"}), ("write_file", {"path": "w.txt", "content": "w"}),
             ("edit_file", {"path": "w.txt", "old_string": "w", "new_string": "W"}), ("read_skill", {"name": "greetings"}),
             ("bash", {"command": "true"})]
    bob = sessions_bob([{"replies": [{"tool_calls": [{"name": n, "arguments": a}]} for n, a in calls] + [{"text": "ok"}]}])
    sid = bob.new_session()
    bob.prompt(sid, "go", answer=allow_always)
    bob.close()
    again = sessions_bob([])
    _, frames = again.call("session/load", {"sessionId": sid, "cwd": str(workdir), "mcpServers": []})
    replayed = updates(frames, "tool_call")
    assert [(u["title"], u["kind"], u["status"]) for u in replayed] == [
        ("read_file: r.txt", "read", "completed"), ("write_file: w.txt", "edit", "completed"),
        ("edit_file: w.txt", "edit", "completed"), ("read_skill: greetings", "read", "completed"),
        ("bash: true", "execute", "completed")]


def test_slash_new_forgets_the_token_count_and_compact_only_when_the_history_changed(sessions_bob, workdir):
    """The token count drives automatic compression: after /new it is forgotten; after a
    /compact that changed nothing it is kept."""
    turns = [{"match": "Summarise", "replies": [{"text": "summary"}]},
             {"replies": [{"text": "big", "usage": {"input_tokens": 900}}]}]
    bob = sessions_bob(turns, context={"window": 1000, "threshold": 0.8, "keepLastTurns": 1})
    sid = bob.new_session()
    bob.prompt(sid, "one")
    _, frames = bob.prompt(sid, "/compact")  # one turn, keepLastTurns 1: nothing to compact
    assert message_text(frames).startswith("🗜️ nothing to compact")
    _, frames = bob.prompt(sid, "two")  # 900 > 800 was kept: this turn compresses first
    bob.wait_stderr("[acp] automatic compression — 🗜️ compressed")
    _, frames = bob.prompt(sid, "/new")
    count = bob.stderr().count("automatic compression")
    bob.prompt(sid, "three")  # the count was forgotten: no compression before this call
    assert bob.stderr().count("automatic compression") == count


def test_compact_waits_for_a_running_turn(sessions_bob, workdir):
    bob = sessions_bob([{"match": "Summarise", "replies": [{"text": "summary"}]},
                        {"match": "slow", "replies": [{"chunks": ["a", "b", "c"], "delay": 0.3}]},
                        {"replies": [{"text": "x"}]}])
    sid = bob.new_session()
    bob.prompt(sid, "first")
    bob.prompt(sid, "second")
    slow = bob.request_async("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "slow"}]})
    compact = bob.request_async("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "/compact"}]})
    order = []
    while len(order) < 2:
        frame = bob.read_frame()
        if "method" not in frame and frame.get("id") in (slow, compact):
            order.append(frame["id"])
    assert order == [slow, compact]


def test_prompts_wait_for_their_turn_in_arrival_order(scripted):
    """Eight prompts arriving a few milliseconds apart, behind a running turn, run in the order
    they arrived (a FIFO queue, not whichever waiter wakes first)."""
    bob, first = scripted([{"match": "hold", "replies": [{"chunks": ["h", "e", "l", "d"], "delay": 0.1}]},
                           {"replies": [{"text": "ok"}]}])
    others = [bob.new_session() for _ in range(8)]
    held = bob.request_async("session/prompt", {"sessionId": first, "prompt": [{"type": "text", "text": "hold"}]})
    ids = []
    for sid in others:
        ids.append(bob.request_async("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "x"}]}))
        time.sleep(0.013)
    answered = []
    while len(answered) < 9:
        frame = bob.read_frame()
        if "method" not in frame:
            answered.append(frame["id"])
    assert answered == [held] + ids


def test_a_prompt_routed_during_a_load_of_its_session_is_refused_not_lost(sessions_bob, workdir):
    bob = sessions_bob([{"replies": [{"text": "hi"}]}])
    sid = bob.new_session()
    bob.prompt(sid, "hello")
    load = bob.request_async("session/load", {"sessionId": sid, "cwd": str(workdir), "mcpServers": []})
    prompt = bob.request_async("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "now"}]})
    answers = {}
    while len(answers) < 2:
        frame = bob.read_frame()
        if "method" not in frame:
            answers[frame["id"]] = frame
    assert "result" in answers[load]
    refused = answers[prompt]
    if "error" in refused:  # routed while the load held the session: refused as for a running turn
        assert refused["error"]["code"] == -32600 and "being loaded" in refused["error"]["message"]
    else:  # routed once the load was done: it ran on the loaded conversation
        assert refused["result"]["stopReason"] == "end_turn"
    stored = json.loads((workdir / ".bob" / "sessions" / f"{sid}.json").read_text())
    assert [history.text_of(m) for m in stored["messages"] if m["role"] == "user"][:1] == ["hello"]


def test_a_load_routed_behind_a_prompt_of_its_session_is_refused(sessions_bob, workdir):
    bob = sessions_bob([{"replies": [{"chunks": ["a", "b"], "delay": 0.3}]}])
    sid = bob.new_session()
    prompt = bob.request_async("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "go"}]})
    response, _ = bob.call("session/load", {"sessionId": sid, "cwd": str(workdir), "mcpServers": []})
    assert response["error"]["code"] == -32600 and "turn running" in response["error"]["message"]
    assert bob.wait_response(prompt)[0]["result"]["stopReason"] == "end_turn"
