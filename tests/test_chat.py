"""`bob-acp chat`, driven as a person would: on a terminal (pty) where a terminal is the point
(colour, line editing, Ctrl-C, a paste, the spinner), on pipes elsewhere."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time

import pexpect
import pytest
from bob_client import bob_command
from chat_helpers import quit_chat, write_config  # noqa: F401  (tests of other files use it from here)

from bob_acp.context import history

pytestmark = pytest.mark.e2e
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ANSI = "\x1b["


def piped(args, bob_env, workdir, timeout=30, **kw):
    return subprocess.run(bob_command() + ["chat"] + args, cwd=str(workdir), env=bob_env, capture_output=True,
                          text=True, timeout=timeout, stdin=subprocess.DEVNULL, start_new_session=True, **kw)


TOOLS = {"turns": [
    {"match": "slow", "replies": [{"chunks": ["tick ", "tock ", "tick "], "delay": 3}]},
    {"match": "ponder", "replies": [{"wait": 30, "text": "never"}]},
    {"match": "ask first", "replies": [{"tool_calls": [{"name": "bash", "arguments": {"command": "touch asked"}}]},
                                       {"text": "after"}]},
    {"match": "count", "replies": [{"text": "counted"}]},
    {"match": "think", "replies": [{"thoughts": ["pondering deeply"], "text": "thought done"}]},
    {"match": "live", "replies": [{"tool_calls": [{"name": "bash", "arguments": {
        "command": "for i in 1 2 3 4; do echo step $i; sleep 0.4; done"}}]}, {"text": "live done"}]},
    {"replies": [
        {"text": "Checking.\n", "tool_calls": [{"name": "bash", "arguments": {"command": "echo from-bash"}}]},
        {"tool_calls": [{"name": "write_file", "arguments": {"path": "a.txt", "content": "one\n"}}]},
        {"tool_calls": [{"name": "write_file", "arguments": {"path": "b.txt", "content": "two\n"}}]},
        {"tool_calls": [{"name": "edit_file", "arguments": {"path": "a.txt", "old_string": "one", "new_string": "ONE"}}]},
        {"text": "Finished."},
    ]},
]}


def finish(child, status=0):
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == status, child.before


# ---- the README's first command, where it leaves you ---------------------------------------------

def test_the_demo_from_a_clone_root_with_a_normal_install(tmp_path, bob_env):
    """As the README's first command: the clone's root as the folder, a non-editable install
    (not the source tree) as the package, the whole scripted turn shown."""
    clone = tmp_path / "clone"
    shutil.copytree(ROOT, clone, ignore=shutil.ignore_patterns(".git", ".venv", "node_modules", "__pycache__",
                                                              "*.egg-info", "build", ".pytest_cache"))
    site = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps",
                    "--target", str(site), str(clone)], check=True, capture_output=True, timeout=300)
    env = {**bob_env, "PYTHONPATH": str(site), "TERM": "xterm"}
    child = pexpect.spawn(sys.executable, [str(site / "bin" / "bob-acp"), "chat", "--demo"], cwd=str(clone), env=env,
                          encoding="utf-8", timeout=30, dimensions=(50, 200))
    try:
        for _ in range(4):  # bash, write_file, edit_file, bash again (the full profile's "always": one command)
            child.expect(r"\[n\]o, and what to do instead: ")
            child.sendline("a")
        child.expect("Hello, world!")
        child.expect("See the README")
        finish(child)
    finally:
        if child.isalive():
            child.terminate(force=True)


def test_demo_shows_a_whole_turn(chat):
    child = chat(["--demo", "--yes"])
    child.expect("Hi! I'm Bob")
    child.expect(r"bash: pwd && ls -la")
    child.expect(r"\+\+\+ b/hello\.py")  # relative to the folder, not b/ glued to an absolute path
    child.expect(r"\+    return f\"Hello, \{name\}!\"")
    child.expect("Hello, world!")
    child.expect("See the README")
    finish(child)


# ---- permission, colour -------------------------------------------------------------------------

def test_permission_answers_y_a_n_with_the_proposed_change_first(chat, workdir):
    child = chat(["--profile", "default", "do the work"], TOOLS)  # ("always": the tool, for the session)
    child.expect(r"Allow bash\?\x1b\[0m\r\n    echo from-bash\r\n")
    child.sendline("y")
    child.expect("from-bash")
    child.expect(r"\+one")  # the proposed change, before the question
    child.expect(r"Allow write_file\?\x1b\[0m\r\n    a.txt\r\n")
    child.sendline("a")  # always, for write_file: b.txt is not asked
    child.expect(r"\+two")
    child.expect(r"Allow edit_file\?\x1b\[0m\r\n    a.txt\r\n")
    child.sendline("n")
    child.expect(r"edit_file: a.txt.*\[rejected\]")
    child.expect("Finished.")
    finish(child)
    assert (workdir / "a.txt").read_text() == "one\n" and (workdir / "b.txt").read_text() == "two\n"


def test_colour_on_a_terminal_only_and_no_color_honoured(chat, bob_env, workdir, tmp_path):
    coloured = chat(["count"], TOOLS)
    coloured.expect(pexpect.EOF)
    assert "counted" in coloured.before and ANSI + "2mcontext:" in coloured.before
    plain = chat(["count"], TOOLS, env={"NO_COLOR": "1"})
    plain.expect(pexpect.EOF)
    assert "counted" in plain.before and ANSI not in plain.before
    write_config(tmp_path, TOOLS)
    proc = piped(["count", "--yes"], bob_env, workdir)
    assert proc.returncode == 0 and "counted" in proc.stdout and ANSI not in proc.stdout


def test_diffs_are_coloured_on_a_terminal(chat):
    child = chat(["do the work", "--yes"], TOOLS)
    child.expect(r"\x1b\[32m\+one")
    child.expect(r"\x1b\[31m-one")
    finish(child)


# ---- Ctrl-C --------------------------------------------------------------------------------------

def test_ctrl_c_cancels_a_turn_and_a_second_quits(chat):
    child = chat([], TOOLS)
    child.expect("Bob is ready")
    child.expect("you> ")
    child.sendline("slow please")
    child.expect("tick ")
    child.sendintr()
    child.expect("cancelling the turn")
    child.expect(r"\(cancelled\)")
    child.expect("you> ")
    child.sendline("slow again")
    child.expect("tick ")
    child.sendintr()
    child.expect("cancelling")
    child.sendintr()  # a second Ctrl-C: while the cancel is under way, or just after at the prompt
    # Its effect, whenever it is handled: a quit (during the cancel, or at the prompt within a
    # moment of it), or, when handled at the prompt later than that, a cleared line.
    if child.expect(["bye", "line cleared"]) == 1:
        child.expect("you> ")
        child.send("z")
        child.expect("z")
        child.sendintr()
        child.expect("bye")
    finish(child)


def test_ctrl_c_at_the_prompt_clears_the_line_and_a_second_quits(chat):
    child = chat([], TOOLS)
    child.expect("you> ")
    child.send("half a thought")
    child.expect("half a thought")  # echoed: readline has the terminal (keys before that are its to lose)
    child.sendintr()
    child.expect("line cleared")
    child.expect("you> ")
    child.sendline("count")  # still working: the first Ctrl-C did not quit
    child.expect("counted")
    child.expect("you> ")
    child.send("x")
    child.expect("x")
    child.sendintr()
    child.expect("line cleared")
    child.expect("you> ")
    child.send("y")
    child.expect("y")
    child.sendintr()
    child.expect("bye")
    finish(child)


def test_ctrl_c_at_a_permission_question_cancels_the_turn(chat, workdir):
    child = chat([], TOOLS)
    child.expect("you> ")
    child.sendline("ask first")
    child.expect(r"Allow bash\?\x1b\[0m\r\n    touch asked\r\n")
    child.sendintr()
    child.expect(r"\(cancelled\)")
    quit_chat(child)
    assert not (workdir / "asked").exists()


def test_a_cancelled_one_shot_exits_130(chat):
    child = chat(["slow please"], TOOLS)
    child.expect("tick ")
    child.sendintr()
    child.expect(r"\(cancelled\)")
    finish(child, 130)


def test_a_plan_is_shown_as_a_checklist_when_it_changes(bob_env, workdir, tmp_path):
    steps = [{"content": "read the code", "priority": "high", "status": "completed"},
             {"content": "write the fix", "priority": "high", "status": "in_progress"},
             {"content": "run the tests", "priority": "medium", "status": "pending"}]
    script = {"turns": [{"replies": [{"tool_calls": [{"name": "update_plan", "arguments": {"entries": steps}}]},
                                     {"tool_calls": [{"name": "update_plan", "arguments": {"entries": steps}}]},
                                     {"text": "planned"}]}]}
    write_config(tmp_path, script, {"tools": {"plan": True}})
    proc = piped(["plan it", "--yes"], bob_env, workdir)
    assert proc.returncode == 0, proc.stderr
    assert "plan:\n  [x] read the code\n  [>] write the fix\n  [ ] run the tests\n" in proc.stdout
    assert proc.stdout.count("\nplan:\n") == 1  # the same plan again is not shown twice


# ---- line editing, history, a paste ---------------------------------------------------------------

def test_up_recalls_the_last_prompt(chat, bob_env):
    child = chat([], TOOLS)
    child.expect("you> ")
    child.sendline("count")
    child.expect("counted")
    child.expect("you> ")
    child.send("\x1b[A")  # Up: the last prompt again, not "^[[A"
    child.send("\r")
    child.expect("counted")
    child.expect("you> ")
    assert "^[[A" not in child.before
    child.sendline("/quit")
    finish(child)
    saved = os.path.join(bob_env["HOME"], ".local", "state", "bob", "chat-history")
    assert os.stat(saved).st_mode & 0o777 == 0o600  # (what was typed or pasted: its owner's alone)


def test_a_paste_makes_one_turn(chat, workdir, tmp_path):
    child = chat([], TOOLS, {"sessions": {"enabled": True}})
    child.expect("you> ")
    child.send("count one\rcount two\rcount three\r")
    child.expect("counted")
    quit_chat(child)
    folder = workdir / ".bob" / "sessions"
    stored = json.loads(next(folder.iterdir()).read_text())
    users = [history.text_of(m) for m in stored["messages"] if m["role"] == "user"]
    assert users == ["count one\ncount two\ncount three"]


def test_help_lists_the_agents_commands_and_the_keys(chat):
    child = chat([], TOOLS)
    child.expect("/help lists the commands")
    child.expect("you> ")
    child.sendline("/help")
    child.expect("/quit")
    child.expect("/compact")
    child.expect("/greetings")
    child.expect("Up/Down")
    quit_chat(child)


# ---- a live turn ----------------------------------------------------------------------------------

def test_live_output_thoughts_usage_and_the_spinner(chat):
    child = chat([], TOOLS)
    child.expect("you> ")
    child.sendline("live")
    child.expect(r"\[n\]o, and what to do instead: ")
    child.sendline("y")
    child.expect(r"│ step 1")  # the rolling tail while the command runs
    child.expect(r"│ step 2")
    child.expect("live done")
    child.expect("context: ")
    child.expect("you> ")
    child.sendline("think")
    child.expect(r"\x1b\[2mpondering deeply")  # a thought, dimmed
    child.expect("thought done")
    child.expect("you> ")
    child.sendline("ponder")
    child.expect("⠋|⠙|⠹|⠸|⠼|⠴|⠦|⠧|⠇|⠏")  # a model that takes its time: the spinner with its seconds
    child.expect(r"waiting for the model.*\d+s")
    child.sendintr()
    child.expect(r"\(cancelled\)")
    quit_chat(child)


def test_a_retry_is_shown(chat, server):
    server.enqueue(server.status(503, {"error": {"message": "overloaded"}}), server.openai_text("after the retry"))
    child = chat(["hi"], config={"model": {"baseUrl": server.url + "/v1", "retries": 2}},
                 env={"OPENAI_API_KEY": "sk-chat-test-000"})
    child.expect("model API 503: overloaded; retry 1 in")
    child.expect("after the retry")
    finish(child)


def test_a_retry_in_the_open_chat_says_that_new_uses_a_fixed_configuration(chat, server):
    """The model server is down and the person fixes the config meanwhile: the open session keeps
    the settings it started with, and the chat says that /new picks up the fix (once a turn)."""
    server.enqueue(server.status(503, {"error": {"message": "overloaded"}}),
                   server.status(503, {"error": {"message": "overloaded"}}), server.openai_text("after the retries"))
    child = chat([], config={"model": {"baseUrl": server.url + "/v1", "retries": 3}},
                 env={"OPENAI_API_KEY": "sk-chat-test-000"})
    child.expect("you> ")
    child.sendline("hi")
    child.expect("retry 1 in")
    child.expect("Ctrl-C, then /new opens a session that uses it")
    child.expect("after the retries")
    assert child.before.count("/new opens a session") == 0  # (said once, not at each retry)
    quit_chat(child)


# ---- --json, --load, pipes, words ----------------------------------------------------------------

def test_json_is_pure_ndjson(bob_env, tmp_path, workdir):
    write_config(tmp_path, TOOLS)
    proc = piped(["--json", "--yes", "do the work"], bob_env, workdir)
    assert proc.returncode == 0
    frames = [json.loads(line) for line in proc.stdout.splitlines()]  # every line is a frame
    assert frames[0]["result"]["agentInfo"]["name"] == "bob"
    assert any(f.get("method") == "session/request_permission" for f in frames)


def test_json_without_a_terminal_needs_yes_or_no(bob_env, tmp_path, workdir):
    write_config(tmp_path, TOOLS)
    proc = piped(["--json", "do the work"], bob_env, workdir)
    assert proc.returncode == 2 and "--json needs --yes or --no" in proc.stderr and proc.stdout == ""


def test_the_demo_without_a_terminal_says_which_steps_it_skipped(bob_env, workdir):
    proc = piped(["--demo"], bob_env, workdir)
    lines = proc.stdout.splitlines()
    assert lines[-1].startswith("The demo skipped 4 step(s), rejected because there was no terminal to ask on: "
                                "bash: pwd && ls -la; write_file: hello.py; edit_file: hello.py; bash: python3 "
                                "hello.py. Nothing of them ran"), proc.stdout


def test_without_a_terminal_a_tool_call_is_rejected_saying_why(bob_env, tmp_path, workdir):
    write_config(tmp_path, TOOLS)
    proc = piped(["ask first"], bob_env, workdir)
    assert "there is no terminal to ask on (--yes allows every call)" in proc.stdout
    assert not (workdir / "asked").exists()


def test_load_replays_each_message_on_its_own_lines_under_a_header(chat, tmp_path, workdir, bob_env):
    write_config(tmp_path, TOOLS, {"sessions": {"enabled": True}})
    first = piped(["do the work", "--no"], bob_env, workdir)
    assert first.returncode == 0
    sid = json.loads(next((workdir / ".bob" / "sessions").iterdir()).read_text())["id"]
    child = chat(["--load", sid], TOOLS, {"sessions": {"enabled": True}})
    child.expect(f"Loaded session {sid}:")
    child.expect(r"\r\n.*you> .*do the work\r\n")
    child.expect(r"Checking\.\r\n")
    child.expect(r"write_file: a.txt.*\[rejected\]")
    quit_chat(child)


def test_a_closed_pipe_is_no_traceback(bob_env, tmp_path, workdir):
    write_config(tmp_path, TOOLS)
    command = " ".join(bob_command())
    for pipeline in (f"{command} chat --yes 'do the work' | head -1", f"{command} --check | head -1"):
        proc = subprocess.run(["bash", "-c", pipeline], cwd=str(workdir), env=bob_env, capture_output=True,
                              text=True, timeout=60, start_new_session=True)
        assert "Traceback" not in proc.stderr and "BrokenPipe" not in proc.stderr, pipeline


def test_errors_and_stop_reasons_in_words(bob_env, tmp_path, workdir):
    write_config(tmp_path, TOOLS)
    proc = piped(["--profile", "default", "--load", "20260101-000000-00000000"], bob_env, workdir)
    assert proc.returncode == 1 and "keeps no sessions" in proc.stdout and "Method not found" not in proc.stdout
    proc = piped(["--load", "20260101-000000-00000000"], bob_env, workdir)  # (the chat's own profile: full)
    assert proc.returncode == 1 and "cannot load session 20260101-000000-00000000: session not found" in proc.stdout
    proc = piped(["--cwd", "/no/such/folder", "hi"], bob_env, workdir)
    assert proc.returncode == 1 and "cannot open a session in /no/such/folder" in proc.stdout
    assert "Invalid params" not in proc.stdout
    write_config(tmp_path, None, {"model": {"provider": "script"}})
    proc = piped(["--profile", "default", "hi"], bob_env, workdir)
    assert proc.returncode == 1 and "(no model is configured" in proc.stdout and "[refusal]" not in proc.stdout
    proc = piped(["hi"], bob_env, workdir)  # (the full profile's agent refuses the session itself)
    assert proc.returncode == 1 and "Bob has no usable model: set model.script" in proc.stdout, proc.stdout
    assert "Authentication required" not in proc.stdout


def test_undo_in_the_chat_takes_back_the_last_turn(chat, workdir):
    if shutil.which("git") is None:
        pytest.skip("checkpoints need git")
    script = {"turns": [{"match": "write", "replies": [
        {"tool_calls": [{"name": "write_file", "arguments": {"path": "made.txt", "content": "by the turn\n"}}]},
        {"text": "written"}]}]}
    log = workdir.parent / "chat-undo.log"
    child = chat([], script, {"tools": {"checkpoints": True}, "permissions": {"mode": "allow-all"},
                              "log": {"file": str(log)}})
    child.expect("you> ")
    deadline = time.monotonic() + 30  # (the first look at the project: a call before it is not recorded)
    while "checkpoints: first look at" not in (log.read_text() if log.exists() else ""):
        assert time.monotonic() < deadline, "the first look at the project was never made"
        time.sleep(0.02)
    child.sendline("/help")
    child.expect("/undo")
    child.expect("you> ")
    child.sendline("write it")
    child.expect("written")
    child.expect("you> ")
    assert (workdir / "made.txt").exists()
    child.sendline("/undo")
    child.expect("Undid the turn")
    child.expect("you> ")
    assert not (workdir / "made.txt").exists()
    child.sendline("/quit")
    finish(child)
