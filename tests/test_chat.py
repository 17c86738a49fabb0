"""`bob-acp chat`, driven as a person would: in a terminal, answering its prompts."""

import json
import os
import subprocess

import pexpect
import pytest
import yaml
from bob_client import bob_command

pytestmark = pytest.mark.e2e


@pytest.fixture
def chat(bob_env, tmp_path, workdir):
    started = []

    def spawn(args, script=None, config=None):
        cfg = dict(config or {})
        if script is not None:
            path = tmp_path / "script.yaml"
            path.write_text(yaml.safe_dump(script))
            cfg.setdefault("model", {}).update({"provider": "script", "script": str(path)})
        (tmp_path / "config.yaml").write_text(yaml.safe_dump(cfg))
        child = pexpect.spawn(bob_command()[0], ["chat"] + args, cwd=str(workdir), env=bob_env,
                              encoding="utf-8", timeout=20, dimensions=(50, 200))
        started.append(child)
        return child

    yield spawn
    for child in started:
        if child.isalive():
            child.terminate(force=True)


TOOLS = {"turns": [
    {"match": "slow", "replies": [{"chunks": ["tick ", "tock ", "tick "], "delay": 3}]},
    {"replies": [
        {"text": "Checking.\n", "tool_calls": [{"name": "bash", "arguments": {"command": "echo from-bash"}}]},
        {"tool_calls": [{"name": "write_file", "arguments": {"path": "a.txt", "content": "one\n"}}]},
        {"tool_calls": [{"name": "write_file", "arguments": {"path": "b.txt", "content": "two\n"}}]},
        {"tool_calls": [{"name": "edit_file", "arguments": {"path": "a.txt", "old_string": "one", "new_string": "ONE"}}]},
        {"text": "Finished."},
    ]},
]}


def test_demo_shows_a_whole_turn(chat):
    child = chat(["--demo", "--yes"])
    child.expect("Hi! I'm Bob")
    child.expect(r"bash: pwd && ls -la")
    child.expect(r"\+\+\+ b.*hello\.py")
    child.expect(r"\+    return f\"Hello, \{name\}!\"")
    child.expect("Hello, world!")
    child.expect("See the README")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0


def test_permission_answers_y_a_n(chat, workdir):
    child = chat(["do the work"], TOOLS)
    child.expect(r"Allow bash: echo from-bash\?")
    child.sendline("y")
    child.expect("from-bash")
    child.expect(r"Allow write_file: a.txt\?")
    child.sendline("a")  # always, for write_file: b.txt is not asked
    child.expect(r"\+one")
    child.expect(r"\+two")
    child.expect(r"Allow edit_file: a.txt\?")
    child.sendline("n")
    child.expect(r"\[command rejected by the user\]")
    child.expect("Finished.")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0
    assert (workdir / "a.txt").read_text() == "one\n" and (workdir / "b.txt").read_text() == "two\n"
    assert "Allow write_file: b.txt" not in child.before


def test_ctrl_c_cancels_then_a_second_quits(chat):
    child = chat([], TOOLS)
    child.expect("Bob is ready")
    child.expect("you> ")
    child.sendline("slow please")
    child.expect("tick ")
    child.sendintr()
    child.expect(r"cancelling the turn")
    child.expect(r"\[cancelled\]")
    child.expect("you> ")
    child.sendline("slow again")
    child.expect("tick ")
    child.sendintr()
    child.expect("cancelling")
    child.sendintr()
    child.expect("bye")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0


def test_json_prints_raw_frames(bob_env, tmp_path, workdir):
    path = tmp_path / "script.yaml"
    path.write_text(yaml.safe_dump({"turns": [{"replies": [{"text": "hi there"}]}]}))
    (tmp_path / "config.yaml").write_text(yaml.safe_dump({"model": {"provider": "script", "script": str(path)}}))
    proc = subprocess.run(bob_command() + ["chat", "--json", "hello"], cwd=str(workdir), env=bob_env,
                          capture_output=True, timeout=30, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0
    frames = [json.loads(line) for line in proc.stdout.decode().splitlines()]
    assert frames[0]["result"]["agentInfo"]["name"] == "bob"
    assert any(f.get("params", {}).get("update", {}).get("content", {}).get("text") == "hi there" for f in frames)
    assert frames[-1]["result"] == {"stopReason": "end_turn"}


def test_load_resumes_a_saved_session(chat, workdir):
    script = {"turns": [{"match": "first", "replies": [{"text": "noted the first"}]},
                        {"replies": [{"text": "second answer"}]}]}
    child = chat(["first message"], script, {"sessions": {"enabled": True}})
    child.expect("noted the first")
    child.expect(pexpect.EOF)
    sid = os.listdir(workdir / ".bob" / "sessions")[0][:-5]
    child = chat(["--load", sid, "again"], script, {"sessions": {"enabled": True}})
    child.expect("you> first message")
    child.expect("noted the first")
    child.expect("second answer")
    child.expect(pexpect.EOF)
