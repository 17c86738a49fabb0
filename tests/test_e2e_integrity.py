"""Issue 23 against the real bob-acp: session files that stay valid and single, frames within the
cap, invalid params where values are bad, and what editors see after a resume, a fork or a load."""

from __future__ import annotations

import json
import os
import subprocess

import pytest
import yaml
from bob_client import FRAME_CAP, allow, bob_command, dump_yaml, message_text, reject, updates
from fake_model import Response, _sse

pytestmark = pytest.mark.e2e


def sessions_of(workdir):
    folder = workdir / ".bob" / "sessions"
    return sorted(p.name for p in folder.iterdir() if p.suffix == ".json") if folder.exists() else []


@pytest.fixture
def bob_script(spawn_bob, tmp_path):
    def start(turns, **config):
        path = tmp_path / "script.yaml"
        path.write_text(dump_yaml({"turns": turns}))
        cfg = {"model": {"provider": "script", "script": str(path)}, "sessions": {"enabled": True},
               "acp": {"sessionHistory": True, "configOptions": True}}
        for key, value in config.items():
            cfg.setdefault(key, {}).update(value)
        bob = spawn_bob(cfg)
        bob.initialize()
        return bob
    return start


def test_mode_changes_racing_turns_never_fork_the_session(bob_script, workdir):
    bob = bob_script([{"replies": [{"tool_calls": [{"name": "bash", "arguments": {"command": "true"}}]},
                                   {"text": "done"}]}], permissions={"mode": "allow-all"})
    sid = bob.new_session()
    ids = []
    for n in range(60):
        ids.append(bob.request_async("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": f"p{n}"}]}))
        bob.request_async("session/set_mode", {"sessionId": sid, "modeId": "allow-all" if n % 2 else "ask"})
    for msg_id in ids:
        response, _ = bob.wait_response(msg_id, answer=allow, timeout=60)
        assert "result" in response
    assert sessions_of(workdir) == [f"{sid}.json"]
    assert "another Bob" not in message_text(bob.frames) and "changed on disk" not in bob.stderr()


def test_a_save_in_the_middle_of_a_turn_loads_into_a_history_the_api_accepts(spawn_bob, server, workdir):
    server.enqueue(server.openai_tool_call("bash", {"command": "echo hi"}, call_id="c1"), server.openai_text("resumed"))
    cfg = {"model": {"baseUrl": server.url + "/v1", "retries": 0}, "sessions": {"enabled": True},
           "acp": {"configOptions": True}}
    bob = spawn_bob(cfg, env={"OPENAI_API_KEY": "sk-integrity-0123456789"})
    bob.initialize()
    sid = bob.new_session()
    bob.request_async("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "go"}]})
    while not any(f.get("method") == "session/request_permission" for f in bob.frames):
        bob.read_frame()
    bob.result("session/set_mode", {"sessionId": sid, "modeId": "ask"})  # (a change: saves mid-turn)
    bob.result("session/set_config_option", {"sessionId": sid, "configId": "mode", "value": "allow-edits"})
    bob.kill()  # a crash while the question is open
    stored = json.loads((workdir / ".bob" / "sessions" / f"{sid}.json").read_text())
    assert stored["messages"][-1]["role"] == "tool" and stored["messages"][-1]["tool_call_id"] == "c1"
    again = spawn_bob(cfg, env={"OPENAI_API_KEY": "sk-integrity-0123456789"})
    again.initialize()
    again.result("session/load", {"sessionId": sid, "cwd": str(workdir), "mcpServers": []})
    response, frames = again.prompt(sid, "and now?")
    assert response["result"]["stopReason"] == "end_turn" and message_text(frames) == "resumed"
    assert server.refused == []


def two_calls() -> Response:
    parts = [{"index": i, "id": f"t{i}", "type": "function",
              "function": {"name": "bash", "arguments": json.dumps({"command": command})}}
             for i, command in enumerate(["sleep 30", "echo second"])]
    return Response(events=[_sse({"choices": [{"index": 0, "delta": {"tool_calls": parts}}]}),
                            _sse({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}),
                            _sse("[DONE]")])


def test_a_cancel_between_two_calls_answers_both_for_the_next_request(spawn_bob, server):
    server.enqueue(two_calls(), server.openai_text("after"))
    bob = spawn_bob({"model": {"baseUrl": server.url + "/v1", "retries": 0}},
                    env={"OPENAI_API_KEY": "sk-integrity-0123456789"})
    bob.initialize()
    sid = bob.new_session()
    msg_id = bob.prompt_until_running(sid, "go")
    bob.notify("session/cancel", {"sessionId": sid})
    assert bob.wait_response(msg_id)[0]["result"] == {"stopReason": "cancelled"}
    response, frames = bob.prompt(sid, "again")
    assert message_text(frames) == "after" and server.refused == []
    tools = [m for m in server.requests[-1]["body"]["messages"] if m["role"] == "tool"]
    assert [t["tool_call_id"] for t in tools] == ["t0", "t1"]


def test_no_frame_over_the_cap_and_the_model_keeps_the_whole_arguments(bob_script, workdir):
    content = "line of a large file\n" * (6 * 1024 * 1024 // 21)
    bob = bob_script([{"replies": [{"tool_calls": [{"name": "write_file", "arguments": {"path": "big.txt",
                                                                                    "content": content}}]},
                                   {"text": "written"}]}])
    sid = bob.new_session()
    response, frames = bob.prompt(sid, "write it", answer=allow, timeout=60)  # read_frame checks the cap
    assert response["result"]["stopReason"] == "end_turn"
    assert (workdir / "big.txt").read_text() == content
    shown = updates(frames, "tool_call")[0]["rawInput"]["content"]
    assert len(shown) < 70 * 1024 and "characters cut" in shown
    saved = json.loads((workdir / ".bob" / "sessions" / f"{sid}.json").read_text())
    assert saved["messages"][2]["tool_calls"][0]["arguments"]["content"] == content
    assert all(len(json.dumps(f)) < FRAME_CAP for f in bob.frames)


@pytest.mark.parametrize("method, params", [
    ("session/set_mode", {"modeId": []}),
    ("session/set_mode", {"modeId": {"a": 1}}),
    ("session/set_config_option", {"configId": "mode", "value": ["ask"]}),
    ("session/set_config_option", {"configId": "model", "value": {"name": "x"}}),
    ("session/set_config_option", {"configId": ["model"], "value": "x"}),
])
def test_bad_selector_values_are_invalid_params(bob_script, method, params):
    bob = bob_script([])
    sid = bob.new_session()
    response, _ = bob.call(method, {"sessionId": sid, **params})
    assert response["error"]["code"] == -32602
    assert "Traceback" not in bob.stderr()


@pytest.mark.parametrize("value", [0, False, "", []])
def test_a_config_section_that_is_not_a_mapping_stops_start_up(tmp_path, bob_env, value):
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump({"model": value}))
    result = subprocess.run(bob_command() + ["--config", str(path), "--check"], env=bob_env, capture_output=True, text=True,
                            timeout=20, stdin=subprocess.DEVNULL)
    assert result.returncode == 2
    assert result.stderr.strip() == f"bob-acp: config key 'model' in {path}: must be a mapping"


def test_a_replay_shows_what_the_user_typed_and_each_calls_status(bob_script, workdir):
    turns = [{"match": "greetings", "replies": [{"text": "hello Ada"}]},
             {"replies": [{"tool_calls": [{"name": "bash", "arguments": {"command": "echo no"}}]}, {"text": "ok"}]}]
    bob = bob_script(turns)
    sid = bob.new_session()
    bob.prompt(sid, "/greetings Ada")
    bob.prompt(sid, "run it", answer=reject)
    bob.close()
    for status, expected in (("completed", "completed"), ("recorded", "failed")):
        again = bob_script(turns, acp={"replayStatus": status})
        _, frames = again.call("session/load", {"sessionId": sid, "cwd": str(workdir), "mcpServers": []})
        users = [u["content"]["text"] for u in updates(frames, "user_message_chunk")]
        assert users == ["/greetings Ada", "run it"]
        assert [u["status"] for u in updates(frames, "tool_call")] == [expected]
        again.close()


def test_a_second_process_on_the_session_makes_a_fork_the_user_is_told_about(bob_script, workdir):
    turns = [{"replies": [{"text": "one"}]}]
    first = bob_script(turns)
    sid = first.new_session()
    first.prompt(sid, "the topic")
    second = bob_script(turns)
    second.result("session/load", {"sessionId": sid, "cwd": str(workdir), "mcpServers": []})
    first.prompt(sid, "from the first window")
    _, frames = second.prompt(sid, "from the second window")
    told = message_text(frames)
    assert "continues under the new id" in told and "the same session open twice" in told
    listed = second.result("session/list", {"cwd": str(workdir)})["sessions"]
    assert sorted(s["title"] for s in listed) == ["the topic", "the topic (fork)"]
    assert len(sessions_of(workdir)) == 2


def test_bobs_state_stays_out_of_git_and_its_skills_can_be_committed(bob_script, workdir):
    subprocess.run(["git", "init", "-q", str(workdir)], check=True)
    skill = workdir / ".bob" / "skills" / "deploy" / "SKILL.md"
    skill.parent.mkdir(parents=True)
    skill.write_text("---\nname: deploy\ndescription: How this team deploys.\n---\nRun make deploy.\n")
    bob = bob_script([{"replies": [{"text": "hi"}]}])
    sid = bob.new_session()
    bob.prompt(sid, "hello")
    assert (workdir / ".bob" / "sessions" / f"{sid}.json").exists()
    status = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=workdir,
                            capture_output=True, text=True, check=True).stdout
    shown = [line for line in status.splitlines() if not line.endswith("bob-stderr.log")]  # (the test's own log)
    assert shown == ["?? .bob/skills/deploy/SKILL.md"] and os.path.exists(workdir / ".bob" / ".gitignore")
