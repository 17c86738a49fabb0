"""Issue 14 against the real bob-acp: secrets never leave, the repository is untrusted input,
start-up refuses what cannot work with one line."""

from __future__ import annotations

import json
import os
import subprocess
import time
import uuid

import pytest
import yaml
from bob_client import allow, bob_command, message_text, updates
from procs import wait_gone, wait_present

pytestmark = pytest.mark.e2e

KEY = "sk-secret-e2e-key-0123456789abcdef"
AWS = "aws-secret-value-9876543210"
GH = "ghp-token-value-5555555555"


def test_the_key_is_in_no_tool_result_request_or_session_file_even_with_a_hostile_agents_md(
        spawn_bob, server, workdir):
    (workdir / "AGENTS.md").symlink_to("/proc/self/environ")  # a cloned repository's trap
    server.enqueue(server.openai_tool_call("bash", {"command": "env | sort"}), server.openai_text("seen"),
                   server.openai_text("again"))
    bob = spawn_bob({"model": {"baseUrl": server.url + "/v1", "retries": 0}, "sessions": {"enabled": True},
                     "log": {"level": "debug"}},
                    env={"OPENAI_API_KEY": KEY, "AWS_SECRET_ACCESS_KEY": AWS, "GITHUB_TOKEN": GH, "VISIBLE_SETTING": "ok"})
    bob.initialize()
    sid = bob.new_session()
    response, frames = bob.prompt(sid, "show me the environment", answer=allow)
    assert response["result"]["stopReason"] == "end_turn"
    output = [u for u in updates(frames, "tool_call_update") if u.get("status") == "completed"][0]["rawOutput"]["output"]
    assert "VISIBLE_SETTING=ok" in output  # the environment is there, less its secrets
    assert "OPENAI_API_KEY" not in output and "AWS_SECRET_ACCESS_KEY" not in output and "GITHUB_TOKEN" not in output
    bob.prompt(sid, f"my key is {KEY}, keep it")  # pasted by the user: redacted before it is saved
    saved = (workdir / ".bob" / "sessions" / f"{sid}.json").read_text()
    assert "my key is [redacted], keep it" in saved
    system = server.requests[0]["body"]["messages"][0]["content"]
    assert "Project instructions" not in system  # the link to /proc/self/environ was not followed
    kept = json.dumps(bob.frames) + bob.stderr() + saved
    requests = json.dumps([r["body"] for r in server.requests[:-1]])  # the last one holds what the user pasted
    for secret in (KEY, AWS, GH):
        assert secret not in kept and secret not in requests
    assert AWS not in json.dumps(server.requests[-1]["body"]) and GH not in json.dumps(server.requests[-1]["body"])


def test_agents_md_as_a_fifo_never_blocks_session_new(spawn_bob, workdir, tmp_path):
    os.mkfifo(workdir / "AGENTS.md")
    other = tmp_path / "other"
    other.mkdir()
    bob = spawn_bob({})
    bob.initialize()
    assert bob.new_session()  # answered: the FIFO was not opened
    assert bob.new_session(str(other))  # and the next session is served too


def test_agents_md_is_read_from_the_git_root_down_to_the_cwd_nearest_last(scripted, workdir, tmp_path, server):
    import subprocess

    root = workdir
    subprocess.run(["git", "init", "-q", str(root)], check=True)  # (an empty .git folder is no repository)
    (root / "AGENTS.md").write_text("root rules")
    sub = root / "pkg" / "mod"
    sub.mkdir(parents=True)
    (root / "pkg" / "AGENTS.md").write_text("pkg rules")
    (sub / "AGENTS.md").write_text("module rules")
    outside = tmp_path / "outside.md"
    outside.write_text("outside rules")
    (root / "pkg" / "mod" / "LINKED.md").symlink_to(outside)
    from bob_acp.context import system_prompt
    found = system_prompt.agents_files(str(sub))
    assert [text for _, text in found] == ["root rules", "pkg rules", "module rules"]
    (sub / "AGENTS.md").unlink()
    (sub / "AGENTS.md").symlink_to(outside)  # a link out of the project: not read
    assert [text for _, text in system_prompt.agents_files(str(sub))] == ["root rules", "pkg rules"]


def test_a_key_with_a_stray_carriage_return_works_and_never_shows(spawn_bob, server):
    server.enqueue(server.status(401, {"error": {"message": "bad key"}}))
    bob = spawn_bob({"model": {"baseUrl": server.url + "/v1", "retries": 0}}, env={"OPENAI_API_KEY": KEY + "\r"})
    bob.initialize()
    sid = bob.new_session()
    response, _ = bob.prompt(sid, "hi")
    assert response["error"]["data"]["error"] == "model API 401: bad key"
    assert server.requests[0]["headers"]["Authorization"] == f"Bearer {KEY}"  # stripped at start-up
    assert KEY not in bob.stderr()


@pytest.mark.parametrize("url, problem", [
    ("localhost:11434/v1", "needs a scheme and a host"),
    ("http://127.0.0.1:99999/v1", "not a valid URL"),
    ("ftp://models.example/v1", "the scheme must be http or https"),
    ("http:///v1", "needs a host"),
])
def test_a_bad_base_url_is_one_line(tmp_path, bob_env, write_config, url, problem):
    path = write_config({"model": {"baseUrl": url}})
    proc = subprocess.run(bob_command() + ["--check"], input=b"", capture_output=True, env=bob_env, timeout=20)
    lines = proc.stderr.decode().strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr
    assert "model.baseUrl" in lines[0] and path in lines[0] and problem in lines[0]
    env = {**bob_env, "BOB_BASE_URL": url}
    write_config({})
    proc = subprocess.run(bob_command() + ["--check"], input=b"", capture_output=True, env=env, timeout=20)
    assert proc.returncode == 2 and "$BOB_BASE_URL" in proc.stderr.decode()


def test_check_never_prints_a_traceback(bob_env, write_config, tmp_path):
    write_config({"model": {"baseUrl": "http://127.0.0.1:9/v1", "retries": 0}})
    proc = subprocess.run(bob_command() + ["--check"], capture_output=True, env=bob_env, timeout=60)
    assert proc.returncode == 1
    assert "Traceback" not in proc.stdout.decode() + proc.stderr.decode()
    assert "does not answer: model API unreachable: 127.0.0.1:9" in proc.stdout.decode()


ALIAS_BOMB = "model:\n  name:\n    - &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"    - &{b} [{', '.join(['*' + a] * 9)}]\n" for a, b in zip("abcdefg", "bcdefgh", strict=True))


@pytest.mark.parametrize("content, needle", [
    (ALIAS_BOMB, "YAML aliases"),
    ("log: {file: /nonexistent-folder-for-bob/bob.log}\n", "log.file"),
    ("log: {file: /tmp}\n", "log.file"),
])
def test_config_errors_stay_one_short_line(tmp_path, bob_env, content, needle):
    (tmp_path / "config.yaml").write_text(content)
    started = time.monotonic()
    proc = subprocess.run(bob_command() + ["--check"], input=b"", capture_output=True, env=bob_env, timeout=30)
    lines = proc.stderr.decode().strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1 and needle in lines[0] and len(lines[0]) < 400, proc.stderr[-500:]
    assert time.monotonic() - started < 20  # (0.11.0 expanded the alias bomb until MemoryError)


def test_compression_happens_without_usage_from_the_server(spawn_bob, server):
    """A server that ignores include_usage reports no token count: Bob estimates it."""
    big = "x" * 4000
    server.enqueue(server.openai_text(big), server.openai_text("summary of it"), server.openai_text("fine"))
    bob = spawn_bob({"model": {"baseUrl": server.url + "/v1", "retries": 0},
                     "context": {"window": 1000, "threshold": 0.5, "keepLastTurns": 1}})
    bob.initialize()
    sid = bob.new_session()
    bob.prompt(sid, "first")
    response, frames = bob.prompt(sid, "second")
    assert message_text(frames) == "fine"
    bob.wait_stderr("[acp] automatic compression — 🗜️ compressed")
    assert "Summarise this conversation" in server.requests[1]["body"]["messages"][-1]["content"]


def test_read_skill_of_a_skill_holding_node_modules_stays_bounded(scripted, workdir):
    folder = workdir / ".bob" / "skills" / "heavy"
    (folder / "node_modules" / "pkg").mkdir(parents=True)
    (folder / "SKILL.md").write_text("---\nname: heavy\ndescription: Has dependencies.\n---\nRun run.sh.\n")
    (folder / "run.sh").write_text("#!/bin/sh\n")
    for n in range(3000):
        (folder / "node_modules" / "pkg" / f"f{n}.js").write_text("")
    bob, sid = scripted([{"replies": [{"tool_calls": [{"name": "read_skill", "arguments": {"name": "heavy"}}]},
                                      {"text": "ok"}]}])
    _, frames = bob.prompt(sid, "go")
    output = updates(frames, "tool_call_update")[-1]["rawOutput"]["output"]
    assert f"- {folder}/run.sh" in output.splitlines()[6]  # the top level first
    assert "… and 2901 more file(s)" in output and len(output) < 20000


def test_a_client_that_closes_bobs_output_ends_the_connection(tmp_path, bob_env, write_config):
    """EPIPE on Bob's stdout is the end of the connection, as the end of input is: the turn is
    cancelled, its tool killed, and Bob exits 0 instead of serving into the void."""
    marker = str(int(uuid.uuid4().hex[:8], 16))[:8]
    script = tmp_path / "s.yaml"
    script.write_text(yaml.safe_dump({"turns": [{"replies": [
        {"tool_calls": [{"name": "bash", "arguments": {"command": f"sleep 60.{marker}"}}]}, {"text": "x"}]}]}))
    write_config({"model": {"provider": "script", "script": str(script)}, "permissions": {"mode": "allow-all"}})
    proc = subprocess.Popen(bob_command(), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=open(tmp_path / "err.log", "wb"), env=bob_env, cwd=tmp_path)
    try:
        def send(frame):
            proc.stdin.write(json.dumps(frame).encode() + b"\n")
            proc.stdin.flush()

        send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}})
        proc.stdout.readline()
        send({"jsonrpc": "2.0", "id": 2, "method": "session/new", "params": {"cwd": str(tmp_path), "mcpServers": []}})
        sid = json.loads(proc.stdout.readline())["result"]["sessionId"]
        send({"jsonrpc": "2.0", "id": 3, "method": "session/prompt",
              "params": {"sessionId": sid, "prompt": [{"type": "text", "text": "go"}]}})
        wait_present(marker)
        proc.stdout.close()  # the client goes away on the reading side only
        send({"jsonrpc": "2.0", "id": 4, "method": "authenticate", "params": {"methodId": "x"}})  # Bob must answer: EPIPE
        assert proc.wait(10) == 0
        assert wait_gone(marker) == []
        assert "output closed by the client" in (tmp_path / "err.log").read_text()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.system(f"pkill -f 'sleep 60.{marker}' 2>/dev/null")

