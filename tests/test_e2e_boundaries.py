"""Issue 13 against the real bob-acp: odd names, huge edits, crafted and shared session files,
a background child holding the pipe, model streams with lone surrogates."""

from __future__ import annotations

import json
import os
import uuid

import pytest
import yaml
from bob_client import allow, allow_always, message_text, updates
from procs import wait_gone

from bob_acp.context import history

pytestmark = pytest.mark.e2e


def test_a_non_utf8_file_name_and_home_reach_frames_and_history_safely(spawn_bob, tmp_path, workdir):
    folder = tmp_path / "extra-skills" / "odd"
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text("---\nname: odd\ndescription: Odd names.\n---\nRun it.\n")
    with open(os.path.join(os.fsencode(str(folder)), b"\xff\xfe.sh"), "wb") as handle:
        handle.write(b"#!/bin/sh\n")
    script = tmp_path / "s.yaml"
    script.write_text(yaml.safe_dump({"turns": [{"replies": [
        {"tool_calls": [{"name": "read_skill", "arguments": {"name": "odd"}}]},
        {"tool_calls": [{"name": "write_file", "arguments": {"path": "~/note.txt", "content": "hi"}}]},
        {"text": "done"}]}]}))
    home = os.fsdecode(os.fsencode(str(tmp_path)) + b"/h\xe9me")
    os.makedirs(home)
    bob = spawn_bob({"model": {"provider": "script", "script": str(script)}, "skills": {"dirs": [str(tmp_path / "extra-skills")]},
                     "sessions": {"enabled": True}}, env={"HOME": home})
    bob.initialize()
    sid = bob.new_session()
    response, frames = bob.prompt(sid, "go", answer=allow)
    assert response["result"]["stopReason"] == "end_turn" and message_text(frames) == "done"
    finals = [u for u in updates(frames, "tool_call_update") if u.get("status") == "completed"]
    assert "\ufffd\ufffd.sh" in finals[0]["rawOutput"]["output"]  # the update was sent, not dropped
    asked = [f for f in frames if f.get("method") == "session/request_permission"]
    assert len(asked) == 1 and "h\ufffdme/note.txt" in asked[0]["params"]["toolCall"]["locations"][0]["path"]
    assert os.path.exists(os.path.join(home, "note.txt"))  # the real path was used for the write
    stored = json.loads((workdir / ".bob" / "sessions" / f"{sid}.json").read_text())
    assert len(stored["messages"]) == 7  # every later save works too


def test_a_model_that_streams_lone_surrogates_completes_its_turn(spawn_bob, server, workdir):
    server.enqueue(server.raw_events(
        '{"choices":[{"index":0,"delta":{"content":"broken \\ud83d text"}}]}',
        '{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c1","type":"function","function":'
        '{"name":"write_file","arguments":"{\\"path\\": \\"s.txt\\", \\"content\\": \\"x\\\\udc00y\\"}"}}]}}]}',
        '{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}', "[DONE]"),
        server.openai_text("fine"))
    bob = spawn_bob({"model": {"baseUrl": server.url + "/v1", "retries": 0}, "sessions": {"enabled": True}})
    bob.initialize()
    sid = bob.new_session()
    response, frames = bob.prompt(sid, "go", answer=allow)
    assert response["result"]["stopReason"] == "end_turn"
    assert message_text(frames) == "broken \ufffd textfine"
    assert (workdir / "s.txt").read_text() == "x\ufffdy"
    assert bob.close() == 0
    again = spawn_bob({"model": {"baseUrl": server.url + "/v1"}, "sessions": {"enabled": True}})
    again.initialize()
    loaded, _ = again.call("session/load", {"sessionId": sid, "cwd": str(workdir), "mcpServers": []})
    assert loaded["result"] == {}


@pytest.mark.parametrize("ref", ["call_\u00b2", "call_" + "9" * 5000, "call_-3"])
def test_crafted_refs_in_a_session_file_are_invalid_params_not_internal_errors(spawn_bob, workdir, ref):
    from bob_acp import sessions
    from bob_acp.context import history
    sid = sessions.new_id()
    call = {"id": "x", "ref": ref, "name": "bash", "arguments": {"command": "ls"}}
    sessions.SessionStore(str(workdir), ".bob/sessions").save(sid, [
        history.system("s"), history.user("u"), history.assistant("", [call]), history.tool_result(call, "ok")])
    bob = spawn_bob({"sessions": {"enabled": True}})
    bob.initialize()
    response, _ = bob.call("session/load", {"sessionId": sid, "cwd": str(workdir), "mcpServers": []})
    assert "result" in response  # a ref Bob cannot number from is still a ref: replayed as it is
    _, frames = bob.prompt(sid, "again")
    for update in updates(frames, "tool_call"):
        assert update["toolCallId"] != ref


def test_two_processes_on_one_session_lose_no_turn(spawn_bob, tmp_path, workdir):
    script = tmp_path / "s.yaml"
    script.write_text(yaml.safe_dump({"turns": [{"replies": [{"text": "ok"}]}]}))
    config = {"model": {"provider": "script", "script": str(script)}, "sessions": {"enabled": True}}
    first = spawn_bob(config)
    first.initialize()
    sid = first.new_session()
    first.prompt(sid, "from the first window")
    second = spawn_bob(config)
    second.initialize()
    assert "result" in second.call("session/load", {"sessionId": sid, "cwd": str(workdir), "mcpServers": []})[0]
    second.prompt(sid, "from the second window")
    first.prompt(sid, "the first window again")  # its file changed since it wrote it: kept, this saved apart
    log = first.wait_stderr("its file changed on disk")
    forked = log.split("this conversation is saved as ")[1].split()[0]
    folder = workdir / ".bob" / "sessions"
    users = lambda name: [history.text_of(m) for m in json.loads((folder / f"{name}.json").read_text())["messages"]
                          if m["role"] == "user"]
    assert users(sid) == ["from the first window", "from the second window"]
    assert users(forked) == ["from the first window", "the first window again"]


def test_a_background_child_that_left_the_group_does_not_hold_the_call(scripted):
    marker = str(int(uuid.uuid4().hex[:8], 16))[:8]
    command = f"setsid sleep 60.{marker} & echo started"
    bob, sid = scripted([{"replies": [{"tool_calls": [{"name": "bash", "arguments": {"command": command}}]},
                                      {"text": "ok"}]}])
    try:
        response, frames = bob.prompt(sid, "go", answer=allow, timeout=30)
        final = updates(frames, "tool_call_update")[-1]
        assert final["status"] == "completed" and final["rawOutput"]["output"] == "started\n[exit code: 0]"
    finally:
        os.system(f"pkill -f 'sleep 60.{marker}'")
        assert wait_gone(marker) == []


def test_no_frame_exceeds_the_frame_cap_even_for_a_huge_edit(scripted, workdir):
    big = "".join(f"line {n:07d} of a large generated file\n" for n in range(300_000))  # ~11 MB
    (workdir / "big.txt").write_text(big)
    bob, sid = scripted([{"replies": [
        {"tool_calls": [{"name": "edit_file", "arguments": {"path": "big.txt", "old_string": "line 0150000 of",
                                                             "new_string": "LINE 0150000 OF"}}]},
        {"text": "ok"}]}])
    response, frames = bob.prompt(sid, "go", answer=allow_always, timeout=60)
    assert response["result"]["stopReason"] == "end_turn"
    assert (workdir / "big.txt").read_text() == big.replace("line 0150000 of", "LINE 0150000 OF")
    for frame in frames:
        assert len(json.dumps(frame, ensure_ascii=False).encode()) <= 4 * 1024 * 1024
    diff = updates(frames, "tool_call_update")[-1]["content"][0]
    assert diff["type"] == "diff" and "LINE 0150000 OF" in diff["newText"] and "unchanged line(s)" in diff["newText"]


@pytest.mark.parametrize("blocks", [[], [{"type": "text", "text": ""}], [{"type": "text", "text": "  \n"},
                                                                         {"type": "text", "text": "\t"}]])
def test_an_empty_prompt_is_invalid_params_and_never_reaches_the_model(spawn_bob, server, workdir, blocks):
    """CodeCompanion sends `prompt: []` after a failed session start: refused, nothing recorded."""
    bob = spawn_bob({"model": {"baseUrl": server.url + "/v1", "retries": 0}, "sessions": {"enabled": True}},
                    env={"OPENAI_API_KEY": "sk-empty-prompt-test"})
    bob.initialize()
    sid = bob.new_session()
    response, _ = bob.call("session/prompt", {"sessionId": sid, "prompt": blocks})
    assert response["error"]["code"] == -32602 and "nothing to send to the model" in response["error"]["message"]
    assert server.requests == []
    saved = json.loads((workdir / ".bob" / "sessions" / f"{sid}.json").read_text())
    assert [m["role"] for m in saved["messages"]] == ["system"]


def test_bobs_tools_never_write_through_a_hard_link_even_through_the_editor(spawn_bob, tmp_path, workdir, server):
    """A package manager's store links the same file into many projects (pnpm, uv): an edit of one
    project's name must not change the store's copy, nor every other project's."""
    store = tmp_path / "store"
    store.mkdir()
    (store / "lib.js").write_text("module.exports = 1\n")
    (store / "other.js").write_text("old\n")
    os.link(store / "lib.js", workdir / "lib.js")
    os.link(store / "other.js", workdir / "other.js")
    server.enqueue(server.openai_tool_call("edit_file", {"path": "lib.js", "old_string": "1", "new_string": "2"},
                                           call_id="e1"),
                   server.openai_tool_call("write_file", {"path": "other.js", "content": "new\n"}, call_id="w1"),
                   server.openai_text("done"))
    bob = spawn_bob({"model": {"baseUrl": server.url + "/v1", "retries": 0}, "tools": {"clientFs": True},
                     "permissions": {"mode": "allow-all"}}, env={"OPENAI_API_KEY": "sk-hard-link-test"})
    bob.initialize({"fs": {"readTextFile": True, "writeTextFile": True}})
    sid = bob.new_session()
    asked = []

    def editor(request):  # an editor that writes in place, as most do
        asked.append(request["method"])
        if request["method"] == "fs/read_text_file":
            return {"content": open(request["params"]["path"]).read()}
        with open(request["params"]["path"], "w") as handle:
            handle.write(request["params"]["content"])
        return {}

    bob.prompt(sid, "edit both", editor=editor)
    assert (workdir / "lib.js").read_text() == "module.exports = 2\n" and (workdir / "other.js").read_text() == "new\n"
    assert (store / "lib.js").read_text() == "module.exports = 1\n" and (store / "other.js").read_text() == "old\n"
    assert "fs/write_text_file" not in asked
