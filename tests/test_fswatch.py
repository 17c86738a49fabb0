"""Folders watched with inotify (bob_acp.fswatch): what moves the generation on, what does not,
and that what session/new reads through it (skills, AGENTS.md, the git root, the session folder)
is as fresh as with a look at every session: a change made before a request is in its answer."""

import os
import threading
import time

import pytest
import yaml

from bob_acp import config, fswatch, skills, system_prompt
from bob_acp.acp import params
from bob_acp.jsonrpc.errors import RpcError

pytestmark = pytest.mark.skipif(os.uname().sysname != "Linux", reason="inotify is Linux's")


@pytest.fixture
def watching(monkeypatch):
    """A watcher of this test's own, and the server's way of looking: once per read of input."""
    watcher = fswatch.Watcher()
    monkeypatch.setattr(fswatch, "_watcher", [watcher])
    monkeypatch.setattr(fswatch, "_reads", [0])
    monkeypatch.setattr(fswatch, "_looked", [(-1, 0)])
    yield fswatch.input_read  # what the reader calls after each read: "a request came in"
    watcher.close()


def moved(look, before):
    look()
    return fswatch.generation() != before


def test_between_two_reads_of_input_the_folders_are_looked_at_once(watching, tmp_path):
    assert fswatch.watch_path(str(tmp_path))
    watching()
    start = fswatch.generation()
    (tmp_path / "x").write_text("x")
    assert fswatch.generation() == start  # the requests of that read: as it found things
    watching()
    assert fswatch.generation() == start + 1


def test_a_watcher_sees_entries_of_a_folder_and_only_the_names_asked_for_above_it(watching, tmp_path):
    folder = tmp_path / "a" / "b"
    folder.mkdir(parents=True)
    assert fswatch.watch_path(str(folder))
    watching()
    start = fswatch.generation()
    (tmp_path / "unrelated.txt").write_text("x")  # in a folder above, not on the way down
    (tmp_path / "a" / "other").mkdir()
    assert not moved(watching, start)
    (folder / "new.txt").write_text("x")  # an entry of the folder itself
    assert moved(watching, start)
    start = fswatch.generation()
    (folder / "new.txt").write_text("changed")
    assert moved(watching, start)
    start = fswatch.generation()
    os.chmod(folder / "new.txt", 0o600)
    assert moved(watching, start)


def test_renaming_a_folder_on_the_way_or_the_folder_itself_moves_it_on(watching, tmp_path):
    folder = tmp_path / "a" / "b"
    folder.mkdir(parents=True)
    assert fswatch.watch_path(str(folder), ("AGENTS.md",))
    watching()
    start = fswatch.generation()
    (folder / "notes.txt").write_text("x")  # not a name asked for
    assert not moved(watching, start)
    os.rename(tmp_path / "a", tmp_path / "z")  # the path no longer leads there
    assert moved(watching, start)
    os.rename(tmp_path / "z", tmp_path / "a")
    assert fswatch.watch_path(str(folder), ("AGENTS.md",))
    watching()
    start = fswatch.generation()
    os.rename(folder, tmp_path / "a" / "c")
    assert moved(watching, start)
    gone = tmp_path / "gone"
    gone.mkdir()
    assert fswatch.watch_path(str(gone), ())
    watching()
    start = fswatch.generation()
    os.rmdir(gone)
    assert moved(watching, start)


def test_a_link_on_the_way_is_followed_and_where_it_leads_is_watched_too(watching, tmp_path):
    real = tmp_path / "real" / "skills"
    real.mkdir(parents=True)
    (tmp_path / "project").mkdir()
    os.symlink(tmp_path / "real", tmp_path / "project" / ".bob")
    assert fswatch.watch_path(str(tmp_path / "project" / ".bob" / "skills"))
    watching()
    start = fswatch.generation()
    os.rename(tmp_path / "real", tmp_path / "elsewhere")  # the link now leads nowhere
    assert moved(watching, start)


def test_a_folder_on_a_network_or_fuse_file_system_is_never_trusted_to_be_watched(watching, monkeypatch, tmp_path):
    """Changes made there by another machine (or a VM's host) are no inotify event: stats."""
    watcher = fswatch._watcher[0]
    monkeypatch.setattr(watcher, "_mounts", [(str(tmp_path / "nfs"), "nfs4"), ("/", "ext4")])
    (tmp_path / "nfs" / "skills").mkdir(parents=True)
    (tmp_path / "local").mkdir()
    assert not fswatch.watch_path(str(tmp_path / "nfs" / "skills"))
    assert fswatch.watch_path(str(tmp_path / "local"))
    cfg = config.defaults()
    cwd = tmp_path / "nfs"
    watching()
    env = {"HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path / "xdg")}
    assert "deploy" not in skills.discover(str(cwd), cfg, env).skills
    add_skill(cwd / ".bob" / "skills", "deploy", "Ship it.")
    assert "deploy" in skills.discover(str(cwd), cfg, env).skills  # (no new read: stats found it)


def test_without_a_look_at_input_each_caller_looks_for_itself(monkeypatch, tmp_path):
    watcher = fswatch.Watcher()
    monkeypatch.setattr(fswatch, "_watcher", [watcher])
    monkeypatch.setattr(fswatch, "_reads", [0])
    try:
        assert fswatch.watch_path(str(tmp_path))
        start = fswatch.generation()
        (tmp_path / "x").write_text("x")
        assert fswatch.generation() != start
    finally:
        watcher.close()


def test_it_is_set_up_only_once_asked_often_and_never_where_it_cannot_be(monkeypatch):
    monkeypatch.setattr(fswatch, "_watcher", [])
    monkeypatch.setattr(fswatch, "_asked", [0])
    made = []
    monkeypatch.setattr(fswatch, "watcher", lambda: made.append(1))
    for _ in range(fswatch.SET_UP_AFTER - 1):
        assert fswatch.generation() is None  # stats meanwhile
    assert not made
    fswatch.generation()
    deadline = time.monotonic() + 5
    while not made and time.monotonic() < deadline:
        time.sleep(0.01)
    assert made == [1]


def test_a_flood_of_events_is_read_whole_and_counted_once(watching, tmp_path):
    assert fswatch.watch_path(str(tmp_path))
    watching()
    start = fswatch.generation()
    for i in range(3000):  # more than one read of the events holds
        (tmp_path / f"f{i:05d}-{'x' * 40}").write_text("x")
    watching()
    after = fswatch.generation()
    assert after == start + 1
    watching()
    assert fswatch.generation() == after  # nothing was left behind to count again


# ---- what session/new reads through it ----------------------------------------------------------


@pytest.fixture
def project(tmp_path):
    home = tmp_path / "home"
    cwd = tmp_path / "project"
    home.mkdir()
    cwd.mkdir()
    (cwd / ".git").mkdir()
    cfg_path = tmp_path / "config.yaml"
    cfg_path.write_text(yaml.safe_dump({}))
    cfg = config.load(str(cfg_path), env={})
    env = {"HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config")}
    return {"cwd": cwd, "discover": lambda: skills.discover(str(cwd), cfg, env)}


def add_skill(folder, name, description):
    (folder / name).mkdir(parents=True, exist_ok=True)
    (folder / name / "SKILL.md").write_text(f"---\nname: {name}\ndescription: {description}\n---\nSteps.\n")


def test_a_skill_added_changed_or_removed_between_two_sessions_is_in_the_second(watching, project):
    watching()
    first = project["discover"]()
    assert "deploy" not in first.skills
    watching()
    assert project["discover"]() is first  # nothing changed: the very same catalogue, no look
    place = project["cwd"] / ".bob" / "skills"  # (its folders do not exist yet)
    add_skill(place, "deploy", "Ship it.")
    watching()
    assert project["discover"]().skills["deploy"].description == "Ship it."
    (place / "deploy" / "SKILL.md").write_text("---\nname: deploy\ndescription: Ship it carefully.\n---\nSteps.\n")
    watching()
    assert project["discover"]().skills["deploy"].description == "Ship it carefully."
    os.unlink(place / "deploy" / "SKILL.md")
    watching()
    assert "deploy" not in project["discover"]().skills


def test_agents_md_and_the_git_root_are_as_the_folders_are_now(watching, project):
    cwd = project["cwd"]
    sub = cwd / "pkg"
    sub.mkdir()
    watching()
    assert system_prompt.agents_files(str(sub)) == []
    (cwd / "AGENTS.md").write_text("Use tabs.")
    watching()
    assert system_prompt.agents_files(str(sub)) == [(str(cwd / "AGENTS.md"), "Use tabs.")]
    (cwd / "AGENTS.md").write_text("Use spaces.")
    (sub / "AGENTS.md").write_text("Here: no tests.")
    watching()
    assert [text for _, text in system_prompt.agents_files(str(sub))] == ["Use spaces.", "Here: no tests."]
    os.rename(cwd / ".git", cwd / "git-was-here")  # the project root is now the session folder
    watching()
    assert [text for _, text in system_prompt.agents_files(str(sub))] == ["Here: no tests."]


def test_a_session_folder_that_went_away_is_refused_again(watching, project):
    folder = project["cwd"] / "work"
    folder.mkdir()
    watching()
    assert params.cwd_param({"cwd": str(folder)}) == str(folder)
    assert params.cwd_param({"cwd": str(folder)}) == str(folder)  # (kept)
    folder.rmdir()
    watching()
    with pytest.raises(RpcError, match="not a directory"):
        params.cwd_param({"cwd": str(folder)})
    folder.mkdir()
    watching()
    assert params.cwd_param({"cwd": str(folder)}) == str(folder)


def test_the_caches_and_the_watcher_are_safe_from_many_threads(watching, project):
    place = project["cwd"] / ".bob" / "skills"
    errors = []

    def open_sessions():
        try:
            for _ in range(200):
                watching()
                project["discover"]()
                system_prompt.agents_files(str(project["cwd"]))
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=open_sessions) for _ in range(4)]
    for thread in threads:
        thread.start()
    for i in range(20):
        add_skill(place, f"s{i}", "A skill.")
    for thread in threads:
        thread.join(30)
    assert not errors
    watching()
    assert {f"s{i}" for i in range(20)} <= set(project["discover"]().skills)


# ---- end to end ------------------------------------------------------------------------------------


def inotify_open(pid):
    fds = f"/proc/{pid}/fd"
    found = []
    for fd in os.listdir(fds):
        try:
            found.append(os.readlink(os.path.join(fds, fd)))
        except OSError:
            continue
    return "anon_inode:inotify" in found


@pytest.mark.e2e
def test_once_bob_watches_the_folders_a_skill_added_before_a_session_new_is_in_its_menu(scripted, workdir):
    bob, _ = scripted([{"replies": [{"text": "ok"}]}])
    # Sessions opened often: Bob sets inotify up (on a thread of its own) after SET_UP_AFTER.
    ids = [bob.request_async("session/new", {"cwd": str(workdir), "mcpServers": []})
           for _ in range(fswatch.SET_UP_AFTER + 8)]
    for msg_id in ids:
        assert "result" in bob.wait_response(msg_id)[0]
    deadline = time.monotonic() + 10
    while not inotify_open(bob.pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert inotify_open(bob.pid)

    def menu():
        bob.new_session()
        return {c["name"]: c["description"] for c in bob.frames[-1]["params"]["update"]["availableCommands"]}

    assert "deploy" not in menu()
    add_skill(workdir / ".bob" / "skills", "deploy", "Ship it.")
    assert menu()["deploy"] == "Ship it."
    (workdir / ".bob" / "skills" / "deploy" / "SKILL.md").write_text(
        "---\nname: deploy\ndescription: Ship it carefully.\n---\nSteps.\n")
    assert menu()["deploy"] == "Ship it carefully."
    os.rename(workdir / ".bob" / "skills" / "deploy", workdir / ".bob" / "skills" / ".deploy-off")
    assert "deploy" not in menu()
    gone = workdir / "sub"
    gone.mkdir()
    assert "sessionId" in bob.result("session/new", {"cwd": str(gone), "mcpServers": []})
    gone.rmdir()
    refused, _ = bob.call("session/new", {"cwd": str(gone), "mcpServers": []})
    assert refused["error"]["code"] == -32602 and "not a directory" in refused["error"]["message"]
