"""Reliability end to end: model faults, secrets, attacks on the permission gate, a client that
stops reading, SIGKILL while writing."""

import json
import os
import random
import signal
import time
import uuid

import pexpect
import pytest
import yaml
from bob_client import allow, allow_always, message_text, updates
from procs import wait_gone, wait_present

pytestmark = pytest.mark.e2e
KEY = "sk-fault-test-KEY-9f8e7d6c5b4a"


@pytest.fixture
def http_bob(spawn_bob, server):
    def start(**model):
        bob = spawn_bob({"model": {"baseUrl": server.url + "/v1", "retries": 1, **model}, "log": {"level": "debug"}},
                        env={"OPENAI_API_KEY": KEY})
        bob.initialize()
        return bob, bob.new_session()
    return start


@pytest.mark.parametrize("fault, expected, model", [
    ("stall", "model API timeout: no data for 0.5 s", {"timeout": 0.5}),
    ("drop", "model API stream", {}),
    ("500s", "model API 500: down", {}),
    ("garbage", "model API stream ended early (truncated reply)", {}),
    ("not-json", "model API sent invalid JSON in its stream", {}),
    ("endless", "model API reply exceeded 64 MiB: stream stopped", {}),
])
def test_model_faults_end_in_one_line_and_the_next_turn_works(http_bob, server, fault, expected, model):
    faults = {
        "stall": [server.openai_text("partial", then="stall")],
        "drop": [server.openai_text("partial", then="drop")],
        "500s": [server.status(500, {"error": {"message": "down"}}), server.status(500, {"error": {"message": "down"}})],
        "garbage": [server.garbage()],
        "not-json": [server.raw_events("{{{{")],
        "endless": [server.endless("y" * 262144)],
    }[fault]
    server.enqueue(*faults, server.openai_text("recovered"))
    bob, sid = http_bob(**model)
    response, _ = bob.prompt(sid, "first", timeout=60)
    assert response["error"]["code"] == -32603
    line = response["error"]["data"]["error"]
    assert line.startswith(expected) and "\n" not in line
    response, frames = bob.prompt(sid, "second")
    assert response["result"]["stopReason"] == "end_turn" and message_text(frames) == "recovered"
    users = [m["content"] for m in server.requests[-1]["body"]["messages"] if m["role"] == "user"]
    assert users[-1] == "second"


def test_a_429_storm_is_retried_then_reported(http_bob, server):
    for _ in range(3):
        server.enqueue(server.status(429, {"error": {"message": "rate limited"}}, {"Retry-After": "0.1"}))
    server.enqueue(server.openai_text("later"))
    bob, sid = http_bob(retries=2)
    response, _ = bob.prompt(sid, "x")
    assert response["error"]["data"]["error"] == "model API 429: rate limited"
    assert len(server.requests) == 3
    assert message_text(bob.prompt(sid, "y")[1]) == "later"


def test_the_key_is_never_in_an_error_the_log_or_a_session_file(spawn_bob, server, workdir):
    server.enqueue(server.status(401, {"error": {"message": f"Incorrect API key provided: {KEY}."}}))
    bob = spawn_bob({"model": {"baseUrl": server.url + "/v1", "retries": 0}, "log": {"level": "debug"},
                     "sessions": {"enabled": True}}, env={"OPENAI_API_KEY": KEY})
    bob.initialize()
    sid = bob.new_session()
    response, _ = bob.prompt(sid, "hi")
    assert response["error"]["data"]["error"] == "model API 401: Incorrect API key provided: [redacted]."
    assert bob.close() == 0
    assert server.requests[0]["headers"]["Authorization"] == f"Bearer {KEY}"
    everything = bob.stderr() + json.dumps(bob.frames)
    for name in os.listdir(workdir / ".bob" / "sessions"):
        everything += (workdir / ".bob" / "sessions" / name).read_text()
    assert KEY not in everything


# ---- the permission gate under attack ------------------------------------------------------

@pytest.fixture
def gated(spawn_bob, tmp_path):
    def start(n_calls=1):
        script = tmp_path / "script.yaml"
        calls = [{"tool_calls": [{"name": "bash", "arguments": {"command": f"touch ran{i}"}}]} for i in range(n_calls)]
        script.write_text(yaml.safe_dump({"turns": [{"replies": calls + [{"text": "end"}]}]}))
        bob = spawn_bob({"model": {"provider": "script", "script": str(script)}})
        bob.initialize()
        return bob, bob.new_session()
    return start


def run_turn(bob, sid, on_request):
    msg_id = bob.request_async("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "go"}]})
    while True:
        frame = bob.read_frame()
        if frame.get("method") == "session/request_permission":
            on_request(frame)
        elif frame.get("id") == msg_id and "method" not in frame:
            return frame


ATTACKS = {
    "a string id where a number was sent": lambda rid, req: {"jsonrpc": "2.0", "id": str(rid), "result": allow(req)},
    "no jsonrpc member": lambda rid, req: {"id": rid, "result": allow(req)},
    "both result and error": lambda rid, req: {"jsonrpc": "2.0", "id": rid, "result": allow(req),
                                              "error": {"code": 1, "message": "x"}},
    "an unknown option id": lambda rid, req: {"jsonrpc": "2.0", "id": rid,
                                              "result": {"outcome": {"outcome": "selected", "optionId": "allow_all"}}},
    "an error answer": lambda rid, req: {"jsonrpc": "2.0", "id": rid, "error": {"code": -32603, "message": "no"}},
}


@pytest.mark.parametrize("attack", list(ATTACKS))
def test_answers_that_never_approve(gated, workdir, attack):
    """One turn per attack: the answer settles the request as a rejection on its own (no cancel
    needed), the tool does not run, and the model is told it was rejected."""
    bob, sid = gated(1)
    asked = []

    def answer(request):
        asked.append(request["id"])
        bob.send(ATTACKS[attack](request["id"], request))

    response = run_turn(bob, sid, answer)
    assert response["result"]["stopReason"] == "end_turn", attack
    assert len(asked) == 1 and not (workdir / "ran0").exists(), attack
    results = [u["rawOutput"]["output"] for u in updates(bob.frames, "tool_call_update") if "rawOutput" in u]
    assert results == ["[command rejected by the user]"], attack


def test_two_answers_and_an_early_answer(gated, workdir):
    bob, sid = gated(2)
    state = {"n": 0}

    def answer(request):
        state["n"] += 1
        rid = request["id"]
        if state["n"] == 1:
            # Sent while Bob still waits on this request, so it certainly comes before its own:
            bob.send({"jsonrpc": "2.0", "id": rid + 1, "result": allow(request)})  # before its request: ignored
            bob.send({"jsonrpc": "2.0", "id": rid, "result": {"outcome": {"outcome": "selected", "optionId": "reject"}}})
            bob.send({"jsonrpc": "2.0", "id": rid, "result": allow(request)})  # too late: ignored
        else:
            bob.send({"jsonrpc": "2.0", "id": rid, "result": {"outcome": {"outcome": "cancelled"}}})

    response = run_turn(bob, sid, answer)
    assert response["result"]["stopReason"] == "end_turn"
    assert not (workdir / "ran0").exists() and not (workdir / "ran1").exists()
    results = [u["rawOutput"]["output"] for u in updates(bob.frames, "tool_call_update") if u["status"] == "failed"]
    assert results == ["[command rejected by the user]"] * 2


# ---- a client that stops reading -----------------------------------------------------------

def test_a_client_that_stops_reading_can_still_cancel_and_quit(spawn_bob, tmp_path):
    marker = str(int(uuid.uuid4().hex[:8], 16))[:8]
    script = tmp_path / "script.yaml"
    script.write_text(yaml.safe_dump({"turns": [
        {"match": "first", "replies": [{"tool_calls": [{"name": "bash", "arguments": {"command": "true"}}]}, {"text": "ok"}]},
        {"match": "flood", "replies": [{"repeat": {"chunk": "z" * 200, "count": 20000},
                                        "tool_calls": [{"name": "bash", "arguments": {"command": f"sleep 300.{marker}"}}]}]}]}))
    bob = spawn_bob({"model": {"provider": "script", "script": str(script)}})
    bob.initialize()
    sid = bob.new_session()
    # a first turn grants bash for the session, so the next needs no answer from a client that is not reading
    assert bob.prompt(sid, "first", answer=allow_always)[0]["result"]["stopReason"] == "end_turn"
    bob.request_async("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "flood"}]})
    # from here on, nothing is read: 4 MB of chunks fill the pipe, then the command starts
    wait_present(marker, timeout=15)
    bob.notify("session/cancel", {"sessionId": sid})
    assert wait_gone(marker) == []
    started = time.monotonic()
    bob.proc.sendeof()
    assert bob.wait(5) == 0
    assert time.monotonic() - started < 2


# ---- SIGKILL while writing -----------------------------------------------------------------

def test_sigkill_during_session_saves_and_file_writes_never_tears_a_file(spawn_bob, tmp_path, workdir):
    big_a, big_b = "A" * 100_000 + "\n", "B" * 100_000 + "\n"
    turns = [{"match": "write a", "replies": [
                 {"tool_calls": [{"name": "write_file", "arguments": {"path": "big.txt", "content": big_a}}]}, {"text": "a"}]},
             {"match": "write b", "replies": [
                 {"tool_calls": [{"name": "write_file", "arguments": {"path": "big.txt", "content": big_b}}]}, {"text": "b"}]}]
    script = tmp_path / "script.json"  # JSON loads in milliseconds
    script.write_text(json.dumps({"turns": turns}))
    rng = random.Random(11)
    saves_seen = 0
    for _round in range(3):
        bob = spawn_bob({"model": {"provider": "script", "script": str(script)}, "sessions": {"enabled": True}})
        bob.initialize()
        sid = bob.new_session()
        target = rng.randint(4, 8)  # whole turns before the kill may come, each saving and writing
        kill_at = None
        turn = 0
        pending = None
        while kill_at is None or time.monotonic() < kill_at:  # one short turn after another
            if pending is None:
                turn += 1
                pending = bob.request_async("session/prompt", {"sessionId": sid, "prompt": [
                    {"type": "text", "text": f"write {'ab'[turn % 2]} {turn}"}]})
            try:
                frame = bob.read_frame(timeout=0.05)
            except pexpect.TIMEOUT:
                continue
            if frame.get("method") == "session/request_permission":
                bob.send({"jsonrpc": "2.0", "id": frame["id"], "result": allow_always(frame)})
            elif frame.get("id") == pending and "method" not in frame:
                pending = None
                saves_seen += 1
                if saves_seen >= target * (_round + 1) and kill_at is None:
                    kill_at = time.monotonic() + rng.random() * 0.3  # lands anywhere in the next turns
        bob.expected_exit = True
        os.kill(bob.pid, signal.SIGKILL)
        bob.wait(5)
        assert (workdir / "big.txt").read_text() in (big_a, big_b)
        data = json.loads((workdir / ".bob" / "sessions" / f"{sid}.json").read_text())
        assert data["version"] == 3 and data["messages"][0]["role"] == "system"
        for message in data["messages"][1:]:
            assert message["role"] in ("user", "assistant", "tool")
    assert saves_seen > 10  # the kills landed among repeated saves and writes
