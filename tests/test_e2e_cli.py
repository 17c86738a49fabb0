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
    assert proc.returncode == 0 and proc.stdout.decode().strip() == "bob-acp 0.20.0"
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
    assert any(e.startswith("bob 0.20.0") for e in events) and events[-1] == "[acp] input closed: bye"
    assert all({"level", "timestamp", "event"} <= set(line) for line in lines)
    assert "[acp]" not in bob.stderr()


def test_json_logs_carry_fields_and_the_console_line_stays_word_for_word(spawn_bob, scripted, tmp_path, workdir):
    """Issue 25: log events are templates with fields: JSON has the line and the fields (session,
    tool, calls); the console prints the documented line alone."""
    import json

    for fmt in ("json", "console"):
        log_file = tmp_path / f"bob-{fmt}.log"
        bob, sid = scripted([{"replies": [{"tool_calls": [{"name": "bash", "arguments": {"command": "true"}}]},
                                          {"text": "done"}]}],
                            config={"log": {"file": str(log_file), "format": fmt}, "permissions": {"mode": "allow-all"}})
        bob.prompt(sid, "go")
        assert bob.close() == 0
        text = log_file.read_text()
        if fmt == "json":
            lines = [json.loads(line) for line in text.splitlines()]
            new = next(line for line in lines if line["event"].startswith(f"[acp] session {sid}: new in"))
            assert new["session"] == sid and new["cwd"] == str(workdir) and new["mcp_servers"] == 0
            done = next(line for line in lines if line["event"].startswith("[acp] turn done"))
            assert done["event"] == "[acp] turn done: 1 command(s) · 0 file op(s) · 0 skill(s)"
            assert (done["session"], done["commands"], done["file_ops"]) == (sid, 1, 0)
            run = next(line for line in lines if line["event"].startswith("[acp] run without asking"))
            assert run["tool"] == "bash" and run["call"].startswith("call_") and run["mode"] == "allow-all"
        else:
            assert f"[acp] session {sid}: new in {workdir}; 0 MCP server(s) ignored\n" in text
            assert "[acp] turn done: 1 command(s) · 0 file op(s) · 0 skill(s)\n" in text
            assert "[acp] run without asking (permissions.mode allow-all): bash: true\n" in text


def test_check_reports_a_model_that_answers(bob_env, write_config, tmp_path):
    script = tmp_path / "script.yaml"
    script.write_text("turns:\n  - replies:\n      - text: ok\n")
    write_config({"model": {"provider": "script", "script": str(script)}})
    proc = subprocess.run(bob_command() + ["--check"], capture_output=True, env=bob_env, timeout=30)
    out = proc.stdout.decode()
    assert proc.returncode == 0, out
    assert f"script: {script}" in out and "model: script/gpt-4.1-mini answers in" in out and "'ok'" in out


SHADOWS = ("yaml", "requests", "orjson", "structlog", "urllib3", "json", "select", "bob_acp_probe")


def shadowing_project(folder):
    """A project whose Python files would run if Bob imported from its folder."""
    for name in SHADOWS:
        (folder / f"{name}.py").write_text(
            f"import pathlib\npathlib.Path({str(folder / ('IMPORTED-' + name))!r}).write_text('x')\n"
            "raise ImportError('shadow')\n")


def imported(folder):
    return sorted(p.name for p in folder.iterdir() if p.name.startswith("IMPORTED-"))


def test_python_dash_m_never_imports_the_project_s_files(tmp_path, bob_env, write_config):
    project = tmp_path / "shadowed"
    project.mkdir()
    shadowing_project(project)
    write_config({"model": {"provider": "script", "script": str(tmp_path / "s.yaml")}})
    (tmp_path / "s.yaml").write_text("turns: [{replies: [{text: hi}]}]\n")
    frames = b"".join(json_line(f) for f in (
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}},
        {"jsonrpc": "2.0", "id": 2, "method": "session/new", "params": {"cwd": str(project), "mcpServers": []}}))
    proc = subprocess.run([sys.executable, "-m", "bob_acp"], input=frames, capture_output=True, cwd=project,
                          env=bob_env, timeout=30)
    assert proc.returncode == 0, proc.stderr.decode()[-2000:]
    assert b'"sessionId"' in proc.stdout
    assert imported(project) == []


def test_the_chat_never_imports_the_project_s_files(tmp_path, bob_env, write_config):
    project = tmp_path / "shadowed"
    project.mkdir()
    shadowing_project(project)
    (tmp_path / "s.yaml").write_text("turns: [{replies: [{text: hello from the script}]}]\n")
    write_config({"model": {"provider": "script", "script": str(tmp_path / "s.yaml")}})
    chat = bob_command() + ["chat", "hi"]
    proc = subprocess.run(chat, capture_output=True, cwd=project, env=bob_env, timeout=60, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr.decode()[-2000:]
    assert b"hello from the script" in proc.stdout
    assert imported(project) == []


def json_line(frame):
    import json

    return json.dumps(frame).encode() + b"\n"


def test_a_terminal_on_stdin_is_served_and_left_as_it_was(tmp_path, bob_env, write_config):
    """Typed in a terminal, bob-acp says what it is, serves what is typed, and leaves the
    terminal's flags as it found them for the next program."""
    import pexpect

    command = " ".join(bob_command())
    probe = f"{sys.executable} -c 'import os; print(\"next program: blocking\", os.get_blocking(0))'"
    child = pexpect.spawn("bash", ["-c", f"{command} 2>&1; {probe}"], env=bob_env, cwd=str(tmp_path), timeout=20)
    try:
        child.expect("speaks the Agent Client Protocol on stdin")
        child.expect("bob-acp chat")
        child.sendline('{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}')
        child.expect('"protocolVersion":1')
        child.sendline('{"jsonrpc":"2.0","id":2,"method":"authenticate","params":{"methodId":"x"}}')
        child.expect('"id":2,"result":')  # still serving: a terminal's EAGAIN is not the end of input
        child.sendeof()
        child.expect("next program: blocking True")
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)


def test_a_template_with_one_field_is_filled_in_the_console_line():
    """(a template with a single field, as the cancel lines have, once printed unfilled)"""
    from bob_acp import log

    event = {"event": "[acp] session {session}: cancel after the turn answered: nothing to cancel",
             "session": "s-1", "level": "info", "_at": 0.0}
    line = log._console_renderer(None, "info", log._fill_processor(None, "info", log._stamp_processor(None, "info", event)))
    assert line.endswith("] [acp] session s-1: cancel after the turn answered: nothing to cancel")
    fields = {"event": "[acp] turn done: {commands} command(s)", "commands": 2, "session": "s-1", "level": "info"}
    assert '"session":"s-1"' in log._json_renderer(None, "info", log._fill_processor(None, "info", fields))


def test_help_names_the_commands_a_newcomer_needs(bob_env):
    shown = subprocess.run(bob_command() + ["--help"], env=bob_env, capture_output=True, text=True, timeout=30)
    assert shown.returncode == 0
    assert "bob-acp setup" in shown.stdout and "bob-acp chat" in shown.stdout
