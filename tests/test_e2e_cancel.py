"""Cancel and shutdown end to end: the prompt answers `cancelled` after all its updates, and no
process of a tool survives."""

import json
import os
import signal
import time
import uuid

import pytest
from bob_client import allow, allow_always, message_text, updates
from procs import wait_gone, wait_present

pytestmark = pytest.mark.e2e



def sleeper(marker):
    """A bash command that starts children of its own, all findable by marker."""
    return f"sleep 300.{marker} & (sleep 301.{marker} &) ; sleep 302.{marker}"


def read_until(bob, predicate, timeout=10):
    deadline = time.monotonic() + timeout
    seen = []
    while time.monotonic() < deadline:
        frame = bob.read_frame(timeout=max(0.05, deadline - time.monotonic()))
        seen.append(frame)
        if predicate(frame):
            return seen
    raise AssertionError("condition not met")


def is_update(kind):
    return lambda f: f.get("method") == "session/update" and f["params"]["update"]["sessionUpdate"] == kind


def test_cancel_during_the_model_stream(scripted):
    bob, sid = scripted([{"replies": [{"chunks": ["a", "b", "c", "d", "e"], "delay": 30}]}])
    msg_id = bob.request_async("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "go"}]})
    read_until(bob, is_update("agent_message_chunk"))
    bob.notify("session/cancel", {"sessionId": sid})
    response, _ = bob.wait_response(msg_id, timeout=10)  # long before the next chunk, 30 s away
    assert response["result"] == {"stopReason": "cancelled"}
    assert bob.no_frame_within(0.3)  # nothing of the turn comes after its response


def test_cancel_during_an_open_permission_request(scripted, workdir):
    bob, sid = scripted([{"replies": [{"tool_calls": [{"name": "bash", "arguments": {"command": "touch ran"}}]},
                                      {"text": "after"}]}])
    msg_id = bob.request_async("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "go"}]})
    read_until(bob, lambda f: f.get("method") == "session/request_permission")
    bob.notify("session/cancel", {"sessionId": sid})
    response, frames = bob.wait_response(msg_id, answer=lambda req: None, timeout=5)
    assert response["result"] == {"stopReason": "cancelled"}
    assert not (workdir / "ran").exists()
    final = updates(frames, "tool_call_update")[-1]
    assert final["status"] == "failed"


def test_cancel_during_bash_kills_its_whole_process_tree(scripted):
    marker = uuid.uuid4().hex[:8]
    marker_num = str(int(marker, 16))[:8]
    bob, sid = scripted([{"replies": [{"tool_calls": [{"name": "bash", "arguments": {"command": sleeper(marker_num)}}]},
                                      {"text": "never"}]}])
    msg_id = bob.request_async("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "go"}]})
    read_until(bob, lambda f: f.get("method") == "session/request_permission")
    bob.send({"jsonrpc": "2.0", "id": bob.frames[-1]["id"], "result": allow(None)})
    assert len(wait_present(marker_num, count=3)) >= 3
    bob.notify("session/cancel", {"sessionId": sid})
    response, frames = bob.wait_response(msg_id, timeout=10)  # the command would sleep for 300 s
    assert response["result"] == {"stopReason": "cancelled"}
    assert updates(frames, "tool_call_update")[-1]["status"] == "failed"
    assert wait_gone(marker_num) == []


def test_a_prompt_cancelled_while_waiting_for_the_turn_lock_runs_nothing(scripted, workdir):
    bob, first = scripted([
        {"match": "hold", "replies": [{"tool_calls": [{"name": "bash", "arguments": {"command": "touch held"}}]}, {"text": "held done"}]},
        {"match": "second", "replies": [{"tool_calls": [{"name": "bash", "arguments": {"command": "touch second"}}]}, {"text": "x"}]},
    ])
    second = bob.new_session()
    a = bob.request_async("session/prompt", {"sessionId": first, "prompt": [{"type": "text", "text": "hold"}]})
    permission = read_until(bob, lambda f: f.get("method") == "session/request_permission")[-1]
    b = bob.request_async("session/prompt", {"sessionId": second, "prompt": [{"type": "text", "text": "second"}]})
    bob.notify("session/cancel", {"sessionId": second})  # routed after b's turn is registered: it reaches it
    response_b, frames_b = bob.wait_response(b, timeout=5)
    assert response_b["result"] == {"stopReason": "cancelled"} and frames_b == []
    bob.send({"jsonrpc": "2.0", "id": permission["id"], "result": allow(None)})
    response_a, frames_a = bob.wait_response(a)
    assert response_a["result"]["stopReason"] == "end_turn" and message_text(frames_a) == "held done"
    assert (workdir / "held").exists() and not (workdir / "second").exists()


def test_prompts_are_serialised_across_sessions(scripted):
    bob, first = scripted([{"replies": [{"chunks": ["1", "2", "3"], "delay": 0.1}]}])
    second = bob.new_session()
    a = bob.request_async("session/prompt", {"sessionId": first, "prompt": [{"type": "text", "text": "x"}]})
    b = bob.request_async("session/prompt", {"sessionId": second, "prompt": [{"type": "text", "text": "x"}]})
    order = []
    while len([o for o in order if o[0] == "response"]) < 2:
        frame = bob.read_frame()
        if frame.get("method") == "session/update" and frame["params"]["update"]["sessionUpdate"] == "agent_message_chunk":
            order.append(("chunk", frame["params"]["sessionId"]))
        elif "method" not in frame:
            order.append(("response", frame["id"]))
    assert order == [("chunk", first)] * 3 + [("response", a)] + [("chunk", second)] * 3 + [("response", b)]


def test_cancel_is_not_an_error_and_the_next_turn_works(scripted):
    bob, sid = scripted([
        {"match": "slow", "replies": [{"chunks": ["a", "b"], "delay": 2}]},
        {"match": "fast", "replies": [{"text": "quick"}]},
    ])
    msg_id = bob.request_async("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "slow"}]})
    read_until(bob, is_update("agent_message_chunk"))
    bob.notify("session/cancel", {"sessionId": sid})
    assert bob.wait_response(msg_id)[0]["result"] == {"stopReason": "cancelled"}
    response, frames = bob.prompt(sid, "fast")
    assert response["result"]["stopReason"] == "end_turn" and message_text(frames) == "quick"


@pytest.mark.parametrize("how", ["eof", "sigterm", "sighup"])
def test_shutdown_mid_tool_kills_the_tool_and_exits_0(scripted, how):
    marker_num = str(int(uuid.uuid4().hex[:8], 16))[:8]
    bob, sid = scripted([{"replies": [{"tool_calls": [{"name": "bash", "arguments": {"command": sleeper(marker_num)}}]}]}])
    bob.request_async("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "go"}]})
    read_until(bob, lambda f: f.get("method") == "session/request_permission")
    bob.send({"jsonrpc": "2.0", "id": bob.frames[-1]["id"], "result": allow_always(None)})
    wait_present(marker_num, count=3)
    started = time.monotonic()
    if how == "eof":
        bob.proc.sendeof()
    else:  # SIGHUP (an editor over SSH, a closed terminal) is SIGTERM
        os.kill(bob.pid, signal.SIGTERM if how == "sigterm" else signal.SIGHUP)
    assert bob.wait(10) == 0
    assert time.monotonic() - started < 5  # not the tool's 300 s (how fast: scripts/bench.py)
    assert wait_gone(marker_num) == []


def test_bash_timeout_kills_the_tree(scripted):
    marker_num = str(int(uuid.uuid4().hex[:8], 16))[:8]
    call = {"name": "bash", "arguments": {"command": sleeper(marker_num), "timeout": 1}}
    bob, sid = scripted([{"replies": [{"tool_calls": [call]}, {"text": "ok"}]}])
    response, frames = bob.prompt(sid, "go", answer=allow)
    assert response["result"]["stopReason"] == "end_turn"
    final = updates(frames, "tool_call_update")[-1]
    assert final["status"] == "failed" and "timed out" in final["rawOutput"]["output"]
    assert wait_gone(marker_num) == []


def test_a_cancel_right_behind_the_prompt_is_never_lost(scripted):
    bob, sid = scripted([{"replies": [{"chunks": ["a", "b", "c"], "delay": 10}]}])
    for n in range(5):
        msg_id = 900 + n
        bob._methods[msg_id] = "session/prompt"
        prompt = {"jsonrpc": "2.0", "id": msg_id, "method": "session/prompt",
                  "params": {"sessionId": sid, "prompt": [{"type": "text", "text": "go"}]}}
        cancel = {"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": sid}}
        import orjson
        bob.send_raw(orjson.dumps(prompt) + b"\n" + orjson.dumps(cancel) + b"\n")  # one write
        started = time.monotonic()
        response, _ = bob.wait_response(msg_id, timeout=15)
        assert response["result"] == {"stopReason": "cancelled"} and time.monotonic() - started < 8  # not 20 s


def test_a_cancel_read_before_the_answer_always_makes_it_cancelled(scripted, workdir):
    """Cancel after each possible update of a fast multi-chunk reply, many times: whenever Bob
    read the cancel before it wrote the answer (its log says which), the answer is `cancelled`,
    never `end_turn`, even though the stream finished meanwhile; the text streamed stays."""
    chunks = [f"c{i} " for i in range(6)]
    bob, _ = scripted([{"replies": [{"chunks": chunks, "delay": 0.002}]}], config={"sessions": {"enabled": True}})
    outcomes = {"cancelled": 0, "end_turn": 0}
    for rep in range(60):
        sid = bob.new_session()
        after = rep % (len(chunks) + 1)  # cancel after the k-th update (usage included)
        msg_id = bob.request_async("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "go"}]})
        seen = 0
        response = None
        while seen < after:
            frame = bob.read_frame()
            if frame.get("id") == msg_id and "method" not in frame:
                response = frame
                break
            seen += 1
        bob.notify("session/cancel", {"sessionId": sid})
        if response is None:
            response, _ = bob.wait_response(msg_id)
        stop = response["result"]["stopReason"]
        outcomes[stop] += 1
        log = bob.wait_stderr(f"[acp] session {sid}: cancel")
        read_first = f"[acp] session {sid}: cancel: 1 turn(s) cancelled" in log
        too_late = f"[acp] session {sid}: cancel after the turn answered" in log
        assert read_first != too_late
        if read_first:
            assert stop == "cancelled", f"rep {rep}: the cancel was read first, the answer said {stop}"
        else:
            assert stop == "end_turn"
    assert outcomes["cancelled"] >= 10  # the test did exercise the cancelled side
    stored = (workdir / ".bob" / "sessions" / f"{sid}.json").read_text()
    assert "c0 " in stored  # text already streamed stays in the history


# ---- $/cancel_request (acp.cancelRequest, in the full profile) --------------------------------------

def test_cancel_request_cancels_a_prompt_and_bob_withdraws_its_own_questions(scripted):
    turns = [{"match": "wait", "replies": [{"chunks": ["started", " never"], "delay": 30}]},
             {"match": "ask", "replies": [{"tool_calls": [{"name": "bash", "arguments": {"command": "true"}}]},
                                          {"text": "after"}]}]
    bob, sid = scripted(turns, config={"acp": {"cancelRequest": True}})
    msg_id = bob.request_async("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "wait"}]})
    read_until(bob, is_update("agent_message_chunk"))  # (the prompt runs: the cancel must stop it, not precede it)
    started = time.monotonic()
    bob.notify("$/cancel_request", {"requestId": msg_id})
    response, _ = bob.wait_response(msg_id, timeout=15)
    assert response["result"] == {"stopReason": "cancelled"} and time.monotonic() - started < 10
    # A question Bob stops waiting for (the turn was cancelled) is withdrawn with $/cancel_request.
    msg_id = bob.request_async("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "ask"}]})
    ask = read_until(bob, lambda f: f.get("method") == "session/request_permission")[-1]
    bob.notify("session/cancel", {"sessionId": sid})
    response, seen = bob.wait_response(msg_id, answer=lambda request: None, timeout=15)
    assert response["result"] == {"stopReason": "cancelled"}
    withdrawn = [f for f in seen + bob.frames if f.get("method") == "$/cancel_request"]
    assert withdrawn and withdrawn[0]["params"] == {"requestId": ask["id"]}
    # A request cancelled before it is dispatched, which nothing else could stop, is answered -32800.
    bob.notify("$/cancel_request", {"requestId": "early"})
    bob.send({"jsonrpc": "2.0", "id": "early", "method": "session/set_mode", "params": {"sessionId": sid, "modeId": "ask"}})
    early = read_until(bob, lambda f: f.get("id") == "early")[-1]
    assert early["error"] == {"code": -32800, "message": "Request cancelled"}


def test_without_the_key_cancel_request_is_an_unknown_notification(scripted):
    bob, sid = scripted([{"replies": [{"chunks": ["a", "b"], "delay": 0.3}]}])
    msg_id = bob.request_async("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "go"}]})
    bob.notify("$/cancel_request", {"requestId": msg_id})
    response, _ = bob.wait_response(msg_id, timeout=15)
    assert response["result"] == {"stopReason": "end_turn"}


def test_a_command_that_stops_bobs_supervisor_cannot_wedge_a_cancel_or_outlive_bob(scripted):
    """An approved command SIGSTOPs the supervisor (its parent) and keeps running: the cancel is
    still answered (the stopped supervisor is ended, and what it held with it), and once Bob
    exits nothing of the command or of the supervisor is left."""
    marker = str(int(uuid.uuid4().hex[:8], 16))[:8]
    bob, sid = scripted([{"replies": [{"tool_calls": [{"name": "bash", "arguments": {
        "command": f"kill -STOP $PPID; (setsid sleep 300.{marker} &); sleep 301.{marker}"}}]}]}],
        config={"permissions": {"mode": "allow-all"}})
    msg_id = bob.request_async("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "go"}]})
    wait_present(marker, count=2)
    bob.notify("session/cancel", {"sessionId": sid})
    response, _ = bob.wait_response(msg_id, timeout=10)
    assert response["result"]["stopReason"] == "cancelled"
    assert bob.wait_stderr("supervisor of commands was stopped")
    assert bob.close() == 0
    assert wait_gone(marker) == []


def test_a_command_ended_by_bobs_shutdown_is_recorded_as_such_not_as_the_users_cancel(scripted, workdir):
    marker_num = str(int(uuid.uuid4().hex[:8], 16))[:8]
    bob, sid = scripted([{"replies": [{"tool_calls": [{"name": "bash", "arguments": {"command": sleeper(marker_num)}}]}]}],
                        config={"sessions": {"enabled": True}, "permissions": {"mode": "allow-all"}})
    bob.request_async("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "go"}]})
    wait_present(marker_num, count=3)
    os.kill(bob.pid, signal.SIGTERM)
    assert bob.wait(10) == 0
    saved = json.loads((workdir / ".bob" / "sessions" / f"{sid}.json").read_text())
    (result,) = [m for m in saved["messages"] if m["role"] == "tool"]
    assert result["content"] == "[stopped: Bob was shutting down (its input ended, or a signal)]"
    assert wait_gone(marker_num) == []
