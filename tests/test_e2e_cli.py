"""The command line: the stdout guard, --version, --acp, python -m bob_acp, --check."""

import subprocess
import sys

import pytest

from bob_client import bob_command

pytestmark = pytest.mark.e2e

NOISY = r'''
import os, subprocess, sys, warnings
from bob_acp.acp import server
original = server.AgentServer.initialize
def noisy(self, params):
    print("stray print from a handler")
    sys.stdout.write("direct sys.stdout write\n")
    sys.stdout.flush()
    subprocess.run(["echo", "child process writing to its stdout"])
    os.system("echo child of os.system")
    os.write(1, b"raw write to fd 1\n")
    warnings.warn("a library warning")
    return original(self, params)
server.AgentServer.initialize = noisy
from bob_acp.cli import main
sys.exit(main([]))
'''


def test_stray_output_never_reaches_the_protocol_stream(spawn_bob):
    bob = spawn_bob(command=[sys.executable, "-c", NOISY])
    first = bob.initialize()  # the client fails on any line that is not a valid frame
    assert first["agentInfo"]["name"] == "bob"
    assert bob.result("authenticate", {"methodId": "x"}) == {}
    text = bob.wait_stderr("raw write to fd 1")
    for stray in ("stray print from a handler", "direct sys.stdout write", "child process writing to its stdout",
                  "child of os.system", "a library warning"):
        assert stray in text
    assert bob.close() == 0
    assert len(bob.frames) == 2


def test_version_and_acp_flag(spawn_bob, bob_env):
    proc = subprocess.run(bob_command() + ["--version"], capture_output=True, env=bob_env, timeout=20)
    assert proc.returncode == 0 and proc.stdout.decode().strip() == "bob-acp 0.11.0"
    bob = spawn_bob(args=["--acp"])
    assert bob.initialize()["protocolVersion"] == 1


def test_python_dash_m_serves_too(spawn_bob):
    bob = spawn_bob(command=[sys.executable, "-m", "bob_acp"])
    assert bob.initialize()["agentInfo"]["title"] == "Bob (bash-first agent)"
    assert bob.close() == 0


def test_check_reports_config_skills_and_a_missing_model(bob_env, write_config):
    write_config({"model": {"name": "gpt-test"}})
    proc = subprocess.run(bob_command() + ["--check"], capture_output=True, env=bob_env, timeout=30)
    out = proc.stdout.decode()
    assert proc.returncode == 1
    assert "name: gpt-test" in out and "greetings" in out and "model: not configured" in out
    assert "$OPENAI_API_KEY is not set" in out


def test_logs_go_to_the_configured_file_as_json(spawn_bob, tmp_path):
    log_file = tmp_path / "bob.log"
    bob = spawn_bob({"log": {"file": str(log_file), "format": "json", "level": "debug"}})
    bob.initialize()
    assert bob.close() == 0
    import json
    lines = [json.loads(line) for line in log_file.read_text().splitlines()]
    events = [line["event"] for line in lines]
    assert any(e.startswith("[acp] initialize: client pytest 1, protocol 1") for e in events)
    assert any(e.startswith("bob 0.11.0") for e in events) and events[-1] == "[acp] input closed: bye"
    assert all({"level", "timestamp", "event"} <= set(line) for line in lines)
    assert "[acp]" not in bob.stderr()


def test_check_reports_a_model_that_answers(bob_env, write_config, tmp_path):
    script = tmp_path / "script.yaml"
    script.write_text("turns:\n  - replies:\n      - text: ok\n")
    write_config({"model": {"provider": "script", "script": str(script)}})
    proc = subprocess.run(bob_command() + ["--check"], capture_output=True, env=bob_env, timeout=30)
    out = proc.stdout.decode()
    assert proc.returncode == 0, out
    assert f"script: {script}" in out and "model: script/gpt-4.1-mini answers in" in out and "'ok'" in out
