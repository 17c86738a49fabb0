"""Issue 18 against the real bob-acp: session history (list, resume, close, delete, titles),
the model and approval-mode selectors, command-scoped "always"; and, with none of those keys,
exactly the product document."""

from __future__ import annotations

import json
import os
import subprocess
import time

import pytest
import yaml
from bob_client import allow, allow_always, bob_command, message_text, updates

from bob_acp.context import history

pytestmark = pytest.mark.e2e

TURNS = [{"match": "tools", "replies": [
             {"tool_calls": [{"name": "bash", "arguments": {"command": "echo 1"}}]},
             {"tool_calls": [{"name": "bash", "arguments": {"command": "echo   1"}}]},
             {"tool_calls": [{"name": "bash", "arguments": {"command": "echo 2"}}]},
             {"tool_calls": [{"name": "write_file", "arguments": {"path": "w.txt", "content": "w"}}]},
             {"text": "done"}]},
         {"replies": [{"text": "hello"}]}]


@pytest.fixture
def history_bob(spawn_bob, tmp_path):
    def start(**extra):
        path = tmp_path / "script.yaml"
        path.write_text(yaml.safe_dump({"turns": TURNS}))
        cfg = {"model": {"provider": "script", "script": str(path), "choices": ["model-b", "model-c"]},
               "sessions": {"enabled": True}, "acp": {"sessionHistory": True, "configOptions": True}}
        for key, value in extra.items():
            cfg.setdefault(key, {}).update(value)
        bob = spawn_bob(cfg)
        return bob, bob.initialize()
    return start


def test_the_product_document_holds_without_the_keys(spawn_bob, workdir, tmp_path):
    bob = spawn_bob({"sessions": {"enabled": True}})
    init = bob.initialize()
    assert "sessionCapabilities" not in init["agentCapabilities"]
    response, _ = bob.call("session/new", {"cwd": str(workdir), "mcpServers": []})
    assert set(response["result"]) == {"sessionId"}  # no configOptions, no modes
    sid = response["result"]["sessionId"]
    for method in ("session/list", "session/resume", "session/close", "session/set_mode",
                   "session/set_config_option", "session/delete", "logout"):
        assert bob.call(method, {"sessionId": sid, "cwd": str(workdir)})[0]["error"]["code"] == -32601, method


def test_the_history_capabilities_are_advertised(history_bob):
    _, init = history_bob()
    assert init["agentCapabilities"]["sessionCapabilities"] == {"list": {}, "resume": {}, "close": {}, "delete": {}}


def test_session_history_needs_sessions_enabled(tmp_path, bob_env, write_config):
    path = write_config({"acp": {"sessionHistory": True}})
    proc = subprocess.run(bob_command() + ["--check"], input=b"", capture_output=True, env=bob_env, timeout=20)
    assert proc.returncode == 2 and "acp.sessionHistory" in proc.stderr.decode() and path in proc.stderr.decode()


def test_list_titles_paging_and_session_info_updates(history_bob, workdir):
    bob, _ = history_bob()
    sids = []
    for n in range(3):
        sid = bob.new_session()
        _, frames = bob.prompt(sid, f"Question number {n}\nwith a second line")
        info = updates(frames, "session_info_update")
        assert info[-1]["title"] == f"Question number {n}" and info[-1]["updatedAt"]
        _, frames = bob.prompt(sid, "again")
        again = updates(frames, "session_info_update")[-1]
        assert "title" not in again and again["updatedAt"]  # the title once, updatedAt every turn
        sids.append(sid)
        time.sleep(0.01)  # distinct change times
    listed = bob.result("session/list", {"cwd": str(workdir)})
    assert [s["sessionId"] for s in listed["sessions"]][:3] == sids[::-1]  # newest first
    assert listed["sessions"][0]["title"] == "Question number 2" and listed["sessions"][0]["cwd"] == str(workdir)
    long = "x" * 200
    sid = bob.new_session()
    bob.prompt(sid, long)
    title = bob.result("session/list", {"cwd": str(workdir)})["sessions"][0]["title"]
    assert len(title) == 80 and title.endswith("…")


def test_a_thousand_sessions_are_paged_without_reading_whole_files(history_bob, workdir):
    from bob_acp import sessions
    from bob_acp.context import history
    store = sessions.SessionStore(str(workdir), ".bob/sessions")
    big = "y" * 200_000  # every file large: a listing reads only its head
    for n in range(1000):
        store.save(sessions.new_id(), [history.system(big), history.user(f"topic {n}")], title=f"topic {n}")
    bob, _ = history_bob()
    seen, cursor = [], None
    started = time.monotonic()
    while True:
        params = {"cwd": str(workdir), **({"cursor": cursor} if cursor else {})}
        page = bob.result("session/list", params)
        seen += [s["sessionId"] for s in page["sessions"]]
        cursor = page.get("nextCursor")
        if not cursor:
            break
    assert len(seen) == len(set(seen)) == 1000
    assert time.monotonic() - started < 20  # (20 pages; each reads 50 file heads, not 50 x 200 kB)
    bad = bob.call("session/list", {"cwd": str(workdir), "cursor": "not-a-cursor"})[0]
    assert bad["error"]["code"] == -32602


def test_resume_registers_without_replay_and_the_model_sees_everything(history_bob, workdir, spawn_bob):
    bob, _ = history_bob()
    sid = bob.new_session()
    bob.prompt(sid, "remember the word pineapple")
    bob.close()
    again, _ = history_bob()
    response, frames = again.call("session/resume", {"sessionId": sid, "cwd": str(workdir), "mcpServers": []})
    assert "configOptions" in response["result"] and frames == []  # no replay: the client has it
    again.prompt(sid, "what was the word?")
    stored = json.loads((workdir / ".bob" / "sessions" / f"{sid}.json").read_text())
    assert [history.text_of(m) for m in stored["messages"] if m["role"] == "user"] == [
        "remember the word pineapple", "what was the word?"]


def test_close_drops_the_session_and_keeps_its_file(history_bob, workdir):
    bob, _ = history_bob()
    sid = bob.new_session()
    bob.prompt(sid, "hi")
    assert bob.result("session/close", {"sessionId": sid}) == {}
    response, _ = bob.prompt(sid, "still there?")
    assert response["error"]["code"] == -32602 and "session not found" in response["error"]["message"]
    assert (workdir / ".bob" / "sessions" / f"{sid}.json").exists()


def test_delete_removes_the_file_refuses_a_running_turn_and_is_silent_for_a_stranger(history_bob, workdir):
    bob, _ = history_bob()
    sid = bob.new_session()
    running = bob.request_async("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "tools"}]})
    while not any(f.get("method") == "session/request_permission" for f in bob.frames):
        bob.read_frame()
    refused, _ = bob.call("session/delete", {"sessionId": sid})
    assert refused["error"]["code"] == -32600
    bob.notify("session/cancel", {"sessionId": sid})
    bob.wait_response(running)
    assert bob.result("session/delete", {"sessionId": sid}) == {}
    assert not (workdir / ".bob" / "sessions" / f"{sid}.json").exists()
    assert bob.result("session/delete", {"sessionId": sid}) == {}  # deleted already: silently fine
    assert bob.result("session/delete", {"sessionId": "20260101-000000-00000000"}) == {}  # never was
    malformed, _ = bob.call("session/delete", {"sessionId": "../x"})
    assert malformed["error"]["code"] == -32602


def test_list_and_delete_with_the_sessions_folder_deleted_under_bob(history_bob, workdir):
    import shutil
    bob, _ = history_bob()
    sid = bob.new_session()
    bob.prompt(sid, "hi")
    shutil.rmtree(workdir / ".bob")
    assert bob.result("session/list", {"cwd": str(workdir)}) == {"sessions": []}
    assert bob.result("session/list", {}) == {"sessions": []}
    assert bob.result("session/delete", {"sessionId": "20260101-000000-00000000"}) == {}
    (workdir / ".bob").write_text("a file where the folder was")
    assert bob.result("session/list", {"cwd": str(workdir)}) == {"sessions": []}
    assert bob.result("session/delete", {"sessionId": sid}) == {}


def test_list_leaves_out_sessions_nobody_wrote_in(history_bob, workdir):
    bob, _ = history_bob()
    empty = bob.new_session()
    used = bob.new_session()
    bob.prompt(used, "hi")
    listed = [s["sessionId"] for s in bob.result("session/list", {"cwd": str(workdir)})["sessions"]]
    assert listed == [used] and empty not in listed


def test_resume_sends_the_slash_commands(history_bob, workdir):
    bob, _ = history_bob()
    sid = bob.new_session()
    bob.prompt(sid, "hi")
    bob.close()
    again, _ = history_bob()
    response, frames = again.call("session/resume", {"sessionId": sid, "cwd": str(workdir), "mcpServers": []})
    assert "result" in response
    while not updates(again.frames, "available_commands_update"):
        again.read_frame()
    assert [c["name"] for c in updates(again.frames, "available_commands_update")[0]["availableCommands"]][:2] == [
        "new", "compact"]


def test_the_conversation_new_keeps_is_listed_with_its_own_title(history_bob, workdir):
    bob, _ = history_bob()
    sid = bob.new_session()
    bob.prompt(sid, "the old topic")
    bob.prompt(sid, "/new")
    bob.prompt(sid, "the new topic")
    titles = {s["title"] for s in bob.result("session/list", {"cwd": str(workdir)})["sessions"]}
    assert {"the old topic", "the new topic"} <= titles


def test_model_and_mode_selectors(history_bob, workdir, server):
    bob, _ = history_bob()
    response, _ = bob.call("session/new", {"cwd": str(workdir), "mcpServers": []})
    result = response["result"]
    model, mode = result["configOptions"]
    assert model["id"] == "model" and model["category"] == "model" and model["currentValue"] == "gpt-4.1-mini"
    assert [o["value"] for o in model["options"]] == ["gpt-4.1-mini", "model-b", "model-c"]
    assert mode["category"] == "mode" and [o["value"] for o in mode["options"]] == ["ask", "allow-edits", "allow-all"]
    assert result["modes"]["currentModeId"] == "ask"
    sid = result["sessionId"]
    changed, frames = bob.call("session/set_config_option", {"sessionId": sid, "configId": "model", "value": "model-b"})
    assert changed["result"]["configOptions"][0]["currentValue"] == "model-b"
    assert updates(frames, "config_option_update")
    _, frames = bob.call("session/set_mode", {"sessionId": sid, "modeId": "allow-edits"})
    assert updates(frames, "current_mode_update")[0]["currentModeId"] == "allow-edits"
    bad, _ = bob.call("session/set_config_option", {"sessionId": sid, "configId": "model", "value": "gpt-9"})
    assert bad["error"]["code"] == -32602
    stored = json.loads((workdir / ".bob" / "sessions" / f"{sid}.json").read_text())
    assert stored["choices"] == {"model": "model-b", "mode": "allow-edits"}
    bob.close()
    again, _ = history_bob()
    loaded, frames = again.call("session/load", {"sessionId": sid, "cwd": str(workdir), "mcpServers": []})
    assert loaded["result"]["configOptions"][0]["currentValue"] == "model-b"
    # allow-edits asks less than the configured `ask`: the session goes on in `ask`, and says so.
    assert loaded["result"]["modes"]["currentModeId"] == "ask"
    assert "saved in approval mode `allow-edits`; it continues in `ask`" in message_text(frames)
    again.close()
    third, _ = history_bob(permissions={"mode": "allow-all"})
    loaded, frames = third.call("session/load", {"sessionId": sid, "cwd": str(workdir), "mcpServers": []})
    assert loaded["result"]["modes"]["currentModeId"] == "allow-edits"  # asks more than allow-all: kept
    assert "approval mode" not in message_text(frames)


def test_the_chosen_model_is_used_by_the_next_model_call(spawn_bob, server, workdir):
    server.enqueue(server.openai_text("one"), server.openai_text("two"))
    bob = spawn_bob({"model": {"baseUrl": server.url + "/v1", "retries": 0, "choices": ["other-model"]},
                     "acp": {"configOptions": True}})
    bob.initialize()
    sid = bob.new_session()
    bob.prompt(sid, "a")
    bob.result("session/set_config_option", {"sessionId": sid, "configId": "model", "value": "other-model"})
    bob.prompt(sid, "b")
    assert [r["body"]["model"] for r in server.requests] == ["gpt-4.1-mini", "other-model"]


@pytest.mark.parametrize("mode, asked", [
    ("ask", ["bash: echo 1", "bash: echo   1", "bash: echo 2", "write_file: w.txt"]),
    ("allow-edits", ["bash: echo 1", "bash: echo   1", "bash: echo 2"]),
    ("allow-all", []),
])
def test_permission_modes(history_bob, mode, asked):
    bob, _ = history_bob(permissions={"mode": mode})
    sid = bob.new_session()
    titles = []
    bob.prompt(sid, "tools", answer=lambda req: titles.append(req["params"]["toolCall"]["title"]) or allow(req))
    assert titles == asked
    if mode != "ask":
        bob.wait_stderr("run without asking (permissions.mode")


def test_allow_always_per_command(history_bob):
    bob, _ = history_bob(permissions={"allowAlways": "command"})
    sid = bob.new_session()
    asked = []

    def answer(request):
        asked.append(request["params"]["toolCall"]["title"])
        assert "`bash: echo 1`" in request["params"]["options"][1]["name"] or asked[-1] != "bash: echo 1"
        return allow_always(request)

    bob.prompt(sid, "tools", answer=answer)
    # `echo   1` is the same command, white space normalised: not asked again; `echo 2` is another
    assert asked == ["bash: echo 1", "bash: echo 2", "write_file: w.txt"]


def test_allow_always_per_tool_name_is_the_default(history_bob):
    bob, _ = history_bob()
    sid = bob.new_session()
    asked = []
    bob.prompt(sid, "tools", answer=lambda req: asked.append(req["params"]["toolCall"]["title"]) or allow_always(req))
    assert asked == ["bash: echo 1", "write_file: w.txt"]


def test_acpx_lists_the_sessions(history_bob, workdir, bob_env, tmp_path):
    import js_clients
    bob, _ = history_bob()
    sid = bob.new_session()
    bob.prompt(sid, "a listed session")
    bob.close()
    home = tmp_path / "acpx-home"
    home.mkdir()
    env = {**bob_env, "HOME": str(home)}
    try:
        proc = subprocess.run([js_clients.bin_path("acpx"), "--agent", " ".join(bob_command()), "--cwd", str(workdir),
                               "sessions", "list"], capture_output=True, text=True, env=env, timeout=60)
        assert proc.returncode == 0, proc.stderr
        assert sid in proc.stdout
    finally:
        import hashlib
        import shutil
        shutil.rmtree(os.path.join("/tmp", "acpx-" + hashlib.sha256(str(home).encode()).hexdigest()[:10]),
                      ignore_errors=True)


@pytest.mark.parametrize("provider, level, sent", [
    ("openai", "high", ("reasoning_effort", "high")),
    ("anthropic", "medium", ("thinking", {"type": "enabled", "budget_tokens": 16384})),
])
def test_the_reasoning_level_selector_reaches_the_next_model_call_and_is_kept(spawn_bob, server, workdir,
                                                                              provider, level, sent):
    reply = server.openai_text if provider == "openai" else server.anthropic_text
    server.enqueue(reply("one"), reply("two"), reply("three"))
    config = {"model": {"provider": provider, "baseUrl": server.url + ("/v1" if provider == "openai" else ""),
                        "retries": 0}, "acp": {"configOptions": True}, "sessions": {"enabled": True}}
    env = {"OPENAI_API_KEY": "sk-level-0123456789", "ANTHROPIC_API_KEY": "sk-level-0123456789"}
    bob = spawn_bob(config, env=env)
    bob.initialize()
    response, _ = bob.call("session/new", {"cwd": str(workdir), "mcpServers": []})
    sid = response["result"]["sessionId"]
    option = [o for o in response["result"]["configOptions"] if o["id"] == "reasoning"][0]
    assert option["category"] == "thought_level" and option["currentValue"] == "default"
    bob.prompt(sid, "a")
    assert sent[0] not in server.requests[-1]["body"]
    changed = bob.result("session/set_config_option", {"sessionId": sid, "configId": "reasoning", "value": level})
    assert [o for o in changed["configOptions"] if o["id"] == "reasoning"][0]["currentValue"] == level
    bob.prompt(sid, "b")
    assert server.requests[-1]["body"][sent[0]] == sent[1]
    bad, _ = bob.call("session/set_config_option", {"sessionId": sid, "configId": "reasoning", "value": "extreme"})
    assert bad["error"]["code"] == -32602
    bob.close()
    again = spawn_bob(config, env=env)
    again.initialize()
    loaded = again.result("session/load", {"sessionId": sid, "cwd": str(workdir), "mcpServers": []})
    assert [o for o in loaded["configOptions"] if o["id"] == "reasoning"][0]["currentValue"] == level
    again.prompt(sid, "c")
    assert server.requests[-1]["body"][sent[0]] == sent[1]
