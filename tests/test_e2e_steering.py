"""Steering a running turn (`_session/steering`, acp.steering) against the real bob-acp: the
peers' shape (codex-acp, claude-agent-acp), advertised as they do; a steered text joins the
running turn at its next model call (never cutting the call that runs), is the user's in the
history, the session file and a load's replay, and shown to the client as the user's when the
model reads it; idle, it starts a turn (`startedNewTurn`) unless the client asked to be told to
send a prompt; the inbox is bounded; a cancel still ends the turn; and without the key, nothing
of it exists."""

from __future__ import annotations

import json

import pytest
from bob_client import allow, bash, message_text, outputs, updates
from chat_helpers import quit_chat

pytestmark = pytest.mark.e2e

WAITING = "while [ ! -e go ]; do sleep 0.02; done; echo the long job finished"
TURNS = [
    {"match": "start the long job", "replies": [bash(WAITING), {"text": "the job is done"}]},
    {"match": "also mind the tests", "replies": [{"text": "minding the tests as you asked"}]},
    {"match": "keep talking", "replies": [{"chunks": ["one ", "two ", "three ", "four ", "five"], "delay": 0.6}]},
    {"match": "and say why", "replies": [{"text": "because you steered me"}]},
]


@pytest.fixture
def steering_bob(spawn_bob, tmp_path):
    def start(**acp):
        path = tmp_path / "script.yaml"
        path.write_text(json.dumps({"turns": TURNS}))
        bob = spawn_bob({"model": {"provider": "script", "script": str(path)}, "sessions": {"enabled": True},
                         "acp": {"steering": True, **acp}})
        return bob, bob.initialize()
    return start


def steer(bob, sid, text, meta=None):
    params = {"sessionId": sid, "prompt": [{"type": "text", "text": text}]}
    if meta is not None:
        params["_meta"] = meta
    return bob.call("_session/steering", params)


def stored(workdir, sid):
    return json.loads((workdir / ".bob" / "sessions" / f"{sid}.json").read_text())


def test_it_is_advertised_as_the_peers_do(steering_bob):
    _, init = steering_bob()
    assert init["_meta"] == {"steering": {"supported": True}}


def test_without_the_key_there_is_no_steering(spawn_bob, tmp_path, workdir):
    """The default profile: a second prompt waits for the turn; _session/steering is unknown."""
    path = tmp_path / "script.yaml"
    path.write_text(json.dumps({"turns": TURNS}))
    bob = spawn_bob({"model": {"provider": "script", "script": str(path)}})
    init = bob.initialize()
    assert "_meta" not in init
    sid = bob.new_session()
    response, _ = steer(bob, sid, "also mind the tests")
    assert response["error"]["code"] == -32601


def test_a_steer_joins_the_running_turn_after_its_call_and_is_the_users(steering_bob, workdir, spawn_bob):
    bob, _ = steering_bob()
    sid = bob.new_session()
    prompt_id = bob.prompt_until_running(sid, "start the long job")
    response, seen = steer(bob, sid, "also mind the tests")
    assert response["result"] == {"outcome": "injected"}
    (workdir / "go").touch()
    answer, frames = bob.wait_response(prompt_id, answer=allow)
    frames = seen + frames
    assert answer["result"] == {"stopReason": "end_turn"}
    # The call ran to its end; the model's next call read the steer (the script answers it).
    assert outputs(frames) == ["the long job finished\n[exit code: 0]"]
    assert message_text(frames) == "minding the tests as you asked"
    # The steer is shown as the user's when the model reads it (the draft steering RFD's way).
    assert [u["content"]["text"] for u in updates(frames, "user_message_chunk")] == ["also mind the tests"]
    kinds = [f["params"]["update"]["sessionUpdate"] for f in frames if f.get("method") == "session/update"]
    assert kinds.index("user_message_chunk") < kinds.index("agent_message_chunk")

    messages = stored(workdir, sid)["messages"]
    roles = [m["role"] for m in messages]
    assert roles == ["system", "user", "assistant", "tool", "user", "assistant"]
    assert messages[4]["content"] == [{"type": "text", "text": "also mind the tests"}]
    assert bob.close() == 0

    again = spawn_bob()
    again.initialize()
    loaded, replay = again.call("session/load", {"sessionId": sid, "cwd": str(workdir), "mcpServers": []})
    assert loaded["result"] is not None
    said = [u["content"]["text"] for u in updates(replay, "user_message_chunk")]
    assert said == ["start the long job", "also mind the tests"]


def test_idle_a_steer_starts_a_turn_unless_the_client_asks_for_a_prompt(steering_bob, workdir):
    """As codex-acp, claude-agent-acp and pi-acp: with no turn running, the text starts one
    (`startedNewTurn`: its updates come as a prompt's, no answer waits for it; a prompt sent
    after it runs once it has ended). A client that sent idleBehavior promptRequired is told
    to send a prompt instead."""
    bob, _ = steering_bob()
    sid = bob.new_session()
    response, _ = steer(bob, sid, "also mind the tests", meta={"steering": {"idleBehavior": "promptRequired"}})
    assert response["result"] == {"outcome": "promptRequired", "reason": "noRunningTurn"}
    response, seen = steer(bob, sid, "also mind the tests")
    assert response["result"] == {"outcome": "startedNewTurn"}
    answer, frames = bob.prompt(sid, "and say why")  # (after the steered turn)
    frames = seen + frames
    assert answer["result"] == {"stopReason": "end_turn"}
    assert message_text(frames) == "minding the tests as you askedbecause you steered me"
    assert [u["content"]["text"] for u in updates(frames, "user_message_chunk")] == ["also mind the tests"]
    users = [m["content"] for m in stored(workdir, sid)["messages"] if m["role"] == "user"]
    assert users == [[{"type": "text", "text": "also mind the tests"}], [{"type": "text", "text": "and say why"}]]
    # A behaviour Bob does not have is refused, with why; so are a bad prompt and a stranger's session.
    response, _ = steer(bob, sid, "x", meta={"steering": {"idleBehavior": "queue"}})
    assert response["error"]["code"] == -32602 and "promptRequired" in response["error"]["message"]
    response, _ = bob.call("_session/steering", {"sessionId": sid, "prompt": "not blocks"})
    assert response["error"]["code"] == -32602
    response, _ = steer(bob, "20990101-000000-00000000", "x")
    assert response["error"]["code"] == -32602


def test_the_inbox_of_a_running_turn_is_bounded(steering_bob, workdir):
    """One turn once sent a 39 MB model request: past 32 steers or 1 MiB waiting, a clear error,
    and what waits already is read."""
    bob, _ = steering_bob()
    sid = bob.new_session()
    prompt_id = bob.prompt_until_running(sid, "start the long job")
    big = "x" * (600 * 1024)
    assert steer(bob, sid, big)[0]["result"] == {"outcome": "injected"}
    refused, _ = steer(bob, sid, big)
    assert refused["error"]["code"] == -32602 and "at most 32" in refused["error"]["message"]
    for _ in range(31):
        assert steer(bob, sid, "small")[0]["result"] == {"outcome": "injected"}
    refused, _ = steer(bob, sid, "one more")
    assert refused["error"]["code"] == -32602
    (workdir / "go").touch()
    answer, _ = bob.wait_response(prompt_id, answer=allow)
    assert answer["result"]["stopReason"] in ("end_turn", "max_turn_requests")


def test_a_steer_while_the_model_answers_keeps_the_turn_going(steering_bob, workdir):
    """The model's last reply is streaming when the steer comes: the turn does not end on it,
    it asks the model again."""
    bob, _ = steering_bob()
    sid = bob.new_session()
    prompt_id = bob.request_async("session/prompt", {"sessionId": sid,
                                                     "prompt": [{"type": "text", "text": "keep talking"}]})
    while True:
        frame = bob.read_frame()
        if frame.get("method") == "session/update" and \
                frame["params"]["update"]["sessionUpdate"] == "agent_message_chunk":
            break
    response, seen = steer(bob, sid, "and say why")
    assert response["result"] == {"outcome": "injected"}
    answer, frames = bob.wait_response(prompt_id)
    assert answer["result"] == {"stopReason": "end_turn"}
    text = message_text([frame] + seen + frames)
    assert text.startswith("one two three four five") and text.endswith("because you steered me")
    roles = [m["role"] for m in stored(workdir, sid)["messages"]]
    assert roles == ["system", "user", "assistant", "user", "assistant"]


def test_cancel_still_ends_a_steered_turn_and_what_it_was_told_is_kept(steering_bob, workdir):
    bob, _ = steering_bob()
    sid = bob.new_session()
    prompt_id = bob.prompt_until_running(sid, "start the long job")
    response, _ = steer(bob, sid, "also mind the tests")
    assert response["result"] == {"outcome": "injected"}
    # Right behind the cancel (read before it, so the turn is cancelled though it still unwinds),
    # and after the answer: nothing joins a cancelled turn; the client is asked for a prompt.
    bob.notify("session/cancel", {"sessionId": sid})
    asks = {"steering": {"idleBehavior": "promptRequired"}}  # (a client that sends prompts itself)
    late = bob.request_async("_session/steering", {"sessionId": sid, "prompt": [{"type": "text", "text": "too late"}],
                                                   "_meta": asks})
    answer, seen = bob.wait_response(prompt_id)
    assert answer["result"] == {"stopReason": "cancelled"}
    response = next((f for f in seen if f.get("id") == late), None) or bob.wait_response(late)[0]
    assert response["result"] == {"outcome": "promptRequired", "reason": "noRunningTurn"}
    response, _ = steer(bob, sid, "also mind the tests", meta=asks)
    assert response["result"] == {"outcome": "promptRequired", "reason": "noRunningTurn"}
    messages = stored(workdir, sid)["messages"]
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "tool", "user"]
    assert messages[-1]["content"] == [{"type": "text", "text": "also mind the tests"}]


def test_a_command_does_not_steer(steering_bob, workdir):
    bob, _ = steering_bob()
    sid = bob.new_session()
    prompt_id = bob.prompt_until_running(sid, "start the long job")
    response, _ = steer(bob, sid, "/compact")
    assert response["error"]["code"] == -32602 and "session/prompt" in response["error"]["message"]
    (workdir / "go").touch()
    answer, _ = bob.wait_response(prompt_id, answer=allow)
    assert answer["result"] == {"stopReason": "end_turn"}


CHAT_TURNS = {"turns": [
    {"match": "start the long job", "replies": [bash(WAITING), {"text": "the job is done"}]},
    {"match": "also mind the tests", "replies": [{"text": "minding the tests as you asked"}]},
]}


def test_in_the_chat_a_line_typed_during_a_turn_steers_it_and_says_so(chat, workdir):
    child = chat(["--profile", "full", "--yes"], CHAT_TURNS)
    child.expect("you> ")
    child.sendline("start the long job")
    child.expect("⏺")
    child.sendline("also mind the tests")
    child.expect("added to the running turn")
    assert "also mind the tests" not in child.before  # (not echoed into the turn's output as it was typed)
    child.sendline("/help")  # a command is not a steer: it runs once the turn has ended
    child.expect(r"↳ you: /help \(runs when the turn ends\)")
    (workdir / "go").touch()
    child.expect("minding the tests as you asked")
    child.expect("/quit")  # (the help's list, after the turn)
    quit_chat(child)


def test_in_the_chat_a_line_that_only_starts_with_a_slash_steers(chat, workdir):
    """"/tmp is full" names no command of the chat's or Bob's: it is words for the model, and
    steers the running turn like any other line (only a real command waits for the turn's end)."""
    turns = {"turns": [{"match": "start the long job", "replies": [bash(WAITING), {"text": "the job is done"}]},
                       {"match": "/tmp is full", "replies": [{"text": "cleaning up before going on"}]}]}
    child = chat(["--profile", "full", "--yes"], turns)
    child.expect("you> ")
    child.sendline("start the long job")
    child.expect("⏺")
    child.sendline("/tmp is full")
    child.expect("added to the running turn")
    (workdir / "go").touch()
    child.expect("cleaning up before going on")
    quit_chat(child)
    assert "runs when the turn ends" not in child.before


def test_in_the_chat_without_steering_a_line_typed_during_a_turn_is_the_next_prompt(chat, workdir):
    """Bob's minimal profile takes no steering: the line is shown at once as the person's (not
    echoed into the turn's output, not kept silently) and is the next prompt; a control key
    typed with it (Ctrl-L) never reaches the model."""
    child = chat(["--profile", "default", "--yes"], CHAT_TURNS)
    child.expect("you> ")
    child.sendline("start the long job")
    child.expect("⏺")
    child.sendline("also mind\x0c the tests")
    child.expect(r"↳ you: also mind the tests \(is the next prompt when the turn ends\)")
    assert "also mind" not in child.before and "^L" not in child.before
    (workdir / "go").touch()
    child.expect("the job is done")
    child.expect("minding the tests as you asked")  # (its own turn, once the first ended)
    quit_chat(child)
    assert "added to the running turn" not in child.before


def test_undo_takes_a_steered_turn_out_whole(spawn_bob, tmp_path, workdir):
    """With checkpoints: /undo of a turn that took a steer takes its files and its messages out,
    the steer's too (the prompt stayed in the conversation while the steer went)."""
    turns = [{"match": "start the long job",
              "replies": [bash("while [ ! -e go ]; do sleep 0.02; done; echo made > job.txt"), {"text": "done"}]},
             {"match": "also mind the tests", "replies": [{"text": "minding the tests as you asked"}]}]
    path = tmp_path / "script.yaml"
    path.write_text(json.dumps({"turns": turns}))
    bob = spawn_bob({"model": {"provider": "script", "script": str(path)}, "sessions": {"enabled": True},
                     "acp": {"steering": True}, "tools": {"checkpoints": True},
                     "permissions": {"mode": "allow-all"}})
    bob.initialize()
    sid = bob.new_session()
    prompt_id = bob.prompt_until_running(sid, "start the long job")
    assert steer(bob, sid, "also mind the tests")[0]["result"] == {"outcome": "injected"}
    (workdir / "go").touch()
    assert bob.wait_response(prompt_id)[0]["result"] == {"stopReason": "end_turn"}
    said = message_text(bob.prompt(sid, "/undo")[1])
    assert said.startswith("↩️ Undid the turn “start the long job”"), said
    assert not (workdir / "job.txt").exists()
    assert [m["role"] for m in stored(workdir, sid)["messages"]] == ["system"]
