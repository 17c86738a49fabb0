"""Undo a turn (tools.checkpoints): /undo takes back every change of the last turn that changed
files (write_file, edit_file and what bash did), and that turn's messages; /redo puts them
back; nothing else is touched. End to end, against the fake OpenAI-compatible server, whose
recorded requests show what the model is sent."""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest
from bob_client import Bob, allow, message_text, updates

KEY = "sk-undo-test-0123456789"
CHECKPOINTS = {"tools": {"checkpoints": True}, "sessions": {"enabled": True}, "permissions": {"mode": "allow-all"}}

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="checkpoints need git")


@pytest.fixture(autouse=True)
def test_log_left_out(workdir):
    """The tests' client keeps Bob's stderr in the project (bob-stderr.log): a file another
    program writes while a turn runs, which a checkpoint would count as the turn's."""
    (workdir / ".gitignore").write_text("bob-stderr.log\n")


def turn_of_three_changes(server):
    """A turn that writes one file, edits another and deletes a third through bash (and makes a
    file in an ignored folder, and an executable script)."""
    server.enqueue(
        server.openai_tool_call("write_file", {"path": "new.txt", "content": "made by the turn\n"}, call_id="c1"),
        server.openai_tool_call("edit_file", {"path": "edit.txt", "old_string": "before", "new_string": "after"},
                                call_id="c2"),
        server.openai_tool_call("bash", {"command": "rm gone.txt && echo x > node_modules/dep/added.js && "
                                                    "printf '#!/bin/sh\\n' > run.sh && chmod +x run.sh && "
                                                    "mkdir -p deep/er && echo y > deep/er/file.txt"}, call_id="c3"),
        server.openai_text("all three done"))


def project(workdir):
    (workdir / "edit.txt").write_bytes(b"line one\r\nbefore\r\n")  # (CRLF: restored byte for byte)
    (workdir / "gone.txt").write_bytes(b"\x00binary\xff")
    with open(workdir / ".gitignore", "a") as handle:
        handle.write("node_modules/\n")
    (workdir / "node_modules" / "dep").mkdir(parents=True)
    (workdir / "node_modules" / "dep" / "index.js").write_text("module.exports = 1\n")


def start(spawn_bob, server, config=None, **kw):
    bob = spawn_bob({"model": {"baseUrl": server.url + "/v1", "retries": 0}, **CHECKPOINTS, **(config or {})},
                    env={"OPENAI_API_KEY": KEY}, **kw)
    bob.initialize()
    return bob


def opened(bob) -> str:
    """A new session, once the first look at its project is made (a call before it is not
    recorded: a turn never waits for it)."""
    sid = bob.new_session()
    bob.wait_stderr(f"session {sid}: checkpoints: first look at", timeout=30)
    return sid


def users_sent(server) -> list[str]:
    """The user messages of the last request the model got."""
    return [m["content"] if isinstance(m["content"], str) else m["content"][0]["text"]
            for m in server.requests[-1]["body"]["messages"] if m["role"] == "user"]


def test_undo_takes_back_a_turns_writes_edits_and_deletions_and_its_messages_and_redo_puts_them_back(
        spawn_bob, server, workdir):
    project(workdir)
    bob = start(spawn_bob, server)
    sid = opened(bob)
    commands = [c["name"] for c in updates(bob.frames, "available_commands_update")[-1]["availableCommands"]]
    assert commands[:4] == ["new", "compact", "undo", "redo"]
    server.enqueue(server.openai_text("hello"))
    bob.prompt(sid, "say hello")  # a turn that changes nothing: no checkpoint
    turn_of_three_changes(server)
    response, _ = bob.prompt(sid, "make the three changes")
    assert response["result"]["stopReason"] == "end_turn"
    assert (workdir / "new.txt").exists() and not (workdir / "gone.txt").exists()
    assert (workdir / "edit.txt").read_bytes() == b"line one\r\nafter\r\n"

    _, frames = bob.prompt(sid, "/undo")
    said = message_text(frames)
    assert said.startswith("↩️ Undid the turn “make the three changes”"), said
    assert "Restored: edit.txt, gone.txt." in said and "new.txt" in said and "run.sh" in said
    assert not (workdir / "new.txt").exists() and not (workdir / "run.sh").exists() and not (workdir / "deep").exists()
    assert (workdir / "edit.txt").read_bytes() == b"line one\r\nbefore\r\n"
    assert (workdir / "gone.txt").read_bytes() == b"\x00binary\xff"
    assert (workdir / "node_modules" / "dep" / "added.js").exists()  # ignored: neither recorded nor removed
    server.enqueue(server.openai_text("ok"))
    bob.prompt(sid, "what now?")
    assert users_sent(server) == ["say hello", "what now?"]  # the undone turn is not sent any more

    server.enqueue(server.openai_text("fine"))
    bob.prompt(sid, "/undo")  # a second /undo walks back further: no earlier turn changed files
    # After a new turn, /redo still puts the files back (no byte /undo replaced is lost), not the
    # messages: the conversation went on without that turn.
    said = message_text(bob.prompt(sid, "/redo")[1])
    assert said.startswith("↪️ Put back the files of the turn “make the three changes”"), said
    assert (workdir / "new.txt").exists() and (workdir / "edit.txt").read_bytes() == b"line one\r\nafter\r\n"
    server.enqueue(server.openai_text("fine"))
    bob.prompt(sid, "and then?")
    assert users_sent(server) == ["say hello", "what now?", "and then?"]


def test_redo_puts_back_what_undo_took_and_a_file_changed_since_is_left_and_named(spawn_bob, server, workdir):
    project(workdir)
    bob = start(spawn_bob, server)
    sid = opened(bob)
    turn_of_three_changes(server)
    bob.prompt(sid, "make the three changes")
    (workdir / "new.txt").write_text("the user's own words\n")  # changed after the turn
    _, frames = bob.prompt(sid, "/undo")
    said = message_text(frames)
    assert "Left as they are, changed since that turn: new.txt." in said
    assert (workdir / "new.txt").read_text() == "the user's own words\n"
    assert (workdir / "edit.txt").read_bytes() == b"line one\r\nbefore\r\n"
    (workdir / "new.txt").unlink()
    _, frames = bob.prompt(sid, "/redo")
    assert message_text(frames).startswith("↪️ Redid the turn “make the three changes”")
    assert (workdir / "edit.txt").read_bytes() == b"line one\r\nafter\r\n" and not (workdir / "gone.txt").exists()
    assert (workdir / "new.txt").read_text() == "made by the turn\n"
    assert os.access(workdir / "run.sh", os.X_OK)  # its mode too
    server.enqueue(server.openai_text("ok"))
    bob.prompt(sid, "and now?")
    assert users_sent(server) == ["make the three changes", "and now?"]


def test_undo_works_in_a_new_bob_on_a_loaded_session_and_a_planted_record_is_never_used(
        spawn_bob, server, workdir, tmp_path, bob_env):
    project(workdir)
    bob = start(spawn_bob, server)
    sid = opened(bob)
    turn_of_three_changes(server)
    bob.prompt(sid, "make the three changes")
    assert bob.close() == 0
    saved = workdir / ".bob" / "sessions" / f"{sid}.json"
    document = json.loads(saved.read_text())
    assert len(document["checkpoints"]) == 1 and "mac" in document["checkpoints"][0]

    again = start(spawn_bob, server)
    again.result("session/load", {"sessionId": sid, "cwd": str(workdir), "mcpServers": []})
    _, frames = again.prompt(sid, "/undo")
    assert message_text(frames).startswith("↩️ Undid the turn “make the three changes”")
    assert (workdir / "gone.txt").read_bytes() == b"\x00binary\xff"
    assert again.close() == 0

    # A record someone else wrote (a cloned repository's .bob, a hand edit): never used to write files.
    document = json.loads(saved.read_text())
    record = document["checkpoints"][0]
    record["undone"] = False
    saved.write_text(json.dumps(document))
    third = start(spawn_bob, server)
    third.result("session/load", {"sessionId": sid, "cwd": str(workdir), "mcpServers": []})
    third.wait_stderr("checkpoint record(s) of its file left out")
    _, frames = third.prompt(sid, "/redo")
    assert message_text(frames).startswith("↪️ Nothing to redo")
    assert (workdir / "gone.txt").exists()


def test_nothing_but_the_turns_own_files_is_touched_and_the_users_git_is_left_alone(spawn_bob, server, workdir):
    project(workdir)
    subprocess.run(["git", "init", "-q"], cwd=workdir, check=True)
    subprocess.run(["git", "-c", "user.email=a@b", "-c", "user.name=a", "add", "edit.txt"], cwd=workdir, check=True)
    before = {p: (workdir / ".git" / p).read_bytes() for p in ("index", "HEAD")}
    bob = start(spawn_bob, server)
    sid = opened(bob)
    turn_of_three_changes(server)
    bob.prompt(sid, "make the three changes")
    (workdir / "mine.txt").write_text("the user's, made after the turn\n")
    bob.prompt(sid, "/undo")
    assert (workdir / "mine.txt").read_text() == "the user's, made after the turn\n"
    assert {p: (workdir / ".git" / p).read_bytes() for p in ("index", "HEAD")} == before
    status = subprocess.run(["git", "status", "--porcelain"], cwd=workdir, capture_output=True, text=True).stdout
    assert ".bob" not in status  # (Bob's own state stays out of the user's git)
    assert not list((workdir / ".bob" / "checkpoints").glob("*.git/hooks"))  # (made without a template: no hooks)


def test_a_file_over_the_size_limit_is_not_recorded_and_undo_says_so(spawn_bob, server, workdir):
    (workdir / "small.txt").write_text("small\n")
    server.enqueue(server.openai_tool_call("bash", {"command": "head -c 4096 /dev/zero > big.bin && echo more >> "
                                                               "small.txt"}, call_id="b1"),
                   server.openai_text("made"))
    bob = start(spawn_bob, server, {"tools": {"checkpoints": True, "checkpointMaxBytes": 1024}})
    sid = opened(bob)
    _, frames = bob.prompt(sid, "make a big file")
    assert "Not recorded, so /undo will not take it back: big.bin (larger than tools.checkpointMaxBytes)" in \
        message_text(frames)  # (said at the time of the turn, not only at /undo)
    _, frames = bob.prompt(sid, "/undo")
    said = message_text(frames)
    assert "Restored: small.txt." in said and "Not recorded, so not taken back: big.bin" in said
    assert (workdir / "big.bin").stat().st_size == 4096 and (workdir / "small.txt").read_text() == "small\n"


def test_without_checkpoints_undo_is_a_prompt_as_in_the_default_profile(spawn_bob, server, workdir):
    server.enqueue(server.openai_text("what should I undo?"))
    bob = spawn_bob({"model": {"baseUrl": server.url + "/v1", "retries": 0}}, env={"OPENAI_API_KEY": KEY})
    bob.initialize()
    sid = bob.new_session()
    commands = [c["name"] for c in updates(bob.frames, "available_commands_update")[-1]["availableCommands"]]
    assert "undo" not in commands and "redo" not in commands
    _, frames = bob.prompt(sid, "/undo")
    assert message_text(frames) == "what should I undo?" and users_sent(server) == ["/undo"]
    assert not (workdir / ".bob" / "checkpoints").exists()


def bob_without_git(spawn_bob, server, tmp_path):
    """A Bob with checkpoints on whose PATH has no git (a shell and Python only), initialized."""
    bin_dir = tmp_path / "bin-without-git"
    bin_dir.mkdir()
    for tool in ("sh", "bash", "env", "python3"):
        found = shutil.which(tool)
        if found:
            (bin_dir / tool).symlink_to(found)
    bob = spawn_bob({"model": {"baseUrl": server.url + "/v1"}, **CHECKPOINTS},
                    env={"OPENAI_API_KEY": KEY, "PATH": str(bin_dir)})
    bob.initialize()
    return bob


def test_without_git_the_session_says_so_once_and_offers_no_undo(spawn_bob, server, workdir, tmp_path):
    bob = bob_without_git(spawn_bob, server, tmp_path)
    bob.call("session/new", {"cwd": str(workdir), "mcpServers": []})
    while not updates(bob.frames, "agent_message_chunk"):
        bob.read_frame()
    (line,) = updates(bob.frames, "agent_message_chunk")
    assert "need git, which is not installed here" in line["content"]["text"]
    commands = [c["name"] for c in updates(bob.frames, "available_commands_update")[-1]["availableCommands"]]
    assert "undo" not in commands


def test_restored_files_go_through_the_editor_when_it_writes_them(tmp_path, bob_env, workdir, server):
    project(workdir)
    (tmp_path / "config.yaml").write_text(json.dumps({"model": {"baseUrl": server.url + "/v1", "retries": 0},
                                                      **CHECKPOINTS, "tools": {"checkpoints": True, "clientFs": True}}))
    turn_of_three_changes(server)
    with Bob(str(workdir), {**bob_env, "OPENAI_API_KEY": KEY}) as bob:
        bob.initialize({"fs": {"readTextFile": True, "writeTextFile": True}})
        sid = opened(bob)
        written = []

        def editor(request):
            method = request["method"]
            if method == "fs/read_text_file":
                return {"content": open(request["params"]["path"], encoding="utf-8").read()}
            if method == "fs/write_text_file":
                written.append(request["params"]["path"])
                with open(request["params"]["path"], "w", encoding="utf-8", newline="") as handle:
                    handle.write(request["params"]["content"])
                return {}
            raise AssertionError(f"not asked of this editor: {method}")

        bob.prompt(sid, "make the three changes", answer=allow, editor=editor)
        written.clear()
        bob.prompt(sid, "/undo", answer=allow, editor=editor)
        assert written == [str(workdir / "edit.txt")]  # open buffers follow; what the turn removed comes back on disk
        assert (workdir / "edit.txt").read_bytes() == b"line one\r\nbefore\r\n"
        assert (workdir / "gone.txt").read_bytes() == b"\x00binary\xff"


def test_only_the_last_turns_are_kept_and_a_deleted_sessions_trees_go_with_it(spawn_bob, server, workdir):
    bob = start(spawn_bob, server, {"tools": {"checkpoints": True, "checkpointTurns": 2},
                                    "acp": {"sessionHistory": True}})
    sid = opened(bob)
    for n in range(3):
        server.enqueue(server.openai_tool_call("write_file", {"path": f"f{n}.txt", "content": f"{n}\n"},
                                               call_id=f"w{n}"), server.openai_text(f"wrote {n}"))
        bob.prompt(sid, f"write {n}")

    def refs():
        found = []
        for shadow in (workdir / ".bob" / "checkpoints").glob("*.git"):
            out = subprocess.run(["git", "--git-dir", str(shadow), "for-each-ref", "--format=%(refname)"],
                                 capture_output=True, text=True, check=True).stdout
            found += out.split()
        return found

    # the records of the last two turns (and the ref that holds the session's last look at the files)
    assert len({ref.split("/")[3] for ref in refs() if ref.startswith("refs/bob/")}) == 2
    assert message_text(bob.prompt(sid, "/undo")[1]).startswith("↩️ Undid the turn “write 2”")
    assert message_text(bob.prompt(sid, "/undo")[1]).startswith("↩️ Undid the turn “write 1”")
    assert message_text(bob.prompt(sid, "/undo")[1]).startswith("↩️ Nothing to undo")  # "write 0": not kept
    assert (workdir / "f0.txt").exists() and not (workdir / "f1.txt").exists()
    assert bob.result("session/delete", {"sessionId": sid, "cwd": str(workdir)}) == {}
    assert refs() == ["refs/look/store"]  # (the store's last look, any session's next first look starts from)


def test_a_shadow_repository_planted_in_the_project_runs_nothing(spawn_bob, server, workdir, tmp_path):
    """A cloned project can bring .bob/checkpoints/<id>.git along: its config (fsmonitor, hooks,
    filters), replace refs or alternates must never run code or change what is recorded."""
    import hashlib

    marker = tmp_path / "PWNED"
    planted = workdir / ".bob" / "checkpoints" / (hashlib.sha256(str(workdir).encode()).hexdigest()[:16] + ".git")
    subprocess.run(["git", "init", "-q", "--bare", str(planted)], check=True)
    (planted / "config").write_text(f"[core]\n\tfsmonitor = touch {marker}\n\thooksPath = hooks\n"
                                    f"[filter \"x\"]\n\tclean = touch {marker}\n")
    (planted / "info").mkdir(exist_ok=True)
    (planted / "info" / "attributes").write_text("* filter=x\n")
    (planted / "hooks").mkdir(exist_ok=True)
    for hook in ("pre-commit", "post-index-change", "reference-transaction"):
        (planted / "hooks" / hook).write_text(f"#!/bin/sh\ntouch {marker}\n")
        (planted / "hooks" / hook).chmod(0o755)
    elsewhere = tmp_path / "elsewhere.git"
    subprocess.run(["git", "init", "-q", "--bare", str(elsewhere)], check=True)
    (planted / "objects" / "info" / "alternates").write_text(str(elsewhere / "objects") + "\n")
    (workdir / "a.txt").write_text("one\n")
    server.enqueue(server.openai_tool_call("edit_file", {"path": "a.txt", "old_string": "one", "new_string": "two"},
                                           call_id="e1"), server.openai_text("edited"))
    bob = start(spawn_bob, server)
    sid = opened(bob)
    bob.prompt(sid, "edit it")
    _, frames = bob.prompt(sid, "/undo")
    assert (workdir / "a.txt").read_text() == "one\n" and "Restored: a.txt." in message_text(frames)
    assert not marker.exists()
    assert not (planted / "objects" / "info" / "alternates").exists()


def test_a_git_repository_inside_the_project_is_named_not_taken_back(spawn_bob, server, workdir):
    (workdir / "vendor").mkdir()
    subprocess.run(["git", "init", "-q"], cwd=workdir / "vendor", check=True)
    (workdir / "top.txt").write_text("top\n")
    server.enqueue(server.openai_tool_call("bash", {"command": "echo more >> top.txt && cd vendor && echo a > a && "
                                                               "git add a && git -c user.email=a@b -c user.name=a "
                                                               "commit -qm one"}, call_id="n1"),
                   server.openai_text("done"))
    bob = start(spawn_bob, server)
    sid = opened(bob)
    bob.prompt(sid, "commit in vendor")
    said = message_text(bob.prompt(sid, "/undo")[1])
    assert "Restored: top.txt." in said and "vendor (a git repository inside" in said
    assert (workdir / "top.txt").read_text() == "top\n" and (workdir / "vendor" / "a").exists()
