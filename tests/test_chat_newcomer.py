"""Issue 30: `bob-acp chat` as a newcomer meets it, on a pty whose screen is read through a
terminal emulator (pyte): honest line editing, history that keeps what was typed, start-up
failures in words, sessions / model / mode from the terminal, a "no" with a reason, and a chat
that is clear without colour and on a narrow terminal."""

from __future__ import annotations

import json
import os
import signal
import tempfile
import time

import pexpect
import pyte
import pytest
from bob_client import bob_command
from chat_helpers import quit_chat, write_config
from test_chat import TOOLS, finish
from test_e2e_mcp import stdio

from bob_acp.context import history as bob_history

pytestmark = pytest.mark.e2e


class Terminal:
    """What a person sees: the child's output fed through a VT100 emulator."""

    def __init__(self, child, columns=200, lines=50):
        self.child = child
        self.screen = pyte.Screen(columns, lines)
        self.stream = pyte.Stream(self.screen)

    def settle(self, quiet=0.3):
        """Read until the child has been quiet for `quiet` seconds."""
        while True:
            try:
                self.stream.feed(self.child.read_nonblocking(65536, timeout=quiet))
            except pexpect.TIMEOUT:
                return
            except pexpect.EOF:
                return

    def cursor_line(self) -> str:
        return self.screen.display[self.screen.cursor.y].rstrip()


def test_recalling_a_longer_entry_redraws_exactly_with_colour(chat):
    child = chat([], TOOLS)
    term = Terminal(child)
    child.expect("you> ")
    term.stream.feed(child.before + child.after)
    child.send("count with a rather long prompt that is recalled later\r")
    child.expect("counted")
    child.expect("you> ")
    term.stream.feed(child.before + child.after)
    child.send("short")
    term.settle()
    child.send("\x1b[A")  # Up: the long entry replaces "short"
    term.settle()
    assert term.cursor_line() == "you> count with a rather long prompt that is recalled later"
    assert term.screen.cursor.x == len(term.cursor_line())
    child.send("\x15")  # Ctrl-U: the line is empty again, exactly
    term.settle()
    assert term.cursor_line() == "you>"
    child.sendline("/quit")
    finish(child)


def test_a_multi_line_prompt_is_kept_whole_in_the_history(chat, tmp_path, bob_env):
    child = chat([], TOOLS)
    child.expect("you> ")
    child.send("count one\rcount two\r")
    child.expect("counted")
    quit_chat(child)
    history = tmp_path / "home" / ".local" / "state" / "bob" / "chat-history"
    entries = [json.loads(line) for line in history.read_text().splitlines()]
    assert "count one\ncount two" in entries
    again = chat([], TOOLS, {"sessions": {"enabled": True}})
    again.expect("you> ")
    again.send("\x1b[A\x1b[A")  # "/quit", then the two-line prompt
    again.send("\r")
    again.expect("counted")
    quit_chat(again)
    folder = tmp_path / "project" / ".bob" / "sessions"
    stored = json.loads(next(folder.iterdir()).read_text())
    assert [bob_history.text_of(m) for m in stored["messages"] if m["role"] == "user"] == ["count one\ncount two"]


def test_a_failed_start_says_the_agents_own_words(bob_env, workdir, tmp_path):
    write_config(tmp_path, TOOLS)
    child = pexpect.spawn(bob_command()[0], bob_command()[1:] + ["--no-such-option", "chat", "hi"], cwd=str(workdir),
                          env=bob_env, encoding="utf-8", timeout=20)
    child.expect("bob-acp ended unexpectedly; it said: .*unrecognized arguments: --no-such-option")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 1


def test_the_banner_names_the_model_and_the_mode(chat):
    child = chat(["--model", "other-model"], TOOLS, {"permissions": {"mode": "allow-edits"}})
    child.expect("approval mode: allow-edits")
    child.expect(r"model script/other-model")
    quit_chat(child)


def test_sessions_model_and_mode_from_the_terminal(chat, bob_env, workdir, tmp_path):
    config = {"model": {"choices": ["model-b"]}}
    first = chat(["--profile", "full", "count this first"], TOOLS, config)
    finish(first)
    second = chat(["--profile", "full", "think about the second"], TOOLS, config)
    finish(second)
    latest = chat(["--profile", "full", "--continue"], TOOLS, config)
    latest.expect("Loaded session")
    latest.expect("think about the second")
    latest.expect("you> ")
    latest.sendline("/sessions")
    latest.expect(r"1\. .*think about the second")
    latest.expect(r"2\. .*count this first")
    latest.sendline("/model")
    latest.expect(r"Model: gpt-4.1-mini[^\r\n]*\r\n(\x1b\[2m)?\s+choices: [^\r\n]*model-b")
    latest.sendline("/model model-b")
    latest.expect("Model: model-b")
    latest.sendline("/mode allow-edits")
    latest.expect("Approval mode: allow-edits")
    latest.sendline("/mode nonsense")
    latest.expect("is not one of")
    latest.sendline("/quit")
    finish(latest)
    picked = chat(["--profile", "full", "--resume"], TOOLS, config)
    picked.expect(r"which one \(1-\d+\)\? ")
    picked.sendline("2")
    picked.expect("count this first")
    quit_chat(picked)
    plain = chat(["--profile", "default", "--resume"], TOOLS)  # (Bob's minimal profile keeps none)
    plain.expect("need sessions: {enabled: true} and acp: {sessionHistory: true}")
    finish(plain, status=1)


def test_the_chats_mcp_servers_come_from_bobs_config(chat):
    turns = {"turns": [{"replies": [{"tool_calls": [{"name": "mcp__test__echo", "arguments": {"message": "hi"}}]},
                                    {"text": "done"}]}]}
    child = chat(["--yes", "go"], turns, {"mcp": {"enabled": True}, "chat": {"mcpServers": [stdio()]}})
    child.expect("echo: hi")
    finish(child)


def test_a_no_can_say_what_to_do_instead(chat):
    child = chat(["--json", "ask first"], TOOLS)
    child.expect(r"what to do instead: ")
    child.sendline("n use pytest -x instead")
    child.expect(r"\[rejected by the user: use pytest -x instead\]")
    finish(child)


def test_clear_without_colour_and_on_a_narrow_terminal(chat, tmp_path):
    plain = chat(["think"], TOOLS, env={"NO_COLOR": "1"})
    plain.expect(r"\(thinking\) pondering deeply")
    finish(plain)
    narrow = chat(["ask first"], TOOLS)
    narrow.setwinsize(50, 40)
    term = Terminal(narrow, columns=40)
    narrow.expect(r"what to do\s+instead: ")
    term.stream.feed(narrow.before + narrow.after)
    shown = [line.rstrip() for line in term.screen.display if line.strip()]
    assert any(line.strip() == "touch asked" for line in shown), shown
    choices = [line for line in shown if "[y]es" in line or "instead" in line or "[a]lways" in line]
    assert choices and all(len(line) <= 40 for line in choices)
    narrow.sendline("y")
    finish(narrow)


def test_a_demo_ended_by_a_signal_removes_its_folder(chat):
    before = {n for n in os.listdir(tempfile.gettempdir()) if n.startswith("bob-demo-")}
    child = chat(["--demo"])
    child.expect("Bob asks before it runs a command")
    child.expect("what to do instead: ")
    os.kill(child.pid, signal.SIGTERM)
    child.expect(pexpect.EOF)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        left = {n for n in os.listdir(tempfile.gettempdir()) if n.startswith("bob-demo-")} - before
        if not left:
            break
        time.sleep(0.05)
    assert not left


@pytest.mark.parametrize("give", ["n", "y"])
def test_folders_a_saved_session_names_are_given_back_only_when_the_person_says(chat, workdir, tmp_path, give):
    """A session file can come with a cloned repository: the folders it names beyond its own
    are asked about before they are given to the session again."""
    other = tmp_path / "other"
    other.mkdir()
    sessions = workdir / ".bob" / "sessions"
    sessions.mkdir(parents=True)
    stamp = "2026-12-01T10:00:00.000000Z"
    (sessions / "20261201-100000-0badcafe.json").write_text(json.dumps({
        "version": 3, "id": "20261201-100000-0badcafe", "cwd": str(workdir), "title": "planted",
        "createdAt": stamp, "updatedAt": stamp, "generation": 1, "choices": {}, "turns": 1,
        "additionalDirectories": [str(other)],
        "messages": [{"role": "system", "content": "x"}, {"role": "user", "content": [{"type": "text", "text": "hi"}]},
                     {"role": "assistant", "content": "hello"}]}))
    child = chat(["--profile", "full", "--continue"], TOOLS)
    child.expect(r"also covered .*other\. Give it those folders again\? \[y/N\] ")
    child.sendline(give)
    if give == "n":
        child.expect("goes on in its own folder alone")
    child.expect("Loaded session 20261201-100000-0badcafe")
    quit_chat(child)


def test_an_unknown_command_is_answered_and_a_path_still_goes_to_the_model(chat):
    script = {"turns": [{"replies": [{"text": "about that path"}]}]}
    child = chat([], script)
    child.expect("you> ")
    child.sendline("/frobnicate now")
    child.expect("unknown command /frobnicate: the commands are ")
    child.expect("/help says what each does")
    child.expect("you> ")
    child.sendline("/etc/hosts looks odd")
    child.expect("about that path")
    quit_chat(child)


def test_a_broken_config_is_said_at_start_and_new_picks_up_the_fix(chat, tmp_path):
    script = tmp_path / "fixed-script.yaml"
    script.write_text(json.dumps({"turns": [{"replies": [{"text": "the fixed model answers"}]}]}))
    child = chat([], None, {"model": {"provider": "script", "script": str(script)}, "nonsense": {"key": 1}})
    child.expect("Bob's configuration cannot be used: ")
    child.expect("nonsense")
    child.expect("you> ")
    (tmp_path / "config.yaml").write_text(json.dumps({"model": {"provider": "script", "script": str(script)}}))
    child.sendline("/new")
    child.expect("New session .*, with the configuration as it is now")
    child.expect("you> ")
    child.sendline("hello")
    child.expect("the fixed model answers")
    quit_chat(child)


def _help_line(child) -> str:
    child.expect("you> ")
    child.sendline("/help")
    child.expect(r"commands of this chat: ([^\r\n]*)\r\n")
    return child.match.group(1)


def test_the_chat_starts_bob_as_editors_do_and_help_lists_only_what_works(chat):
    """`bob-acp chat` is a client like an editor: its agent runs with the full profile (saved
    sessions, the pickers) unless the person names a profile; /help lists the commands that work
    with the profile the agent has."""
    full = chat([], TOOLS)
    listed = _help_line(full)
    assert "/sessions" in listed and "/model [MODEL]" in listed and "/mode [MODE]" in listed
    quit_chat(full)
    for args, config in ((["--profile", "default"], None), ([], {"profile": "default"})):
        plain = chat(args, TOOLS, config)
        listed = _help_line(plain)
        assert "/new" in listed and "/quit" in listed
        assert "/sessions" not in listed and "/model" not in listed and "/mode" not in listed, (args, listed)
        quit_chat(plain)


def test_with_no_usable_model_the_chat_waits_and_a_prompt_after_the_fix_is_answered(chat, tmp_path):
    """The full profile's agent opens no session without a usable model: the chat says so, stays
    open, and the first prompt after the fix opens the session and is answered."""
    script = tmp_path / "later.yaml"
    script.write_text(json.dumps({"turns": [{"replies": [{"text": "set up at last"}]}]}))
    child = chat([], None, {"model": {"provider": "script"}})
    child.expect("Bob has no usable model yet: ")
    child.expect("No session yet")
    child.expect("you> ")
    child.sendline("hello")
    child.expect("no session yet: Bob has no usable model")
    (tmp_path / "config.yaml").write_text(json.dumps({"model": {"provider": "script", "script": str(script)}}))
    child.expect("you> ")
    child.sendline("hello again")
    child.expect("set up at last")
    quit_chat(child)


def test_the_chat_offers_the_project_rules_and_keeps_one(chat, workdir):
    """The chat's agent runs with the full profile: its question also offers "always in this
    [p]roject" and "ne[v]er"; [p] keeps the rule, and the next chat runs the command unasked,
    saying by which rule."""
    script = {"turns": [{"replies": [{"tool_calls": [{"name": "bash", "arguments": {"command": "echo by-rule"}}]},
                                     {"text": "ran it"}]}]}
    first = chat(["run it"], script)
    first.expect(r"always in this \[p\]roject \(`echo by-rule …`\)")
    first.expect(r"ne\[v\]er in this project")
    first.expect("what to do instead: ")
    first.sendline("p")
    first.expect("ran it")
    finish(first)
    second = chat(["run it"], script)
    second.expect(r"by a rule of this project: always `echo by-rule …`")
    second.expect("ran it")
    finish(second)
    assert "Allow bash?" not in second.before
