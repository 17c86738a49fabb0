"""Issue 29 against the real bob-acp: `tools.sandbox` confines what bash runs with Landlock (writes
only in the project and temporary folders, TCP per `tools.sandboxNetwork`), the `sandboxed` mode
asks less inside it, and a sandbox that cannot be had is said, never skipped."""

from __future__ import annotations

import json
import socket
import subprocess
import threading

import pytest
import yaml
from bob_client import allow, bob_command, updates

from bob_acp import sandbox as sandbox_module

pytestmark = [pytest.mark.e2e, pytest.mark.skipif(sandbox_module.abi() < 4, reason="needs Landlock ABI 4")]


def bash(command, **extra):
    return {"tool_calls": [{"name": "bash", "arguments": {"command": command, **extra}}]}


def outputs(frames):
    return [u["rawOutput"]["output"] for u in updates(frames, "tool_call_update") if "rawOutput" in u]


@pytest.fixture
def outside(tmp_path):
    folder = tmp_path / "outside"  # beside the project, not under the temporary folder Bob allows
    folder.mkdir()
    return folder


@pytest.fixture
def own_tmp(tmp_path):
    """Bob's temporary folder (TMPDIR): the tests' own folders are under /tmp, which Bob's
    sandbox would otherwise allow."""
    folder = tmp_path / "tmp"
    folder.mkdir()
    return {"TMPDIR": str(folder)}


@pytest.fixture
def listener():
    """A TCP server on 127.0.0.1 that accepts and closes (a connect either works or is denied)."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    stop = threading.Event()

    def serve():
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = server.accept()
                conn.close()
            except OSError:
                continue

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield server.getsockname()[1]
    stop.set()
    thread.join(2)
    server.close()


def test_writes_outside_the_project_fail_and_inside_succeed(scripted, workdir, outside, own_tmp):
    (workdir / "escape").symlink_to(outside)
    turns = [{"replies": [bash("echo in > inside.txt && echo wrote-inside"),
                          bash(f"echo out > {outside}/x.txt"),
                          bash("echo out > escape/y.txt"),
                          bash("mkdir -p \"$XDG_CACHE_HOME/t\" && echo cached > \"$XDG_CACHE_HOME/t/c\" && echo cache-ok"),
                          {"text": "done"}]}]
    bob, sid = scripted(turns, config={"tools": {"sandbox": "workspace"}}, env=own_tmp)
    response, frames = bob.prompt(sid, "go", answer=allow)
    results = outputs(frames)
    assert results[0].startswith("wrote-inside") and (workdir / "inside.txt").read_text() == "in\n"
    assert "Permission denied" in results[1] and "unconfined" in results[1]  # the note the model reads
    assert "Permission denied" in results[2]  # a link from the project out is no way out
    assert results[3].startswith("cache-ok")
    assert list(outside.iterdir()) == []
    pending = updates(frames, "tool_call")
    assert all(u["_meta"]["bob"]["sandboxed"] is True for u in pending)


@pytest.mark.parametrize("network, connects", [(False, False), (True, True)])
def test_the_network_follows_the_setting(scripted, listener, network, connects):
    probe = f"python3 -c 'import socket; socket.create_connection((\"127.0.0.1\", {listener}), 5); print(\"connected\")'"
    bob, sid = scripted([{"replies": [bash(probe), {"text": "done"}]}],
                        config={"tools": {"sandbox": "workspace", "sandboxNetwork": network}})
    _, frames = bob.prompt(sid, "go", answer=allow)
    result = outputs(frames)[0]
    assert ("connected" in result) is connects, result


def test_sandboxed_mode_runs_bash_unasked_and_asks_for_an_unconfined_rerun(scripted, workdir, outside, own_tmp):
    turns = [{"replies": [bash("echo boxed > a.txt && echo ok"), bash(f"echo free > {outside}/z.txt", unconfined=True),
                          {"text": "done"}]}]
    bob, sid = scripted(turns, config={"tools": {"sandbox": "workspace"}, "permissions": {"mode": "sandboxed"}},
                        env=own_tmp)
    asked = []
    response, frames = bob.prompt(sid, "go", answer=lambda r: asked.append(r["params"]["toolCall"]["title"]) or allow(r))
    assert asked == [f"bash (unconfined): echo free > {outside}/z.txt"]
    assert (workdir / "a.txt").exists() and (outside / "z.txt").read_text() == "free\n"
    bob.wait_stderr("unconfined run (outside the sandbox)")
    spec = json.dumps(updates(frames, "tool_call")[1]["rawInput"])
    assert "unconfined" in spec


def test_a_sandbox_that_cannot_be_had_is_said_and_refuses_commands(scripted, workdir, bob_env, tmp_path):
    turns = [{"replies": [bash("echo ran > ran.txt"), {"text": "done"}]}]
    bob, sid = scripted(turns, config={"tools": {"sandbox": "workspace"}}, env={"BOB_ACP_NO_LANDLOCK": "1"})
    _, frames = bob.prompt(sid, "go", answer=allow)
    assert "cannot be had here: this kernel has no Landlock" in outputs(frames)[0]
    assert not (workdir / "ran.txt").exists()
    bob.wait_stderr("sandbox: workspace cannot be had")
    best, sid2 = scripted(turns, config={"tools": {"sandbox": "best-effort"}}, env={"BOB_ACP_NO_LANDLOCK": "1"})
    _, frames = best.prompt(sid2, "go", answer=allow)
    assert (workdir / "ran.txt").exists()
    (tmp_path / "config.yaml").write_text(yaml.safe_dump({"tools": {"sandbox": "workspace"}}))
    check = subprocess.run(bob_command() + ["--check"], env={**bob_env, "BOB_ACP_NO_LANDLOCK": "1"},
                           capture_output=True, text=True, timeout=30)
    assert "sandbox: workspace cannot be had: this kernel has no Landlock" in check.stdout
    check = subprocess.run(bob_command() + ["--check"], env=bob_env, capture_output=True, text=True, timeout=30)
    assert f"Landlock ABI {sandbox_module.abi()}" in check.stdout


def test_the_default_profile_runs_bash_unconfined_as_before(scripted, outside):
    bob, sid = scripted([{"replies": [bash(f"echo free > {outside}/d.txt"), {"text": "done"}]}])
    _, frames = bob.prompt(sid, "go", answer=allow)
    assert (outside / "d.txt").exists()
    assert all("_meta" not in u for u in updates(frames, "tool_call"))
    tools = bob.frames  # the tool list the model sees is the documented one: no unconfined parameter
    assert "unconfined" not in json.dumps(tools)
