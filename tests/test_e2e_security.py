"""Issue 22 against the real bob-acp: grants that mean what the user approved, a terminal that
cannot be spoofed, no orphan however a process escapes, and keys that stay put."""

from __future__ import annotations

import io
import json
import os
import signal
import time

import pexpect
import pytest
import yaml
from bob_client import allow, allow_always, bash, bob_command, message_text, tool, updates
from procs import wait_gone, wait_present
from test_e2e_mcp import calls, marker, stdio

pytestmark = pytest.mark.e2e

KEY = "sk-secret-security-key-0123456789"


# ---- 1. the chat shows exactly what will run -------------------------------------------------------

SPOOF = "touch PWNED; : \x1b[2K\r\u2026? Allow bash: ls -la"


def test_the_chat_shows_the_command_that_will_run_and_no_escape_reaches_the_terminal(bob_env, tmp_path, workdir):
    script = {"turns": [{"replies": [
        {"text": "hello \x1b]52;c;ZXZpbA==\x07 \x1b]0;owned\x07 \x1b[2J\x1b[H done\n", **bash(SPOOF)},
        bash("printf 'out \\033[31mred\\033[0m \\033]0;title\\007 \\r over\\n'"),
        {"text": "bye"},
    ]}]}
    (tmp_path / "script.yaml").write_text(yaml.safe_dump(script))
    (tmp_path / "config.yaml").write_text(yaml.safe_dump({"model": {"provider": "script",
                                                                   "script": str(tmp_path / "script.yaml")}}))
    env = {k: v for k, v in {**bob_env, "TERM": "xterm"}.items() if k != "PYTHONUNBUFFERED"}
    child = pexpect.spawn(bob_command()[0], bob_command()[1:] + ["chat", "go"], cwd=str(workdir), env=env,
                          encoding="utf-8", timeout=20, dimensions=(50, 200),
                          preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    seen = io.StringIO()
    child.logfile_read = seen
    try:
        child.expect(r"Allow bash\?(\x1b\[0m)?\r\n    touch PWNED; : ␛\[2K\^M…\? Allow bash: ls -la\r\n")
        child.sendline("y")
        child.expect(r"\[y\]es once")
        child.sendline("y")
        child.expect(pexpect.EOF)
    finally:
        child.close()
    everything = seen.getvalue()
    assert (workdir / "PWNED").exists()  # what ran is what the question showed
    for sequence in ("\x1b]", "\x1b[2J", "\x1b[H", "\x1b[2K", "\x07", "\x1b[31m"):
        assert sequence not in everything, sequence
    assert "␛]52;c;ZXZpbA==^G" in everything and "␛[31mred" in everything


# ---- 2. a command grant matches only the command bash will run --------------------------------------

VARIANTS = ["echo granted\nid", "echo\x0bgranted", "echo\xa0granted", "echo\u2028granted", "echo granted\r",
            "echo\u200bgranted", "echo\tgranted\x1b"]


def test_a_command_grant_covers_only_the_same_words(scripted):
    bob, sid = scripted([{"replies": [bash("echo granted"), bash("echo   granted"), bash("echo\t granted ")]
                          + [bash(v) for v in VARIANTS] + [{"text": "done"}]}],
                        config={"permissions": {"allowAlways": "command"}})
    asked = []

    def answer(request):
        asked.append(request["params"]["toolCall"]["rawInput"]["command"])
        options = {o["optionId"] for o in request["params"]["options"]}
        return allow_always(request) if "allow_always" in options else allow(request)

    response, _ = bob.prompt(sid, "go", answer=answer)
    assert response["result"]["stopReason"] == "end_turn"
    assert asked == ["echo granted"] + VARIANTS  # the spaced-out forms were covered, no variant was
    kinds = [[o["kind"] for o in f["params"]["options"]] for f in bob.frames
             if f.get("method") == "session/request_permission"]
    assert kinds[0] == ["allow_once", "allow_always", "reject_once"]
    assert all(k == ["allow_once", "reject_once"] for k in kinds[1:])  # never offered to be remembered


# ---- 3. allow-edits means this project's files -----------------------------------------------------------

def test_allow_edits_runs_unasked_only_inside_the_project(scripted, workdir, tmp_path):
    (workdir / ".git").mkdir()
    (workdir / "link").symlink_to(tmp_path / "home")
    (tmp_path / "outside.txt").write_text("outside\n")
    paths = ["inside.txt", ".git/config", ".bob/x.txt", "../outside.txt", "link/.bashrc", str(tmp_path / "o2.txt"),
             "sub/.git/hooks/pre-commit"]
    bob, sid = scripted([{"replies": [tool("write_file", path=p, content="x\n") for p in paths]
                          + [tool("read_file", path="inside.txt"), tool("read_file", path="../outside.txt"),
                             {"text": "done"}]}], config={"permissions": {"mode": "allow-edits"}})
    asked = []
    bob.prompt(sid, "go", answer=lambda r: asked.append(r["params"]["toolCall"]["title"]) or allow(r))
    shown = {"link/.bashrc": f"link/.bashrc (a link to {tmp_path / 'home' / '.bashrc'})"}  # where it leads, said
    assert asked == [f"write_file: {shown.get(p, p)}" for p in paths[1:]] + ["read_file: ../outside.txt"]
    assert (workdir / "inside.txt").read_text() == "x\n"


# ---- 4. an "always" for an MCP tool never moves to another tool ---------------------------------------

def test_a_grant_stays_with_its_server_and_a_name_is_never_given_again(mcp_bob):
    servers = [stdio("a.b"), stdio("a_b")]  # both sanitise to mcp__a_b__…
    turns = [{"replies": [tool("mcp__a_b__echo", message="first"), tool("mcp__a_b__crash"),
                          tool("mcp__a_b__echo", message="again"), tool("mcp__a_b__echo_2", message="other"),
                          {"text": "done"}]}]
    bob, sid = mcp_bob(turns, servers)
    asked = []

    def answer(request):
        title = request["params"]["toolCall"]["title"]
        asked.append(title)
        return allow_always(request) if "echo" in title else allow(request)

    _, frames = bob.prompt(sid, "go", answer=answer)
    assert asked == ["a.b: echo", "a.b: crash", "a_b: echo"]  # the second server's echo asked
    results = [u["rawOutput"]["output"] for u in updates(frames, "tool_call_update") if "rawOutput" in u]
    assert results[2].startswith("error: unknown tool 'mcp__a_b__echo'")  # gone with its server, not rebound
    assert results[3] == "echo: other"


def test_tools_past_the_cap_are_left_out_with_one_line(mcp_bob, monkeypatch):
    monkeypatch.setenv("MCP_TEST_MANY_TOOLS", "150")
    server = stdio()
    server["env"] = [{"name": "MCP_TEST_MANY_TOOLS", "value": "150"}]
    bob, sid = mcp_bob([{"replies": [{"text": "done"}]}], [server])
    lines = [u["content"]["text"] for u in updates(bob.frames, "agent_message_chunk")]
    assert len(lines) == 1 and "limit of 128 tools in all were left out: test: many110," in lines[0]
    assert "and 30 more" in lines[0]  # 128 less the 7 names Bob keeps for its own tools


# ---- 5. HTTP servers are bounded and stay where they were configured ----------------------------------

@pytest.mark.parametrize("where", ["another host", "the same server"])
def test_a_redirect_is_not_followed(mcp_bob, http_mcp, where):
    """Not to another host (the headers, keys among them, would go there), nor to another path of
    the server's own (the URL the user configured is where messages go)."""
    base, record = http_mcp()
    path = "/redirect" if where == "another host" else "/redirect-here"
    server = {"type": "http", "name": "web", "url": base + path + "?token=hunter2-secret",
              "headers": [{"name": "X-Api-Key", "value": "key-value"}]}
    bob, sid = mcp_bob([{"replies": [{"text": "done"}]}], [server])
    line = message_text(bob.frames)
    assert "redirected (HTTP 307)" in line and "does not follow redirects" in line
    assert ("to http://127.0.0.2" in line) == (where == "another host")
    assert "hunter2-secret" not in json.dumps(bob.frames) + bob.stderr()
    posted = [json.loads(entry)["path"] for entry in record.read_text().splitlines() if '"path"' in entry]
    assert posted and all(p.startswith(path) for p in posted)  # nothing went where it pointed


@pytest.mark.parametrize("sse", [False, True])
def test_an_answer_past_the_cap_fails_the_call_not_the_turn(mcp_bob, http_mcp, sse):
    base, _ = http_mcp(*(["--sse"] if sse else []))
    server = {"type": "http", "name": "web", "url": base + "/huge", "headers": []}
    bob, sid = mcp_bob(calls(("mcp__web__echo", {"message": "x"})), [server], permissions={"mode": "allow-all"})
    started = time.monotonic()
    response, frames = bob.prompt(sid, "go")
    assert response["result"]["stopReason"] == "end_turn"
    failed = [u for u in updates(frames, "tool_call_update") if u.get("status") == "failed"]
    assert len(failed) == 1 and "exceeds 4 MiB" in failed[0]["rawOutput"]["output"]
    assert time.monotonic() - started < 10


def test_a_stdio_answer_over_the_frame_cap_fails_at_once(mcp_bob):
    bob, sid = mcp_bob(calls(("mcp__test__big", {"size": 5 << 20})), [stdio()], permissions={"mode": "allow-all"},
                       mcp={"timeout": 60})
    started = time.monotonic()
    response, frames = bob.prompt(sid, "go")
    failed = [u for u in updates(frames, "tool_call_update") if u.get("status") == "failed"]
    assert len(failed) == 1 and "exceeds the frame cap" in failed[0]["rawOutput"]["output"]
    assert time.monotonic() - started < 30  # not mcp.timeout (60 s)


def test_a_servers_stderr_is_logged_at_a_bounded_rate(mcp_bob):
    server = stdio()
    server["args"] += ["--noisy", "20000"]
    bob, sid = mcp_bob([{"replies": [{"text": "done"}]}], [server])
    bob.wait_stderr("noise 98")  # the hundredth line (after the server's "ready"): the window's last
    assert bob.stderr().count("[mcp] test: ") == 100


# ---- 6. no orphan, even for a process that escaped its group ----------------------------------------------

@pytest.mark.parametrize("how", ["close", "evict", "eof"])
def test_a_setsid_grandchild_of_a_bash_call_ends_with_its_session(scripted, how):
    # A command may leave a job running on purpose (the bg-jobs skill): it outlives the call,
    # and ends with the session that started it, or with Bob.
    mark = marker()
    config = {"permissions": {"mode": "allow-all"}, "sessions": {"enabled": True},
              "acp": {"sessionHistory": True}, "limits": {"maxSessions": 1, "sessionOverflow": "evict_oldest"}}
    bob, sid = scripted([{"replies": [bash(f"setsid sleep 300.{mark} & sleep 0.2; echo started"), {"text": "ok"}]}],
                        config=config)
    response, frames = bob.prompt(sid, "go")
    assert response["result"]["stopReason"] == "end_turn"
    assert wait_present(mark)  # the call is over; the job runs on
    if how == "close":
        bob.result("session/close", {"sessionId": sid})
    elif how == "evict":
        bob.new_session()
    else:
        bob.proc.sendeof()
        assert bob.wait(10) == 0
    assert wait_gone(mark, timeout=5) == []


def test_after_sigkill_nothing_bob_started_is_left(mcp_bob, scripted):
    mark = marker()
    turns = [{"replies": [tool("mcp__test__spawn", marker=mark), tool("mcp__test__escape", marker=mark),
                          bash(f"(setsid sleep 301.{mark} &) ; sleep 302.{mark}")]}]
    bob, sid = mcp_bob(turns, [stdio(mark=mark)], permissions={"mode": "allow-all"})
    bob.request_async("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "go"}]})
    wait_present(mark, count=5)  # the server, its child, its setsid child, the bash call's two
    bob.kill()
    assert wait_gone(mark, timeout=10) == []


def test_servers_of_a_refused_session_new_end(mcp_bob, spawn_bob):
    bob, sid = mcp_bob([{"replies": [{"text": "x"}]}], [stdio()], limits={"maxSessions": 2})
    marks = [marker(), marker()]
    # Two at once (sessions with servers open on workers): both pass the first check, one is seated.
    ids = [bob.request_async("session/new", {"cwd": bob.workdir, "mcpServers": [stdio(mark=m)]}) for m in marks]
    def answered():
        return {f["id"]: f for f in bob.frames if f.get("id") in ids and "method" not in f}

    while len(answered()) < 2:
        bob.read_frame()
    answers = [answered()[msg_id] for msg_id in ids]
    refused = [m for m, a in zip(marks, answers, strict=True) if "error" in a]
    assert len(refused) == 1 and [a["error"]["code"] for a in answers if "error" in a] == [-32602]
    assert wait_gone(refused[0], timeout=5) == []
    kept = [m for m in marks if m not in refused]
    assert wait_present(kept[0])


@pytest.mark.parametrize("how", ["eof", "sigterm"])
def test_a_server_in_its_handshake_ends_with_bob(spawn_bob, tmp_path, how):
    mark = marker()
    path = tmp_path / "script.yaml"
    path.write_text(yaml.safe_dump({"turns": []}))
    bob = spawn_bob({"model": {"provider": "script", "script": str(path)}, "mcp": {"enabled": True, "timeout": 60}})
    bob.initialize()
    bob.request_async("session/new", {"cwd": bob.workdir, "mcpServers": [stdio("slow", "--no-answer", mark=mark)]})
    wait_present(mark)
    if how == "eof":
        bob.proc.sendeof()
    else:
        os.kill(bob.pid, signal.SIGTERM)
    assert bob.wait(10) == 0
    assert wait_gone(mark, timeout=5) == []


# ---- 7. the key stays out of what tools print ---------------------------------------------------------------

def test_bobs_own_environment_and_known_secrets_never_reach_a_tool_result(spawn_bob, server, workdir):
    (workdir / "leak.txt").write_text(f"the key is {KEY}\n")
    server.enqueue(server.openai_tool_call("bash", {"command": "tr '\\0' '\\n' < /proc/$PPID/environ"}, call_id="a"),
                   server.openai_tool_call("bash", {"command": "cat leak.txt"}, call_id="b"),
                   server.openai_text("done"))
    bob = spawn_bob({"model": {"baseUrl": server.url + "/v1", "retries": 0}, "sessions": {"enabled": True}},
                    env={"OPENAI_API_KEY": KEY, "BOB_TEST_MARK": "visible-marker"})
    bob.initialize()
    sid = bob.new_session()
    response, frames = bob.prompt(sid, "go", answer=allow)
    outputs = [u["rawOutput"]["output"] for u in updates(frames, "tool_call_update") if "rawOutput" in u]
    assert "BOB_TEST_MARK=visible-marker" in outputs[0]  # Bob's environment was read, less the key
    assert "OPENAI_API_KEY" not in outputs[0]
    assert outputs[1].startswith("the key is [redacted]")
    everything = json.dumps(bob.frames) + json.dumps([r["body"] for r in server.requests]) + bob.stderr()
    everything += (workdir / ".bob" / "sessions" / f"{sid}.json").read_text()
    assert KEY not in everything


# ---- 9. project skills stay inside the project ----------------------------------------------------------------

def test_a_project_skill_linking_outside_the_project_is_not_read(scripted, workdir, tmp_path):
    private = tmp_path / "private.md"
    private.write_text("---\nname: notes\ndescription: private notes\n---\nTHE PRIVATE TEXT\n")
    folder = workdir / ".bob" / "skills" / "notes"
    folder.mkdir(parents=True)
    (folder / "SKILL.md").symlink_to(private)
    bob, sid = scripted([{"replies": [tool("read_skill", name="notes"), {"text": "done"}]}])
    response, frames = bob.prompt(sid, "go")
    output = [u["rawOutput"]["output"] for u in updates(frames, "tool_call_update") if "rawOutput" in u][0]
    assert "THE PRIVATE TEXT" not in output and "no skill named 'notes'" in output
    bob.wait_stderr("links outside the project")


def test_a_question_about_a_file_behind_a_link_names_where_the_link_leads(scripted, workdir, tmp_path):
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "profile").write_text("export PATH=/usr/bin\n")
    (workdir / "notes.txt").symlink_to(outside / "profile")
    (workdir / "plain.txt").write_text("plain\n")
    turns = [{"replies": [{"tool_calls": [{"name": "write_file", "arguments": {"path": "notes.txt", "content": "x\n"}}]},
                          {"tool_calls": [{"name": "write_file", "arguments": {"path": "plain.txt", "content": "y\n"}}]},
                          {"text": "done"}]}]
    bob, sid = scripted(turns)
    asked = []
    bob.prompt(sid, "go", answer=lambda request: asked.append(request["params"]["toolCall"]["title"]) or {
        "outcome": {"outcome": "selected", "optionId": "reject"}})
    assert asked == [f"write_file: notes.txt (a link to {outside / 'profile'})", "write_file: plain.txt"]
    assert (outside / "profile").read_text() == "export PATH=/usr/bin\n"
