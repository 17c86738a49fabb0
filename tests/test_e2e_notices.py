"""Notices and compactions (the official SDKs' `session.notices` and `session.compaction`): sent
to a client that advertised them, each frame checked against the SDK's schema (tests/acp_schema.py
refuses any of them sent to a client that did not advertise it); a client that did not gets what
it got before: an agent message, or nothing."""

from __future__ import annotations

import pytest
from bob_client import message_text, script_config, updates

NOTICES = {"session": {"notices": {}}}
COMPACTION = {"session": {"compaction": {}}}
BOTH = {"session": {"notices": {}, "compaction": {}}}
KEY = "sk-notice-test-0123456789"


def notices(frames):
    return updates(frames, "notice")


def test_a_retry_is_a_notice_to_a_client_that_shows_them(spawn_bob, server):
    server.enqueue(server.status(503, {"error": {"message": "overloaded"}}), server.openai_text("after"))
    bob = spawn_bob({"model": {"baseUrl": server.url + "/v1", "retries": 1}}, env={"OPENAI_API_KEY": KEY})
    bob.initialize(NOTICES)
    sid = bob.new_session()
    response, frames = bob.prompt(sid, "hi")
    assert response["result"]["stopReason"] == "end_turn" and message_text(frames) == "after"
    (said,) = notices(frames)
    assert said["severity"] == "warning" and said["title"].startswith("The model call is retried in ")
    assert said["description"].startswith("model API 503: overloaded")
    assert not [f for f in frames if f.get("method") == "_bob/retry"]  # (only to a client that asked for it)


@pytest.mark.parametrize("capabilities", [COMPACTION, BOTH])
def test_compact_and_automatic_compression_are_compactions_to_a_client_that_follows_them(
        spawn_bob, tmp_path, capabilities):
    turns = [{"match": "Summarise", "replies": [{"text": "They talked about one and two."}]},
             {"replies": [{"text": "big", "usage": {"input_tokens": 900}}]}]
    bob = spawn_bob({**script_config(tmp_path, turns), "context": {"window": 1000, "threshold": 0.8, "keepLastTurns": 1}})
    bob.initialize(capabilities)
    sid = bob.new_session()
    bob.prompt(sid, "one")
    bob.prompt(sid, "two")  # 900 tokens > 80 % of 1000: the next turn compresses first
    _, automatic = bob.prompt(sid, "three")
    _, compact = bob.prompt(sid, "/compact")
    for frames in (automatic, compact):
        steps = [u for u in updates(frames) if u["sessionUpdate"].startswith("compaction")]
        assert [u["sessionUpdate"] for u in steps] == ["compaction_update", "compaction_summary_chunk",
                                                       "compaction_update"]
        assert [u.get("status") for u in steps] == ["in_progress", None, "completed"]
        assert len({u["compactionId"] for u in steps}) == 1
        assert steps[1]["content"] == {"type": "text", "text": "They talked about one and two."}
        assert notices(frames) == []  # (a client that follows compactions is told in them, not twice)
    assert {u["compactionId"] for u in updates(automatic) if "compactionId" in u}.isdisjoint(
        u["compactionId"] for u in updates(compact) if "compactionId" in u)
    assert message_text(compact).startswith("🗜️ compressed")  # the command's own answer, as before


def test_a_failed_compression_is_a_failed_compaction_and_a_notice_without_compactions(spawn_bob, server):
    for capabilities in (COMPACTION, NOTICES, {}):
        server.enqueue(server.openai_text("a"), server.openai_text("b", usage=900),
                       server.status(400, {"error": {"message": "no summaries today"}}), server.openai_text("c"))
        bob = spawn_bob({"model": {"baseUrl": server.url + "/v1", "retries": 0},
                         "context": {"window": 1000, "threshold": 0.8, "keepLastTurns": 1}},
                        env={"OPENAI_API_KEY": KEY})
        bob.initialize(capabilities)
        sid = bob.new_session()
        bob.prompt(sid, "one")
        bob.prompt(sid, "two")
        response, frames = bob.prompt(sid, "three")
        assert response["result"]["stopReason"] == "end_turn" and message_text(frames).endswith("c")
        steps = [u for u in updates(frames) if u["sessionUpdate"] == "compaction_update"]
        if capabilities is COMPACTION:
            assert [u["status"] for u in steps] == ["in_progress", "failed"]
            assert "no summaries today" in steps[1]["error"] and notices(frames) == []
        elif capabilities is NOTICES:
            (said,) = notices(frames)
            assert said["title"] == "The conversation could not be summarised; it is kept whole"
            assert "no summaries today" in said["description"] and not steps
        else:
            assert message_text(frames).startswith("⚠️ The history is near the context window and automatic "
                                                   "compression failed (model API 400")
        bob.close()


def test_a_server_that_failed_and_a_sandbox_that_cannot_be_had_are_notices(spawn_bob, tmp_path, workdir):
    turns = [{"replies": [{"text": "hello"}]}]
    bob = spawn_bob({**script_config(tmp_path, turns), "mcp": {"enabled": True}, "tools": {"sandbox": "workspace"}},
                    env={"BOB_ACP_NO_LANDLOCK": "1", "BOB_ACP_NO_NAMESPACES": "1"})  # (nothing confines)
    bob.initialize(NOTICES)
    missing = {"name": "gone", "command": str(tmp_path / "no-such-server"), "args": [], "env": []}
    response, _ = bob.call("session/new", {"cwd": str(workdir), "mcpServers": [missing]})
    assert "sessionId" in response["result"]
    while len(notices(bob.frames)) < 2:
        bob.read_frame()
    titles = [n["title"] for n in notices(bob.frames)]
    assert any("gone" in t for t in titles), titles
    assert any(t.startswith("The sandbox (tools.sandbox: workspace) cannot be had here") for t in titles), titles
    assert "agent_message_chunk" not in [u["sessionUpdate"] for u in updates(bob.frames)]


def test_without_notices_a_server_that_failed_is_an_agent_message_as_before(spawn_bob, tmp_path, workdir):
    bob = spawn_bob({**script_config(tmp_path, [{"replies": [{"text": "hi"}]}]), "mcp": {"enabled": True}})
    bob.initialize()
    missing = {"name": "gone", "command": str(tmp_path / "no-such-server"), "args": [], "env": []}
    bob.call("session/new", {"cwd": str(workdir), "mcpServers": [missing]})
    while not updates(bob.frames, "agent_message_chunk"):
        bob.read_frame()
    (line,) = updates(bob.frames, "agent_message_chunk")
    assert line["content"]["text"].startswith("⚠️ ") and "gone" in line["content"]["text"]
