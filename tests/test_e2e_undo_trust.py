"""/undo a user can trust with their work: only Bob's own changes are taken back (a window per
call, not per turn), exactly (every mode bit, files and folders both ways, links, empty folders),
journaled (a failure or a kill leaves it retryable, the conversation untrimmed), through the
editor's buffers, from a private store; the session stays listed. End to end against the real
bob-acp and the fake model server."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import time

import pytest
from bob_client import Bob, allow, message_text, updates
from test_e2e_undo import CHECKPOINTS, KEY, bob_without_git, opened, start, users_sent

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="checkpoints need git")


@pytest.fixture(autouse=True)
def test_log_left_out(workdir):
    (workdir / ".gitignore").write_text("bob-stderr.log\n")


def test_what_the_user_saves_while_the_model_answers_survives_undo(spawn_bob, server, workdir):
    """The rule: Bob writes a.txt and runs a command; while the model is still answering after
    them, the user saves b.txt and creates c.txt: both are kept by /undo, and named."""
    (workdir / "a.txt").write_text("original a\n")
    (workdir / "b.txt").write_text("original b\n")

    def the_user_works():
        (workdir / "b.txt").write_text("the user's own save\n")
        (workdir / "c.txt").write_text("a file the user made\n")
        (workdir / "made.txt").write_text("made by the command, then by the user\n")

    server.enqueue(server.openai_tool_call("write_file", {"path": "a.txt", "content": "bob's a\n"}, call_id="w1"),
                   server.openai_tool_call("bash", {"command": "echo by-bob > made.txt"}, call_id="b1"))
    reply = server.openai_text("done")
    reply.on_request = the_user_works
    server.enqueue(reply)
    bob = start(spawn_bob, server)
    sid = opened(bob)
    bob.prompt(sid, "change a")
    said = message_text(bob.prompt(sid, "/undo")[1])
    assert "Restored: a.txt." in said, said
    assert "Left as they are, changed since that turn: made.txt." in said
    assert (workdir / "a.txt").read_text() == "original a\n"
    assert (workdir / "b.txt").read_text() == "the user's own save\n"
    assert (workdir / "c.txt").read_text() == "a file the user made\n"
    assert (workdir / "made.txt").read_text() == "made by the command, then by the user\n"
    assert "b.txt" not in said and "c.txt" not in said  # (never the turn's: nothing to say of them)


def test_a_change_between_bobs_calls_is_kept_and_only_bobs_part_after_it_is_undone(spawn_bob, server, workdir):
    (workdir / "a.txt").write_text("one\n")

    def the_user_edits():
        (workdir / "a.txt").write_text("one\nthe user's line\n")

    server.enqueue(server.openai_tool_call("write_file", {"path": "a.txt", "content": "one\nbob\n"}, call_id="w1"))
    second = server.openai_tool_call("edit_file", {"path": "a.txt", "old_string": "one", "new_string": "ONE"},
                                     call_id="e1")
    second.on_request = the_user_edits
    server.enqueue(second, server.openai_text("done"))
    bob = start(spawn_bob, server)
    sid = opened(bob)
    bob.prompt(sid, "edit a twice")
    assert (workdir / "a.txt").read_text() == "ONE\nthe user's line\n"
    said = message_text(bob.prompt(sid, "/undo")[1])
    assert (workdir / "a.txt").read_text() == "one\nthe user's line\n"  # the user's version, not the first one
    assert "Changed by someone else between Bob's calls" in said and "a.txt" in said


def test_undo_is_exact_modes_files_and_folders_both_ways_empty_folders_links_and_ignored_writes(
        spawn_bob, server, workdir):
    (workdir / "secret").write_text("token\n")
    (workdir / "secret").chmod(0o600)
    (workdir / "shared.txt").write_text("group\n")
    (workdir / "shared.txt").chmod(0o664)
    (workdir / "f").write_text("a file that becomes a folder\n")
    (workdir / "d").mkdir()
    (workdir / "d" / "inner.txt").write_text("in a folder that becomes a file\n")
    (workdir / "emptyold").mkdir()
    (workdir / "target-one").write_text("1\n")
    (workdir / "target-two").write_text("2\n")
    os.symlink("target-one", workdir / "link")
    (workdir / "bin.dat").write_bytes(bytes(range(256)))
    with open(workdir / ".gitignore", "a") as handle:
        handle.write(".env\n")
    (workdir / ".env").write_text("KEY=old\n")
    command = ("rm secret && chmod 700 shared.txt && rm f && mkdir f && echo x > f/new && rm -r d && echo y > d && "
               "mkdir emptynew && rmdir emptyold && ln -sfn target-two link && printf '\\377' >> bin.dat")
    server.enqueue(server.openai_tool_call("bash", {"command": command}, call_id="b1"),
                   server.openai_tool_call("write_file", {"path": ".env", "content": "KEY=new\n"}, call_id="w1"),
                   server.openai_text("done"))
    bob = start(spawn_bob, server)
    sid = opened(bob)
    bob.prompt(sid, "change everything")
    assert (workdir / "f" / "new").exists() and (workdir / "d").is_file()
    said = message_text(bob.prompt(sid, "/undo")[1])
    assert "Could not" not in said and "Left as they are" not in said, said
    assert (workdir / "secret").read_text() == "token\n" and stat.S_IMODE((workdir / "secret").stat().st_mode) == 0o600
    assert stat.S_IMODE((workdir / "shared.txt").stat().st_mode) == 0o664
    assert (workdir / "f").read_text() == "a file that becomes a folder\n"
    assert (workdir / "d" / "inner.txt").read_text() == "in a folder that becomes a file\n"
    assert (workdir / "emptyold").is_dir() and not (workdir / "emptynew").exists()
    assert os.readlink(workdir / "link") == "target-one"
    assert (workdir / "bin.dat").read_bytes() == bytes(range(256))
    assert (workdir / ".env").read_text() == "KEY=old\n"  # ignored, but written by Bob's own tool: recorded
    said = message_text(bob.prompt(sid, "/redo")[1])
    assert not (workdir / "secret").exists() and (workdir / "d").read_text() == "y\n"
    assert stat.S_IMODE((workdir / "shared.txt").stat().st_mode) == 0o700
    assert (workdir / ".env").read_text() == "KEY=new\n"


def test_undo_never_acts_through_a_folder_swapped_for_a_link(spawn_bob, server, workdir, tmp_path):
    """A folder the turn wrote in is swapped for a link to a place outside after the turn (as a
    background job could): /undo touches nothing there, and says so."""
    outside = tmp_path / "outside"
    (outside / "hooks").mkdir(parents=True)
    (workdir / "sub").mkdir()
    server.enqueue(server.openai_tool_call("bash", {"command": "echo made > sub/new.txt && echo made > sub/pre-commit"},
                                           call_id="b1"), server.openai_text("done"))
    bob = start(spawn_bob, server)
    sid = opened(bob)
    bob.prompt(sid, "make files in sub")
    shutil.rmtree(workdir / "sub")
    (outside / "hooks" / "new.txt").write_text("made\n")  # the same bytes the turn wrote
    os.symlink(outside / "hooks", workdir / "sub")
    said = message_text(bob.prompt(sid, "/undo")[1])
    assert (outside / "hooks" / "new.txt").read_text() == "made\n"  # never removed through the link
    assert not (outside / "hooks" / "pre-commit").exists()
    assert "Left as they are" in said and "sub/new.txt" in said


def a_turn_writing_two_files_through_the_editor(tmp_path, workdir, server, more=None):
    """a.txt and b.txt, a config with the editor's files, and a turn that writes both."""
    (workdir / "a.txt").write_text("a before\n")
    (workdir / "b.txt").write_text("b before\n")
    (tmp_path / "config.yaml").write_text(json.dumps({"model": {"baseUrl": server.url + "/v1", "retries": 0},
                                                      **CHECKPOINTS, "tools": {"checkpoints": True, "clientFs": True},
                                                      **(more or {})}))
    server.enqueue(server.openai_tool_call("write_file", {"path": "a.txt", "content": "a by bob\n"}, call_id="w1"),
                   server.openai_tool_call("write_file", {"path": "b.txt", "content": "b by bob\n"}, call_id="w2"),
                   server.openai_text("done"))


def test_an_editor_buffer_with_other_text_is_left_and_open_buffers_follow(tmp_path, bob_env, workdir, server):
    a_turn_writing_two_files_through_the_editor(tmp_path, workdir, server)
    buffers: dict[str, str] = {}
    written = []

    def editor(request):
        path = request["params"]["path"]
        if request["method"] == "fs/read_text_file":
            return {"content": buffers.get(path) or open(path, encoding="utf-8").read()}
        if request["method"] == "fs/write_text_file":
            written.append(path)
            buffers.pop(path, None)
            with open(path, "w", encoding="utf-8") as handle:
                handle.write(request["params"]["content"])
            return {}
        raise AssertionError(request["method"])

    with Bob(str(workdir), {**bob_env, "OPENAI_API_KEY": KEY}) as bob:
        bob.initialize({"fs": {"readTextFile": True, "writeTextFile": True}})
        sid = opened(bob)
        bob.prompt(sid, "write both", answer=allow, editor=editor)
        buffers[str(workdir / "b.txt")] = "b by bob\nunsaved words the user typed\n"
        written.clear()
        said = message_text(bob.prompt(sid, "/undo", answer=allow, editor=editor)[1])
        assert written == [str(workdir / "a.txt")]  # through the editor: its open buffer follows
        assert (workdir / "a.txt").read_text() == "a before\n"
        assert (workdir / "b.txt").read_text() == "b by bob\n"  # its unsaved buffer is never overwritten
        assert "open in the editor with other text" in said and "b.txt" in said
        # The turn stays (taken out, "again" would find nothing): once the buffer is closed, /undo finishes it.
        assert "The turn stays" in said and "then /undo again" in said, said
        buffers.clear()
        said = message_text(bob.prompt(sid, "/undo", answer=allow, editor=editor)[1])
        assert said.startswith("↩️ Undid the turn “write both”"), said
        assert (workdir / "b.txt").read_text() == "b before\n"


def test_a_failed_undo_is_retryable_and_keeps_the_conversation(tmp_path, bob_env, workdir, server):
    a_turn_writing_two_files_through_the_editor(tmp_path, workdir, server)
    refuse: set[str] = set()

    def editor(request):
        path = request["params"]["path"]
        if request["method"] == "fs/read_text_file":
            return {"content": open(path, encoding="utf-8").read()}
        if os.path.basename(path) in refuse:
            return {"__error__": {"code": -32000, "message": "the disk is full"}}
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(request["params"]["content"])
        return {}

    with Bob(str(workdir), {**bob_env, "OPENAI_API_KEY": KEY}) as bob:
        bob.initialize({"fs": {"readTextFile": True, "writeTextFile": True}})
        sid = opened(bob)
        bob.prompt(sid, "write both", answer=allow, editor=editor)
        refuse.add("b.txt")
        said = message_text(bob.prompt(sid, "/undo", answer=allow, editor=editor)[1])
        assert said.startswith("↩️ /undo did not finish"), said
        assert said.startswith("↩️ /undo did not finish") and "b.txt" in said and "Nothing of the conversation" in said
        assert (workdir / "a.txt").read_text() == "a before\n" and (workdir / "b.txt").read_text() == "b by bob\n"
        server.enqueue(server.openai_text("still here"))
        bob.prompt(sid, "do you remember?", answer=allow, editor=editor)
        assert users_sent(server) == ["write both", "do you remember?"]  # the conversation was not trimmed
        refuse.clear()
        said = message_text(bob.prompt(sid, "/undo", answer=allow, editor=editor)[1])
        assert said.startswith("↩️ Undid the turn “write both”"), said
        assert "changed since" not in said  # (a.txt, put back by the first try, is no one's change)
        assert (workdir / "b.txt").read_text() == "b before\n"


def test_a_bob_killed_during_undo_says_so_at_load_and_the_next_undo_finishes(tmp_path, bob_env, workdir, server):
    a_turn_writing_two_files_through_the_editor(tmp_path, workdir, server, {"acp": {"sessionHistory": True}})

    def editor(request):
        path = request["params"]["path"]
        if request["method"] == "fs/write_text_file":
            with open(path, "w", encoding="utf-8") as handle:
                handle.write(request["params"]["content"])
            return {}
        return {"content": open(path, encoding="utf-8").read()}

    env = {**bob_env, "OPENAI_API_KEY": KEY}
    with Bob(str(workdir), env) as bob:
        bob.initialize({"fs": {"readTextFile": True, "writeTextFile": True}})
        sid = opened(bob)
        bob.prompt(sid, "write both", answer=allow, editor=editor)
        bob.request_async("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "/undo"}]})
        while True:  # the editor is asked to write a file: Bob is in the middle of the restore
            frame = bob.read_frame()
            if frame.get("method") == "fs/write_text_file":
                break
            if frame.get("method") == "fs/read_text_file":
                bob.send({"jsonrpc": "2.0", "id": frame["id"], "result": editor(frame)})
        bob.kill()
    with Bob(str(workdir), env) as bob:
        bob.initialize()
        # Another session in the folder is told too, until the restore is finished.
        _, frames = bob.call("session/new", {"cwd": str(workdir), "mcpServers": []})
        _, more = bob.call("_bob/nothing", {})
        assert f"An /undo of session {sid} in this folder did not finish" in message_text(frames + more)
        bob.result("session/load", {"sessionId": sid, "cwd": str(workdir), "mcpServers": []})
        told = " ".join(message_text([f]) for f in bob.frames) + json.dumps(updates(bob.frames, "agent_message_chunk"))
        assert "An /undo of this session did not finish" in told
        said = message_text(bob.prompt(sid, "/undo")[1])
        assert said.startswith("↩️ Undid the turn “write both”") and "changed since" not in said, said
        assert (workdir / "a.txt").read_text() == "a before\n" and (workdir / "b.txt").read_text() == "b before\n"
        _, frames = bob.call("session/new", {"cwd": str(workdir), "mcpServers": []})
        _, more = bob.call("_bob/nothing", {})
        assert "did not finish" not in message_text(frames + more)


def test_what_is_planted_in_the_store_runs_nothing_and_the_next_turn_is_recorded(spawn_bob, server, workdir):
    """The store keeps no index (Bob looks at the files itself): a garbage index, a filter in its
    config and attributes, a hook, left there by hand or by an older Bob, run nothing."""
    (workdir / "a.txt").write_text("one\n")
    bob = start(spawn_bob, server)
    sid = opened(bob)
    server.enqueue(server.openai_tool_call("bash", {"command": "echo two > a.txt"}, call_id="b1"),
                   server.openai_text("done"))
    bob.prompt(sid, "first")
    ran = workdir.parent / "planted-ran"
    for shadow in (workdir / ".bob" / "checkpoints").glob("*.git"):
        (shadow / "index").write_bytes(b"garbage, not an index")
        (shadow / "info").mkdir(exist_ok=True)
        (shadow / "info" / "attributes").write_text("* filter=x diff=x\n")
        with open(shadow / "config", "a") as handle:
            handle.write(f"[filter \"x\"]\n\tclean = touch {ran}\n[diff \"x\"]\n\ttextconv = touch {ran}\n"
                         f"[core]\n\tfsmonitor = touch {ran}\n")
    server.enqueue(server.openai_tool_call("bash", {"command": "echo three > a.txt"}, call_id="b2"),
                   server.openai_tool_call("bash", {"command": "echo four > b.txt"}, call_id="b3"),
                   server.openai_text("done"))
    said = message_text(bob.prompt(sid, "second")[1])
    assert "not recorded" not in said.lower(), said
    said = message_text(bob.prompt(sid, "/undo")[1])
    assert (workdir / "a.txt").read_text() == "two\n" and not (workdir / "b.txt").exists(), said
    assert not ran.exists()

def test_the_store_is_private_packed_and_bounded(spawn_bob, server, workdir):
    for n in range(40):
        (workdir / f"file{n}.txt").write_text(f"{n}\n" * 50)
    bob = start(spawn_bob, server, {"tools": {"checkpoints": True, "checkpointStoreLimit": 1024 * 1024}})
    sid = opened(bob)
    for n in range(3):
        server.enqueue(server.openai_tool_call("bash", {"command": f"head -c 460000 /dev/urandom > big{n}.bin"},
                                               call_id=f"b{n}"), server.openai_text("wrote"))
        said = message_text(bob.prompt(sid, f"write {n}")[1])
    assert "the 1 oldest undo point(s) of this session were dropped" in said or "oldest undo point" in said, said
    store = workdir / ".bob" / "checkpoints"
    assert stat.S_IMODE(store.stat().st_mode) == 0o700
    for folder, dirs, files in os.walk(store):
        for name in files:
            assert stat.S_IMODE(os.lstat(os.path.join(folder, name)).st_mode) & 0o077 == 0, name
        for name in dirs:
            assert stat.S_IMODE(os.lstat(os.path.join(folder, name)).st_mode) & 0o077 == 0, name
    (shadow,) = store.glob("*.git")
    counts = subprocess.run(["git", "--git-dir", str(shadow), "count-objects", "-v"], capture_output=True, text=True,
                            check=True).stdout
    fields = dict(line.split(": ") for line in counts.splitlines())
    assert int(fields["in-pack"]) >= 40 and int(fields["count"]) < 40  # the first snapshot's objects: packed


def test_without_git_undo_is_answered_by_bob_not_sent_to_the_model(spawn_bob, server, workdir, tmp_path):
    bob = bob_without_git(spawn_bob, server, tmp_path)
    sid = bob.new_session()
    for command in ("/undo", "/redo"):
        said = message_text(bob.prompt(sid, command)[1])
        assert f"{command} needs git, which is not installed here" in said and "apt install git" in said, said
    assert server.requests == []


def test_a_session_whose_turn_changed_files_is_listed_and_keeps_its_title_through_compact(spawn_bob, server, workdir):
    bob = start(spawn_bob, server, {"acp": {"sessionHistory": True}})
    sid = opened(bob)
    server.enqueue(server.openai_tool_call("write_file", {"path": "a.txt", "content": "x\n"}, call_id="w1"),
                   server.openai_text("wrote"))
    bob.prompt(sid, "the first question")
    path = workdir / ".bob" / "sessions" / f"{sid}.json"
    created = json.loads(path.read_text())["createdAt"]
    generation = json.loads(path.read_text())["generation"]
    listed = bob.result("session/list", {"cwd": str(workdir)})["sessions"]
    assert [(s["sessionId"], s.get("title")) for s in listed] == [(sid, "the first question")]
    server.enqueue(server.openai_text("second answer"))
    bob.prompt(sid, "the second question")
    server.enqueue(server.openai_text("a summary of it all"))
    bob.prompt(sid, "/compact")
    document = json.loads(path.read_text())
    assert document["createdAt"] == created and document["generation"] > generation + 1
    listed = bob.result("session/list", {"cwd": str(workdir)})["sessions"]
    assert [(s["sessionId"], s.get("title")) for s in listed] == [(sid, "the first question")]


def test_a_command_deleting_an_ignored_file_is_said_at_the_time_and_undo_never_denies_the_turn(
        spawn_bob, server, workdir):
    with open(workdir / ".gitignore", "a") as handle:
        handle.write(".env\n")
    (workdir / ".env").write_text("KEY=1\n")
    server.enqueue(server.openai_tool_call("bash", {"command": "rm .env"}, call_id="b1"), server.openai_text("gone"))
    bob = start(spawn_bob, server)
    sid = opened(bob)
    said = message_text(bob.prompt(sid, "remove the env file")[1])
    assert "Not recorded, so /undo will not take it back: .env (left out by .gitignore" in said, said
    said = message_text(bob.prompt(sid, "/undo")[1])
    assert said.startswith("↩️ Nothing to undo") and "1 turn(s) changed only what cannot be recorded" in said, said
    assert "no turn of this session changed files" not in said


def test_undo_names_the_later_turns_it_takes_out_with_the_turn(spawn_bob, server, workdir):
    server.enqueue(server.openai_tool_call("write_file", {"path": "a.txt", "content": "x\n"}, call_id="w1"),
                   server.openai_text("wrote"), server.openai_text("hello to you"))
    bob = start(spawn_bob, server)
    sid = opened(bob)
    bob.prompt(sid, "write a")
    bob.prompt(sid, "say hello")
    said = message_text(bob.prompt(sid, "/undo")[1])
    assert said.startswith("↩️ Undid the turn “write a”")
    assert "Taken out of the conversation with it, the later turn(s) that changed no files: “say hello”." in said


def test_a_fork_keeps_its_own_title_after_its_first_turn(spawn_bob, server, workdir):
    bob = start(spawn_bob, server, {"acp": {"sessionHistory": True, "fork": True}})
    sid = opened(bob)
    server.enqueue(server.openai_text("one"), server.openai_text("two"))
    bob.prompt(sid, "the original question")
    fork = bob.result("session/fork", {"sessionId": sid, "cwd": str(workdir), "mcpServers": []})["sessionId"]
    bob.prompt(fork, "a question in the fork")
    titles = {s["sessionId"]: s.get("title") for s in bob.result("session/list", {"cwd": str(workdir)})["sessions"]}
    assert titles == {sid: "the original question", fork: "the original question (fork)"}


def test_a_repository_planted_inside_runs_nothing_when_a_command_changes_it(spawn_bob, server, workdir, tmp_path):
    """A command made sub/ a repository whose config and attributes run a program for every file
    git reads (a filter, an fsmonitor, a textconv, an include); a later command touches it and
    makes 2,100 files. Bob's look never runs git over the project: nothing of it runs, and the
    change inside the repository is said, not taken back."""
    ran = tmp_path / "planted-ran"
    sub = workdir / "sub"
    subprocess.run(["git", "init", "-q"], cwd=sub if sub.mkdir() is None else sub, check=True)
    (tmp_path / "included").write_text(f"[core]\n\tfsmonitor = touch {ran}.include\n")
    with open(sub / ".git" / "config", "a") as handle:
        handle.write(f"[filter \"x\"]\n\tclean = touch {ran}\n\tsmudge = touch {ran}\n[core]\n\tfsmonitor = touch {ran}\n"
                     f"[diff \"x\"]\n\ttextconv = touch {ran}\n[include]\n\tpath = {tmp_path / 'included'}\n")
    (sub / ".gitattributes").write_text("* filter=x diff=x\n")
    (sub / "f").write_text("one\n")
    server.enqueue(server.openai_tool_call("bash", {"command": "echo two >> sub/f && mkdir many && cd many && "
                                                               "for n in $(seq 2100); do echo $n > f$n; done"},
                                           call_id="p1"),
                   server.openai_text("done"))
    bob = start(spawn_bob, server)
    sid = opened(bob)
    said = message_text(bob.prompt(sid, "make files")[1])
    assert not list(tmp_path.glob("planted-ran*"))
    assert "sub (a git repository inside" in said, said
    said = message_text(bob.prompt(sid, "/undo")[1])
    assert not (workdir / "many").exists(), said
    assert (sub / "f").read_text() == "one\ntwo\n"  # (not Bob's to take back: said)
    assert not list(tmp_path.glob("planted-ran*"))


@pytest.mark.parametrize("plant", ["a ref naming a FIFO", "HEAD a FIFO", "an absolute ref", "a nested HEAD FIFO"])
def test_a_planted_head_never_wedges_a_turn(spawn_bob, server, workdir, plant):
    """The project's .git/HEAD and the ref it names are read as small regular files beneath .git
    only: a FIFO, an absolute or `..` ref, a repository inside whose HEAD is a FIFO are not read,
    and the turn (and a cancel) is answered."""
    git = workdir / ".git"
    git.mkdir()
    if plant == "a ref naming a FIFO":
        os.mkfifo(workdir / "pipe")
        (git / "HEAD").write_text(f"ref: {workdir}/pipe\n")
    elif plant == "HEAD a FIFO":
        os.mkfifo(git / "HEAD")
    elif plant == "an absolute ref":
        (git / "HEAD").write_text("ref: ../../../../../../dev/zero\n")
    else:
        (workdir / "sub" / ".git").mkdir(parents=True)
        os.mkfifo(workdir / "sub" / ".git" / "HEAD")
    server.enqueue(server.openai_tool_call("bash", {"command": "echo made > a.txt"}, call_id="h1"),
                   server.openai_text("done"))
    bob = start(spawn_bob, server)
    sid = opened(bob)
    result, _ = bob.prompt(sid, "write", timeout=60)
    assert result.get("result", {}).get("stopReason") == "end_turn", result
    said = message_text(bob.prompt(sid, "/undo", timeout=60)[1])
    assert "Restored" in said or "Removed" in said, said
    assert not (workdir / "a.txt").exists()


def test_a_name_that_is_not_utf8_keeps_its_undo_point_across_a_restart(spawn_bob, server, workdir):
    """A turn that made a file whose name is not valid UTF-8: its undo point survives the session
    file (its signature held), and /undo after a restart takes the file back by its own name."""
    server.enqueue(server.openai_tool_call("bash", {"command": "printf made > $'\\xff\\xfe.txt'"}, call_id="u1"),
                   server.openai_text("done"))
    bob = start(spawn_bob, server, {"acp": {"sessionHistory": True}})
    sid = opened(bob)
    bob.prompt(sid, "make it")
    assert os.path.exists(os.path.join(os.fsencode(workdir), b"\xff\xfe.txt"))
    assert bob.close() == 0
    again = start(spawn_bob, server, {"acp": {"sessionHistory": True}})
    again.result("session/load", {"sessionId": sid, "cwd": str(workdir), "mcpServers": []})
    said = message_text(again.prompt(sid, "/undo")[1])
    assert said.startswith("↩️ Undid the turn “make it”"), said
    assert not os.path.exists(os.path.join(os.fsencode(workdir), b"\xff\xfe.txt"))
    assert "left out" not in again.stderr()


def test_an_undo_point_whose_copies_are_gone_is_said_once_and_dropped(spawn_bob, server, workdir):
    """The user cleaned .bob/checkpoints: the record can never be restored; /undo says so once,
    drops it, touches nothing, and the next /undo goes on with the turn before."""
    (workdir / "a.txt").write_text("one\n")
    server.enqueue(server.openai_tool_call("write_file", {"path": "a.txt", "content": "two\n"}, call_id="g1"),
                   server.openai_text("done"))
    server.enqueue(server.openai_tool_call("write_file", {"path": "b.txt", "content": "b\n"}, call_id="g2"),
                   server.openai_text("done"))
    bob = start(spawn_bob, server)
    sid = opened(bob)
    bob.prompt(sid, "first")
    bob.prompt(sid, "second")
    shutil.rmtree(workdir / ".bob" / "checkpoints")
    said = message_text(bob.prompt(sid, "/undo")[1])
    assert "cannot be used" in said and "dropped" in said and "try again" not in said.lower(), said
    assert (workdir / "b.txt").read_text() == "b\n" and (workdir / "a.txt").read_text() == "two\n"
    said = message_text(bob.prompt(sid, "/undo")[1])
    assert "second" not in said, said  # (that one is gone: the turn before is next)


def test_a_save_during_a_command_is_never_lost_to_undo_and_only_it_is_hedged(spawn_bob, server, workdir):
    """Bob edits app.py, then runs a test command that changes nothing; the user saves notes.md
    while it runs. /undo takes the turn back (Bob cannot tell the save from the command) and
    says which path it doubts (notes.md, which the command never named); after a new prompt,
    /redo brings the user's notes.md back: no byte /undo replaced is lost."""
    import threading

    (workdir / "app.py").write_text("print('before')\n")
    (workdir / "notes.md").write_text("old notes\n")
    server.enqueue(server.openai_tool_call("write_file", {"path": "app.py", "content": "print('bob')\n"},
                                           call_id="s1"),
                   server.openai_tool_call("bash", {"command": "touch started; while [ ! -e saved ]; do sleep 0.02; "
                                                               "done; echo tested"}, call_id="s2"),
                   server.openai_text("done"))

    def the_user_saves():
        while not (workdir / "started").exists():
            time.sleep(0.02)
        (workdir / "notes.md").write_text("the user's own notes\n")
        (workdir / "saved").write_text("")

    saver = threading.Thread(target=the_user_saves)
    saver.start()
    bob = start(spawn_bob, server)
    sid = opened(bob)
    bob.prompt(sid, "edit and test")
    saver.join(30)
    said = message_text(bob.prompt(sid, "/undo")[1])
    assert "Changed while a command ran (Bob cannot tell whether the command alone wrote them): notes.md." in said
    assert (workdir / "app.py").read_text() == "print('before')\n"
    server.enqueue(server.openai_text("ok"))
    bob.prompt(sid, "something else")
    said = message_text(bob.prompt(sid, "/redo")[1])
    assert said.startswith("↪️ Put back the files of the turn “edit and test”"), said
    assert (workdir / "notes.md").read_text() == "the user's own notes\n"
    assert (workdir / "app.py").read_text() == "print('bob')\n"


def test_undo_after_compact_tells_the_summary_what_was_undone(spawn_bob, server, workdir):
    """The turn's messages are in the compression summary: /undo takes its files back and the
    summary the model reads says so (it would go on from a change that is no more)."""
    bob = start(spawn_bob, server, {"context": {"keepLastTurns": 0}})
    sid = opened(bob)
    server.enqueue(server.openai_tool_call("write_file", {"path": "a.txt", "content": "x\n"}, call_id="c1"),
                   server.openai_text("wrote a.txt"))
    bob.prompt(sid, "write a.txt")
    server.enqueue(server.openai_text("The user had Bob write a.txt."))
    bob.prompt(sid, "/compact")
    said = message_text(bob.prompt(sid, "/undo")[1])
    assert not (workdir / "a.txt").exists(), said
    server.enqueue(server.openai_text("ok"))
    bob.prompt(sid, "what is in the project?")
    sent = json.dumps(server.requests[-1]["body"]["messages"])
    assert "Since this summary, /undo took back a turn of it" in sent and "a.txt" in sent


def test_undo_never_skips_an_unrecorded_latest_turn_without_saying_so(spawn_bob, server, workdir):
    """The latest turn changed a file no record can hold (past tools.checkpointMaxBytes): /undo
    says that turn's changes stay, then takes back the recorded turn before it, and never calls
    the later turn one that changed no files."""
    bob = start(spawn_bob, server, {"tools": {"checkpoints": True, "checkpointMaxBytes": 1000}})
    sid = opened(bob)
    server.enqueue(server.openai_tool_call("write_file", {"path": "small.txt", "content": "x\n"}, call_id="r1"),
                   server.openai_text("done"))
    bob.prompt(sid, "write the small one")
    server.enqueue(server.openai_tool_call("bash", {"command": "head -c 5000 /dev/zero > big.bin"}, call_id="r2"),
                   server.openai_text("done"))
    bob.prompt(sid, "write the big one")
    said = message_text(bob.prompt(sid, "/undo")[1])
    assert said.startswith("⚠️ The latest turn(s) “write the big one” changed files that could not be recorded"), said
    assert "changed no files" not in said and not (workdir / "small.txt").exists()
    assert (workdir / "big.bin").exists()


def test_a_command_that_deletes_agents_md_says_so_in_the_turn(spawn_bob, server, workdir):
    """/undo never writes an AGENTS.md (instructions Bob trusts are changed only by the user): a
    command that deleted or changed one is said in that turn's result, not only at /undo."""
    (workdir / "AGENTS.md").write_text("Run the tests first.\n")
    server.enqueue(server.openai_tool_call("bash", {"command": "rm AGENTS.md; echo x > other.txt"}, call_id="a1"),
                   server.openai_text("done"))
    bob = start(spawn_bob, server)
    sid = opened(bob)
    _, frames = bob.prompt(sid, "tidy up")
    said = message_text(frames) + json.dumps(frames)
    assert "AGENTS.md (/undo never writes an AGENTS.md" in said, said


def test_undo_of_a_turn_that_left_a_job_running_names_what_changed_since(spawn_bob, server, workdir):
    """A command leaves a job running that writes files after the command's look: /undo takes
    back the turn, says the job was left running and names what changed since, and leaves it."""
    # (the command waits until the job is in a session of its own: its group is killed when it ends)
    job = ("setsid sh -c 'touch detached; while [ ! -e go ]; do sleep 0.02; done; echo late > late.txt; touch done' "
           "> /dev/null 2>&1 < /dev/null & while [ ! -e detached ]; do sleep 0.01; done; echo started > turn.txt")
    server.enqueue(server.openai_tool_call("bash", {"command": job}, call_id="j1"), server.openai_text("done"))
    bob = start(spawn_bob, server)
    sid = opened(bob)
    bob.prompt(sid, "start the job")
    (workdir / "go").write_text("")
    deadline = time.monotonic() + 30
    while not (workdir / "done").exists():
        assert time.monotonic() < deadline, "the job did not run"
        time.sleep(0.02)
    said = message_text(bob.prompt(sid, "/undo")[1])
    assert said.startswith("↩️ Undid the turn “start the job”"), said
    assert "left a job running, and since the turn these changed:" in said and "late.txt" in said, said
    assert not (workdir / "turn.txt").exists() and (workdir / "late.txt").read_text() == "late\n"


def test_with_the_editors_files_the_buffer_is_what_undo_puts_back(tmp_path, bob_env, workdir, server):
    """agent-shell's way: the user had typed a line (unsaved) before the turn, and Bob's edit,
    made through the editor, kept it: /undo puts back the buffer as it was, that line included.
    And an edit the client holds in its buffer without saving is recorded, and taken back."""
    (workdir / "notes.md").write_text("first line\n")
    (workdir / "held.md").write_text("held before\n")
    (tmp_path / "config.yaml").write_text(json.dumps({"model": {"baseUrl": server.url + "/v1", "retries": 0},
                                                      **CHECKPOINTS, "tools": {"checkpoints": True, "clientFs": True}}))
    server.enqueue(server.openai_tool_call("edit_file", {"path": "notes.md", "old_string": "first line",
                                                         "new_string": "FIRST LINE"}, call_id="e1"),
                   server.openai_tool_call("write_file", {"path": "held.md", "content": "held by bob\n"},
                                           call_id="e2"),
                   server.openai_text("done"))
    buffers = {str(workdir / "notes.md"): "first line\nthe user's unsaved line\n"}

    def editor(request):  # (holds what it is given in its buffers: saves nothing to disk)
        path = request["params"]["path"]
        if request["method"] == "fs/read_text_file":
            return {"content": buffers[path] if path in buffers else open(path, encoding="utf-8").read()}
        buffers[path] = request["params"]["content"]
        return {}

    with Bob(str(workdir), {**bob_env, "OPENAI_API_KEY": KEY}) as bob:
        bob.initialize({"fs": {"readTextFile": True, "writeTextFile": True}})
        sid = opened(bob)
        bob.prompt(sid, "edit them", answer=allow, editor=editor)
        assert buffers[str(workdir / "notes.md")] == "FIRST LINE\nthe user's unsaved line\n"
        assert (workdir / "held.md").read_text() == "held before\n"  # (the disk was never written)
        said = message_text(bob.prompt(sid, "/undo", answer=allow, editor=editor)[1])
        assert said.startswith("↩️ Undid the turn “edit them”"), said
        assert buffers[str(workdir / "notes.md")] == "first line\nthe user's unsaved line\n"
        assert buffers[str(workdir / "held.md")] == "held before\n"


def test_one_shot_chats_get_an_undo_point_from_the_second_run(bob_env, tmp_path, workdir, server):
    """`bob-acp chat "PROMPT"` on a large project ends before its first look is made: what that
    look read is kept in the store, and the next run continues it instead of starting again, so
    the second run's turn is recorded and `--continue /undo` takes it back."""
    import subprocess

    from bob_client import bob_command

    for i in range(6000):
        folder = workdir / "src" / f"m{i // 100}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"f{i}.py").write_text(f"# file {i}\n" + "x = 1\n" * (i % 40))
    (tmp_path / "config.yaml").write_text(json.dumps({"model": {"baseUrl": server.url + "/v1", "retries": 0},
                                                      "sessions": {"enabled": True}, "tools": {"checkpoints": True}}))
    env = {**bob_env, "OPENAI_API_KEY": KEY}

    def chat(*args):
        done = subprocess.run([*bob_command(), "chat", "--yes", "--profile", "full", *args], cwd=workdir, env=env,
                              stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        return done.stdout

    for run, thinking in ((1, 0.0), (2, 10.0)):  # (a model that thinks a while: what a real one does)
        call = server.openai_tool_call("bash", {"command": f"echo run{run} >> out.txt"}, call_id=f"o{run}")
        call.silent = thinking
        server.enqueue(call, server.openai_text("appended"))
        chat("append a line")
        if run == 1:  # (what the first look read is in the store, for the next run to go on from)
            (kept,) = (workdir / ".bob" / "checkpoints").glob("*.git.look")
            assert json.loads(kept.read_text())["files"]
    said = chat("--continue", "/undo")
    assert "Undid the turn" in said, said
    assert (workdir / "out.txt").read_text() == "run1\n"
