"""Real ACP clients from the npm registry drive the real bob-acp: acpx (one-shot exec with tool
calls, a persistent session that reconnects through session/load, a cancel from another
process) and the official TypeScript SDK (a turn with bash, write and edit; the SDK validates
every frame and would print what it refuses).

They need node and npm (tests/js_clients.py installs the pinned packages); without them they
skip, saying so, except under CI=true, where that is a failure.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import time
import uuid

import js_clients
import pytest
import yaml
from bob_client import bob_command
from procs import wait_gone, wait_present

pytestmark = pytest.mark.e2e


@pytest.fixture
def client_world(tmp_path, bob_env):
    """A project, a script for Bob, Bob's config (log to a file: acpx shows an agent's stderr),
    and a HOME of its own for acpx's state."""
    marker = str(int(uuid.uuid4().hex[:8], 16))[:8]
    project = tmp_path / "project"
    project.mkdir(exist_ok=True)
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    script = tmp_path / "script.yaml"
    script.write_text(yaml.safe_dump({"turns": [
        {"match": "tools", "replies": [
            {"text": "Looking. ", "tool_calls": [{"name": "bash", "arguments": {"command": "echo from-bash"}}]},
            {"tool_calls": [{"name": "write_file", "arguments": {"path": "a.txt", "content": "one\n"}}]},
            {"tool_calls": [{"name": "edit_file", "arguments": {"path": "a.txt", "old_string": "one", "new_string": "two"}}]},
            {"text": "All done."}]},
        {"match": "sleep", "replies": [
            {"tool_calls": [{"name": "bash", "arguments": {"command": f"sleep 60.{marker}"}}]}, {"text": "woke"}]},
        {"replies": [{"text": "hello back"}]},
    ]}))
    log = tmp_path / "bob.log"
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump({"model": {"provider": "script", "script": str(script)},
                                      "sessions": {"enabled": True}, "log": {"file": str(log)}}))
    env = {**bob_env, "HOME": str(home), "BOB_CONFIG": str(config)}
    yield {"project": project, "env": env, "log": log, "marker": marker, "agent": " ".join(bob_command())}
    # acpx keeps its queue sockets in /tmp/acpx-<sha256(HOME)[:10]> (dist/ipc-*.js): leave none behind
    shutil.rmtree(os.path.join("/tmp", "acpx-" + hashlib.sha256(str(home).encode()).hexdigest()[:10]),
                  ignore_errors=True)


def acpx(world, *args, timeout=60, check=True):
    command = [js_clients.bin_path("acpx"), "--agent", world["agent"], "--cwd", str(world["project"]), *args]
    proc = subprocess.run(command, capture_output=True, text=True, env=world["env"], timeout=timeout)
    if check:
        assert proc.returncode == 0, f"{args}: exit {proc.returncode}\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}"
    return proc


def wait_idle(world, name, timeout=20):
    """Until acpx's queue owner has let the agent go (its --ttl passed)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if "status: idle" in acpx(world, "status", "-s", name).stdout:
            return
        time.sleep(0.1)
    raise AssertionError("acpx kept the agent")


def test_acpx_one_shot_exec_with_tool_calls(client_world):
    proc = acpx(client_world, "--approve-all", "--format", "json", "exec", "tools please")
    frames = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    updates = [f["params"]["update"] for f in frames if f.get("method") == "session/update"]
    titles = [u["title"] for u in updates if u["sessionUpdate"] == "tool_call"]
    assert titles == ["bash: echo from-bash", "write_file: a.txt", "edit_file: a.txt"]
    finals = [u["status"] for u in updates if u["sessionUpdate"] == "tool_call_update" and u.get("status") != "in_progress"]
    assert finals == ["completed", "completed", "completed"]
    assert {"jsonrpc": "2.0", "id": 2, "result": {"stopReason": "end_turn"}} in frames
    assert (client_world["project"] / "a.txt").read_text() == "two\n"


def test_acpx_persistent_session_reconnects_through_session_load(client_world):
    acpx(client_world, "sessions", "new", "--name", "s1")
    try:
        first = acpx(client_world, "--approve-all", "--ttl", "1", "prompt", "-s", "s1", "hello first")
        assert "hello back" in first.stdout
        wait_idle(client_world, "s1")
        second = acpx(client_world, "--approve-all", "--ttl", "1", "prompt", "-s", "s1", "hello second")
        assert "hello back" in second.stdout and "end_turn" in second.stdout
        log = client_world["log"].read_text()
        assert "loaded from" in log and "2 message(s) replayed" in log  # a new process, the whole history
    finally:
        acpx(client_world, "sessions", "close", "s1", check=False)


def test_acpx_cancel_from_another_process(client_world):
    acpx(client_world, "sessions", "new", "--name", "c1")
    marker = client_world["marker"]
    command = [js_clients.bin_path("acpx"), "--agent", client_world["agent"], "--cwd", str(client_world["project"]),
               "--approve-all", "--ttl", "1", "prompt", "-s", "c1", "sleep now"]
    prompt = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env=client_world["env"])
    try:
        wait_present(marker, timeout=30)
        assert "cancel requested" in acpx(client_world, "cancel", "-s", "c1").stdout
        out, err = prompt.communicate(timeout=30)
        assert prompt.returncode == 0, err
        assert "cancelled" in out
        assert wait_gone(marker) == []
    finally:
        if prompt.poll() is None:
            prompt.kill()
            prompt.wait()
        acpx(client_world, "sessions", "close", "c1", check=False)


def test_the_typescript_sdk_client_runs_a_turn_with_bash_write_and_edit(client_world):
    folder = js_clients.ensure()
    command = ["node", os.path.join(folder, "sdk_client.mjs"), "--cwd", str(client_world["project"]),
               "--prompt", "tools please", "--", *bob_command()]
    proc = subprocess.run(command, capture_output=True, text=True, env=client_world["env"], timeout=60)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert proc.stderr == ""  # the SDK prints any frame it cannot validate: none
    events = [json.loads(line) for line in proc.stdout.splitlines()]
    assert events[-2] == {"type": "stop", "stopReason": "end_turn"} and events[-1] == {"type": "agent_exit", "code": 0}
    asked = [e["title"] for e in events if e["type"] == "permission"]
    assert asked == ["bash: echo from-bash", "write_file: a.txt", "edit_file: a.txt"]
    kinds = {e["update"]["sessionUpdate"] for e in events if e["type"] == "update"}
    assert {"agent_message_chunk", "tool_call", "tool_call_update", "usage_update", "available_commands_update"} <= kinds
    assert (client_world["project"] / "a.txt").read_text() == "two\n"
