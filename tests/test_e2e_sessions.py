"""/new, /compact and sessions on disk end to end (issues: skills/commands and sessions)."""

import json
import os
import re

import pytest
import yaml
from bob_client import allow_always, message_text, updates

from bob_acp.context import history

pytestmark = pytest.mark.e2e

SCRIPT = {
    "turns": [
        {"match": "Summarise this conversation", "replies": [{"text": "The user asked for files; Bob listed them."}]},
        {"match": "list", "replies": [
            {"text": "Listing.", "tool_calls": [{"name": "bash", "arguments": {"command": "echo a.txt"}}]},
            {"text": "There is a.txt."},
        ]},
        {"match": "write", "replies": [
            {"tool_calls": [{"name": "write_file", "arguments": {"path": "w.txt", "content": "w\n"}}]},
            {"text": "Written."},
        ]},
        {"match": "remember", "replies": [{"text": "I remember."}]},
        {"match": "cancel me", "replies": [{"chunks": ["slow", "er"], "delay": 3}]},
        {"replies": [{"text": "plain answer"}]},
    ],
}


@pytest.fixture
def bob_with_sessions(spawn_bob, tmp_path):
    def start(extra=None, sessions=True):
        path = tmp_path / "script.yaml"
        path.write_text(yaml.safe_dump(SCRIPT), encoding="utf-8")
        cfg = {"model": {"provider": "script", "script": str(path)}, "sessions": {"enabled": sessions},
               "context": {"keepLastTurns": 1}}
        for key, value in (extra or {}).items():
            cfg.setdefault(key, {}).update(value)
        bob = spawn_bob(cfg)
        bob.initialize()
        return bob
    return start


def session_file(workdir, sid):
    return workdir / ".bob" / "sessions" / f"{sid}.json"


def stored(workdir, sid):
    return json.loads(session_file(workdir, sid).read_text())


def test_session_file_written_at_new_and_after_every_turn(bob_with_sessions, workdir):
    bob = bob_with_sessions()
    sid = bob.new_session()
    data = stored(workdir, sid)
    assert data["version"] == 3 and data["id"] == sid and [m["role"] for m in data["messages"]] == ["system"]
    bob.prompt(sid, "list the files", answer=allow_always)
    roles = [m["role"] for m in stored(workdir, sid)["messages"]]
    assert roles == ["system", "user", "assistant", "tool", "assistant"]


def test_slash_new_forgets_keeps_the_old_conversation_and_the_grants(bob_with_sessions, workdir):
    bob = bob_with_sessions()
    sid = bob.new_session()
    bob.prompt(sid, "list the files", answer=allow_always)
    response, frames = bob.prompt(sid, "  /new  ")
    assert response["result"] == {"stopReason": "end_turn"}
    assert message_text(frames) == "🆕 New session: 4 message(s) forgotten."
    text = bob.wait_stderr(f"[acp] session {sid}: new session, 4 message(s) forgotten")
    kept_as = re.search(rf"\[acp\] session {sid}: previous conversation kept as (\S+)", text).group(1)
    assert [m["role"] for m in stored(workdir, kept_as)["messages"]] == ["system", "user", "assistant", "tool", "assistant"]
    assert [m["role"] for m in stored(workdir, sid)["messages"]] == ["system"]
    # the allow-always grant for bash survives /new: no permission asked now
    response, frames = bob.prompt(sid, "list again", answer=lambda req: pytest.fail("asked again"))
    assert response["result"]["stopReason"] == "end_turn"


def test_slash_new_on_an_empty_conversation_saves_nothing(bob_with_sessions, workdir):
    bob = bob_with_sessions()
    sid = bob.new_session()
    _, frames = bob.prompt(sid, "/new")
    assert message_text(frames) == "🆕 New session: 0 message(s) forgotten."
    assert os.listdir(workdir / ".bob" / "sessions") == [f"{sid}.json"]


def test_slash_compact_three_outcomes(bob_with_sessions, workdir):
    bob = bob_with_sessions()
    sid = bob.new_session()
    bob.prompt(sid, "hello")
    _, frames = bob.prompt(sid, "/compact")
    assert message_text(frames) == "🗜️ nothing to compact: 2 message(s), no turn older than the last 1"
    bob.prompt(sid, "list the files", answer=allow_always)
    _, frames = bob.prompt(sid, "/compact")
    line = message_text(frames)
    assert re.fullmatch(r"🗜️ compressed 2 messages → 1 summary \+ 4 kept \([\d,]+ tokens, \d+\.\ds\)", line), line
    bob.wait_stderr(f"[acp] session {sid}: /compact — {line}")
    messages = stored(workdir, sid)["messages"]
    assert messages[1]["summary"] is True and "Bob listed them" in history.text_of(messages[1])


def test_slash_compact_failure_keeps_the_history(spawn_bob, tmp_path, workdir):
    path = tmp_path / "script.yaml"
    path.write_text(yaml.safe_dump({"turns": [
        {"match": "Summarise", "replies": [{"error": "model API 503: overloaded"}]},
        {"replies": [{"text": "a"}]}]}))
    bob = spawn_bob({"model": {"provider": "script", "script": str(path)}, "context": {"keepLastTurns": 0}})
    bob.initialize()
    sid = bob.new_session()
    bob.prompt(sid, "one")
    _, frames = bob.prompt(sid, "/compact")
    assert message_text(frames) == "[compact: failed, history kept: model API 503: overloaded]"


def test_commands_without_a_model_never_reach_one(spawn_bob):
    bob = spawn_bob()
    bob.initialize()
    sid = bob.new_session()
    _, frames = bob.prompt(sid, "/new")
    assert message_text(frames) == "🆕 New session: 0 message(s) forgotten."


def test_without_a_model_the_history_answers_and_only_what_needs_the_model_asks_for_sign_in(spawn_bob, workdir):
    """The full profile with no model yet (acp.auth): a registry probe or agent-shell lists, closes
    and deletes sessions; new, load, resume and prompt answer "authentication required"."""
    sid = "20260101-000000-0000abcd"
    folder = workdir / ".bob" / "sessions"
    folder.mkdir(parents=True)
    saved = {"version": 3, "id": sid, "cwd": str(workdir), "title": "an old talk", "createdAt": "2026-01-01T00:00:00Z",
             "updatedAt": "2026-01-01T00:00:00Z", "generation": 1, "choices": {}, "turns": 1,
             "messages": [history.system("s"), history.user("an old talk"), history.assistant("yes")]}
    (folder / f"{sid}.json").write_text(json.dumps(saved))
    bob = spawn_bob({"acp": {"auth": True, "sessionHistory": True}, "sessions": {"enabled": True}})
    bob.initialize()
    listed = bob.result("session/list", {"cwd": str(workdir)})["sessions"]
    assert [(s["sessionId"], s["title"]) for s in listed] == [(sid, "an old talk")]
    closed, _ = bob.call("session/close", {"sessionId": sid})  # (not open in this process: said so, not "sign in")
    assert closed["error"]["code"] == -32602 and "session not found" in closed["error"]["message"]
    for method, params in (("session/new", {"cwd": str(workdir), "mcpServers": []}),
                           ("session/load", {"sessionId": sid, "cwd": str(workdir), "mcpServers": []}),
                           ("session/resume", {"sessionId": sid, "cwd": str(workdir), "mcpServers": []}),
                           ("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "hi"}]})):
        response, _ = bob.call(method, params)
        assert response["error"]["code"] == -32000, (method, response)
    assert bob.result("session/delete", {"sessionId": sid, "cwd": str(workdir)}) == {}
    assert not (folder / f"{sid}.json").exists() and bob.result("session/list", {"cwd": str(workdir)})["sessions"] == []


def test_load_replays_everything_then_commands_then_answers(bob_with_sessions, workdir):
    bob = bob_with_sessions()
    sid = bob.new_session()
    bob.prompt(sid, "list the files", answer=allow_always)
    bob.prompt(sid, "write it", answer=allow_always)
    bob.prompt(sid, "hello")
    bob.prompt(sid, "/compact")
    assert bob.close() == 0

    bob2 = bob_with_sessions()
    msg_id = bob2.request_async("session/load", {"sessionId": sid, "cwd": str(workdir), "mcpServers": []})
    response, frames = bob2.wait_response(msg_id)
    assert response["result"] == {}
    kinds = [f["params"]["update"]["sessionUpdate"] for f in frames]
    assert kinds[-1] == "available_commands_update"
    replay = [f["params"]["update"] for f in frames[:-1]]
    ids = [u.pop("messageId") for u in replay]  # every replayed message has an id of its own
    assert len(set(ids)) == len(ids)
    assert replay[0] == {"sessionUpdate": "agent_message_chunk",
                         "content": {"type": "text", "text": "🗜️ The user asked for files; Bob listed them."}}
    assert replay[1] == {"sessionUpdate": "user_message_chunk", "content": {"type": "text", "text": "hello"}}
    assert replay[2] == {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "plain answer"}}
    count = len(stored(workdir, sid)["messages"]) - 1
    bob2.wait_stderr(f"[acp] session {sid} loaded from {workdir}/.bob/sessions: {count} message(s) replayed")
    response, frames = bob2.prompt(sid, "remember?")
    assert message_text(frames) == "I remember."


def test_load_replays_tool_calls_completed_and_failed(bob_with_sessions, workdir):
    from bob_acp import sessions
    from bob_acp.context import history
    sid = sessions.new_id()
    ok = {"id": "x1", "ref": "call_41", "name": "bash", "arguments": {"command": "ls"}}
    lost = {"id": "x2", "ref": "call_42", "name": "edit_file", "arguments": {"path": "a", "old_string": "b", "new_string": "c"}}
    sessions.SessionStore(str(workdir), ".bob/sessions").save(sid, [
        history.system("old system prompt"), history.user("go"), history.assistant("", [ok]),
        history.tool_result(ok, "a.txt\n"), history.assistant("", [lost])])
    bob = bob_with_sessions()
    response, frames = bob.call("session/load", {"sessionId": sid, "cwd": str(workdir), "mcpServers": []})
    replay = [f["params"]["update"] for f in frames]
    assert replay[1] == {"sessionUpdate": "tool_call", "toolCallId": "call_41", "title": "bash: ls", "kind": "execute",
                         "status": "completed", "rawInput": {"command": "ls"}, "rawOutput": {"output": "a.txt\n"},
                         "content": [{"type": "content", "content": {"type": "text", "text": "```console\na.txt\n```"}}]}
    assert replay[2] == {"sessionUpdate": "tool_call", "toolCallId": "call_42", "title": "edit_file: a", "kind": "edit",
                         "status": "failed", "rawInput": lost["arguments"], "locations": [{"path": str(workdir / "a")}]}
    # a new call in this process never reuses a replayed id
    _, frames = bob.prompt(sid, "list the files", answer=allow_always)
    new_ids = [u["toolCallId"] for u in updates(frames, "tool_call")]
    assert all(int(i[5:]) > 42 for i in new_ids)


@pytest.mark.parametrize("sid, reason", [
    ("../../etc/passwd", "not a valid session id"),
    ("20260101-000000-deadbee\x00", "not a valid session id"),
    ("20260101-000000-deadbeef", "not found"),
])
def test_load_refuses_bad_and_unknown_ids(bob_with_sessions, workdir, sid, reason):
    bob = bob_with_sessions()
    response, _ = bob.call("session/load", {"sessionId": sid, "cwd": str(workdir), "mcpServers": []})
    assert response["error"]["code"] == -32602
    assert response["error"]["data"]["sessionId"] == sid and reason in response["error"]["data"]["error"]
    assert not (workdir.parent / "etc").exists()


def test_load_of_a_corrupt_file_is_invalid_params(bob_with_sessions, workdir):
    bob = bob_with_sessions()
    sid = bob.new_session()
    session_file(workdir, sid).write_text("{torn")
    bob2 = bob_with_sessions()
    response, _ = bob2.call("session/load", {"sessionId": sid, "cwd": str(workdir), "mcpServers": []})
    assert response["error"]["code"] == -32602 and "not valid JSON" in response["error"]["data"]["error"]


def test_load_while_its_turn_runs_is_refused(bob_with_sessions, workdir):
    bob = bob_with_sessions()
    sid = bob.new_session()
    msg_id = bob.request_async("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "cancel me"}]})
    while True:
        frame = bob.read_frame()
        if frame.get("method") == "session/update":
            break
    response, _ = bob.call("session/load", {"sessionId": sid, "cwd": str(workdir), "mcpServers": []})
    assert response["error"]["code"] == -32600
    bob.notify("session/cancel", {"sessionId": sid})
    assert bob.wait_response(msg_id)[0]["result"]["stopReason"] == "cancelled"
    # the cancelled turn is saved too, with what was streamed
    assert stored(workdir, sid)["messages"][-1] == {"role": "assistant", "content": "slow"}


def test_no_api_key_in_the_session_file(bob_with_sessions, workdir, spawn_bob, tmp_path):
    bob = spawn_bob({"sessions": {"enabled": True}, "model": {"baseUrl": "http://127.0.0.1:9/v1", "retries": 0}},
                    env={"OPENAI_API_KEY": "sk-test-SECRET-123456"})
    bob.initialize()
    sid = bob.new_session()
    response, _ = bob.prompt(sid, "hi")
    assert "sk-test-SECRET-123456" not in json.dumps(response)
    assert "sk-test-SECRET-123456" not in session_file(workdir, sid).read_text()
    assert bob.close() == 0
    assert "sk-test-SECRET-123456" not in bob.stderr()
