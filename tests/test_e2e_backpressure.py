"""A burst is held, not refused: the real bob-acp under floods of pipelined frames.

The client here writes from one thread and reads from another, as a real client would, so Bob's
backpressure (the reader waiting for room in the inbound queue) shows as the client's writes
blocking, never as "server busy". Every frame Bob writes is validated against the ACP schema:
frames that differ only in their id (or session id) are the same shape, checked once.
"""

from __future__ import annotations

import os
import subprocess
import threading
import time
import uuid

import orjson
import pytest
import yaml
from bob_client import bob_command, validator
from procs import wait_gone, wait_present

UNKNOWN = "x/unknown"


class RawClient:
    """bob-acp on plain pipes: a writer thread for floods, a reader thread collecting every frame."""

    def __init__(self, workdir, env):
        with open(os.path.join(workdir, "bob-stderr.log"), "wb") as stderr:
            self.proc = subprocess.Popen(bob_command(), cwd=str(workdir), env=env, stdin=subprocess.PIPE,
                                         stdout=subprocess.PIPE, stderr=stderr)
        self.frames: list[dict] = []
        self.arrived = threading.Condition()
        self._shapes: set[bytes] = set()
        self._methods: dict = {}
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            frame = orjson.loads(line)
            self._validate(frame)
            with self.arrived:
                self.frames.append(frame)
                self.arrived.notify_all()
        with self.arrived:
            self.arrived.notify_all()

    def _validate(self, frame: dict) -> None:
        msg_id = frame.get("id")
        assert msg_id is None or isinstance(msg_id, (int, str)), frame
        shape = dict(frame, id=0) if "id" in frame else frame
        params = shape.get("params")
        if isinstance(params, dict) and "sessionId" in params:
            shape = dict(shape, params=dict(params, sessionId="s"))
        result = shape.get("result")
        if isinstance(result, dict) and "sessionId" in result:
            shape = dict(shape, result=dict(result, sessionId="s"))
        key = orjson.dumps(shape, option=orjson.OPT_SORT_KEYS)
        if key not in self._shapes:
            validator().validate(frame, self._methods.get)
            self._shapes.add(key)

    def write(self, frames: list[dict]) -> None:
        for frame in frames:
            if "id" in frame and "method" in frame:
                self._methods[frame["id"]] = frame["method"]
        self.proc.stdin.write(b"".join(orjson.dumps(f) + b"\n" for f in frames))
        self.proc.stdin.flush()

    def write_in_background(self, frames: list[dict]) -> threading.Thread:
        thread = threading.Thread(target=self.write, args=(frames,), daemon=True)
        thread.start()
        return thread

    def wait_for(self, predicate, timeout: float = 60) -> dict:
        deadline = time.monotonic() + timeout
        seen = 0
        with self.arrived:
            while True:
                for frame in self.frames[seen:]:
                    if predicate(frame):
                        return frame
                seen = len(self.frames)
                left = deadline - time.monotonic()
                assert left > 0 and self.proc.poll() is None, "the awaited frame never came"
                self.arrived.wait(left)

    def answers(self) -> dict:
        with self.arrived:
            return {f["id"]: f for f in self.frames if "id" in f and "method" not in f}

    def close(self) -> int:
        self.proc.stdin.close()
        code = self.proc.wait(10)
        self._reader.join(10)
        return code

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture
def raw_bob(workdir, bob_env, write_config):
    started: list[RawClient] = []

    def start(config: dict | None = None) -> RawClient:
        write_config(config or {})
        client = RawClient(workdir, bob_env)
        started.append(client)
        initialize = {"jsonrpc": "2.0", "id": "init", "method": "initialize", "params": {"protocolVersion": 1}}
        client.write([initialize])
        client.wait_for(lambda f: f.get("id") == "init")
        return client

    yield start
    for client in started:
        if client.proc.poll() is None:
            try:
                assert client.close() == 0
            finally:
                client.kill()


def request(msg_id, method=UNKNOWN, params=None) -> dict:
    return {"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params or {}}


def test_twenty_thousand_pipelined_requests_each_get_their_real_answer(raw_bob, workdir):
    bob = raw_bob({"limits": {"maxSessions": -1}})
    flood = [request(i, "session/new", {"cwd": str(workdir), "mcpServers": []}) if i % 10 == 0 else request(i)
             for i in range(20_000)]
    writer = bob.write_in_background(flood)
    bob.wait_for(lambda f: f.get("id") == 19_999 and "method" not in f)
    writer.join(10)
    answers = bob.answers()
    assert len([i for i in range(20_000) if i in answers]) == 20_000
    for i in range(20_000):
        if i % 10 == 0:
            assert "sessionId" in answers[i]["result"], answers[i]
        else:
            assert answers[i]["error"]["code"] == -32601, answers[i]
    assert not any("busy" in f.get("error", {}).get("message", "") for f in bob.frames)
    ids = [f["id"] for f in bob.frames if f.get("id") in answers and "method" not in f]
    assert len(ids) == len(set(ids)), "an id was answered twice"


def test_a_200_000_frame_flood_is_answered_in_full_and_in_order(raw_bob):
    # How much memory the flood costs depends on the machine's speed: scripts/bench.py measures
    # it. What holds everywhere: every frame answered once, in order, none refused as busy (the
    # queue's bound holds the client back instead; tests/test_endpoint.py checks the bound).
    bob = raw_bob()
    total = 200_000
    writer = bob.write_in_background([request(i) for i in range(total)])
    bob.wait_for(lambda f: f.get("id") == total - 1, timeout=120)
    writer.join(10)
    answers = bob.answers()
    assert all(answers[i]["error"]["code"] == -32601 for i in range(total))
    ids = [f["id"] for f in bob.frames if "method" not in f and isinstance(f.get("id"), int)]
    assert ids == list(range(total))


def test_a_cancel_behind_a_flood_still_cancels_its_turn_first(raw_bob, tmp_path):
    marker = str(int(uuid.uuid4().hex[:8], 16))[:8]
    script = tmp_path / "script.yaml"
    script.write_text(yaml.safe_dump({"turns": [{"replies": [
        {"tool_calls": [{"name": "bash", "arguments": {"command": f"sleep 300.{marker}"}}]}]}]}))
    bob = raw_bob({"model": {"provider": "script", "script": str(script)}})
    bob.write([request("new", "session/new", {"cwd": str(tmp_path), "mcpServers": []})])
    sid = bob.wait_for(lambda f: f.get("id") == "new")["result"]["sessionId"]
    bob.write([request("turn", "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "go"}]})])
    ask = bob.wait_for(lambda f: f.get("method") == "session/request_permission")
    bob.write([{"jsonrpc": "2.0", "id": ask["id"], "result": {"outcome": {"outcome": "selected", "optionId": "allow"}}}])
    wait_present(marker)
    half = 20_000
    cancel = {"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": sid}}
    writer = bob.write_in_background([request(i) for i in range(half)] + [cancel]
                                     + [request(i) for i in range(half, 2 * half)])
    answer = bob.wait_for(lambda f: f.get("id") == "turn")
    assert answer["result"]["stopReason"] == "cancelled"
    bob.wait_for(lambda f: f.get("id") == 2 * half - 1)
    writer.join(10)
    # Every frame of the flood answered once; how soon the cancel takes effect behind it is a
    # figure of the machine's load, measured by scripts/bench.py ("cancel behind a flood").
    answers = bob.answers()
    assert all(answers[i]["error"]["code"] == -32601 for i in range(2 * half))
    ids = [f["id"] for f in bob.frames if "method" not in f and isinstance(f.get("id"), int)]
    assert ids == list(range(2 * half))
    assert wait_gone(marker) == []
