"""The restore of /undo in-process, as an attacker would try it: a folder on the way swapped for a
link to a place outside while the restore runs, thousands of times; records that name paths out
of the root; and the link-safe operations it is built on (bob_acp.files.beneath.Place)."""

from __future__ import annotations

import os
import shutil
import stat
import threading

import pytest

from bob_acp.checkpoints import records
from bob_acp.checkpoints.look import blob_id
from bob_acp.checkpoints.records import Change
from bob_acp.checkpoints.restore import apply, current
from bob_acp.files.beneath import OutsideRoot, Place

MADE = b"made by the turn\n"
GONE = b"deleted by the turn\n"
BLOBS = {blob_id(MADE): MADE, blob_id(GONE): GONE}


def file_state(data: bytes, mode: int = 0o644) -> dict:
    return {"type": "file", "mode": mode, "blob": blob_id(data)}


def changes(root: str) -> list[Change]:
    return [Change(root, "sub/made.txt", None, file_state(MADE), "bash"),  # /undo removes it
            Change(root, "sub/gone.txt", file_state(GONE, 0o600), None, "bash"),  # /undo writes it back
            Change(root, "sub/mode.txt", file_state(MADE, 0o600), file_state(MADE, 0o644), "bash")]  # a chmod


def test_the_restore_against_a_folder_and_link_swapper_never_touches_a_file_outside(tmp_path):
    root, outside = tmp_path / "project", tmp_path / "outside"
    real, held = root / "sub", root / "sub.held"
    root.mkdir()
    real.mkdir()
    outside.mkdir()
    for name in ("made.txt", "mode.txt"):
        (outside / name).write_bytes(MADE)
        (outside / name).chmod(0o644)
    stop = threading.Event()
    swaps = [0]

    def put_back():  # (the restore may have made a `sub` of its own while the real one was away)
        if os.path.isdir(held):
            if os.path.islink(real):
                os.unlink(real)
            elif os.path.isdir(real):
                shutil.rmtree(real)
            os.rename(held, real)

    def swapper():
        while not stop.is_set():
            try:
                os.rename(real, held)
                os.symlink(outside, real)
                swaps[0] += 1
            except OSError:
                pass
            try:
                put_back()
            except OSError:
                pass

    thread = threading.Thread(target=swapper)
    thread.start()
    tries = 0
    try:
        while tries < 2000:
            for folder in (real, held):  # the turn's state again, in the real folder wherever it is now
                try:
                    if not os.path.islink(folder) and folder.is_dir():
                        (folder / "made.txt").write_bytes(MADE)
                        (folder / "mode.txt").write_bytes(MADE)
                        os.chmod(folder / "mode.txt", 0o644)
                except OSError:
                    pass
            apply(changes(str(root)), 0, BLOBS.__getitem__, lambda c: c.path, 1 << 20)
            tries += 1
    finally:
        stop.set()
        thread.join()
    assert swaps[0] > 200  # (the swapper really ran against the restore)
    assert (outside / "made.txt").read_bytes() == MADE  # never removed through the link
    assert stat.S_IMODE((outside / "mode.txt").stat().st_mode) == 0o644  # never chmodded through it
    assert not (outside / "gone.txt").exists()  # never written through it
    assert sorted(os.listdir(outside)) == ["made.txt", "mode.txt"]


def test_a_link_in_the_way_is_kept_and_named_not_followed(tmp_path):
    root, outside = tmp_path / "project", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    (outside / "made.txt").write_bytes(MADE)
    os.symlink(outside, root / "sub")
    outcome = apply(changes(str(root)), 0, BLOBS.__getitem__, lambda c: c.path, 1 << 20)
    assert (outside / "made.txt").read_bytes() == MADE and not (outside / "gone.txt").exists()
    assert set(outcome.kept) == {"sub/made.txt", "sub/gone.txt", "sub/mode.txt"} and not outcome.restored


def test_a_retry_counts_what_is_already_back_as_done(tmp_path):
    root = tmp_path / "project"
    (root / "sub").mkdir(parents=True)
    (root / "sub" / "mode.txt").write_bytes(MADE)
    (root / "sub" / "mode.txt").chmod(0o600)  # (put back by an earlier try)
    (root / "sub" / "gone.txt").write_bytes(GONE)
    (root / "sub" / "gone.txt").chmod(0o600)
    outcome = apply(changes(str(root)), 0, BLOBS.__getitem__, lambda c: c.path, 1 << 20)
    assert outcome.complete and not outcome.kept
    assert sorted(outcome.restored) == ["sub/gone.txt", "sub/mode.txt"] and outcome.removed == ["sub/made.txt"]


@pytest.mark.parametrize("path", ["../x", "/etc/passwd", "a/../../x", "a//b", "./a", "", "a/\0"])
def test_a_record_that_names_a_path_out_of_its_root_is_refused_when_read_and_when_acted_on(tmp_path, path):
    item = {"id": "x", "changes": [{"root": str(tmp_path), "path": path, "before": None,
                                    "after": file_state(MADE), "by": "bash"}], "notes": [], "messages": []}
    assert records.parse(item) is None
    with pytest.raises(OutsideRoot):
        Place(str(tmp_path), path)


def test_current_never_reads_through_a_link_on_the_way(tmp_path):
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "f").write_bytes(MADE)
    (tmp_path / "root").mkdir()
    os.symlink(tmp_path / "outside", tmp_path / "root" / "d")
    assert current(str(tmp_path / "root"), "d/f", 1 << 20) == "blocked"
    assert current(str(tmp_path / "root"), "d", 1 << 20) == {"type": "link", "blob": blob_id(
        os.fsencode(str(tmp_path / "outside")))}


def test_a_name_is_taken_out_as_itself_and_never_through_a_bob_folder_that_is_a_link(tmp_path):
    """files.beneath.move_beneath, as the sandbox takes a planted name out: a link is moved as the
    link (its target stays), and a `.bob` that is a link (made by a command where no namespace
    protects it) is never gone through: nothing leaves the project."""
    from bob_acp.files.beneath import OutsideRoot, move_beneath

    project, elsewhere = tmp_path / "project", tmp_path / "elsewhere"
    (project / "src").mkdir(parents=True)
    (project / "src" / "app.py").write_text("mine\n")
    elsewhere.mkdir()
    (project / "AGENTS.md").symlink_to("src")
    move_beneath(str(project), "AGENTS.md", ".bob/planted/one/AGENTS.md")
    kept = project / ".bob" / "planted" / "one" / "AGENTS.md"
    assert kept.is_symlink() and (project / "src" / "app.py").read_text() == "mine\n"
    (project / ".bob").rename(project / ".bob-away")
    (project / ".bob").symlink_to(elsewhere)
    (project / "sub").mkdir()
    (project / "sub" / ".git").mkdir()
    with pytest.raises(OutsideRoot):
        move_beneath(str(project), "sub/.git", ".bob/planted/two/sub/.git")
    assert (project / "sub" / ".git").is_dir() and list(elsewhere.iterdir()) == []


RESTORE_AS_USER = r"""
import os, sys
from bob_acp.checkpoints import restore
from bob_acp.checkpoints.look import blob_id
from bob_acp.checkpoints.records import Change
root = sys.argv[1]
data = b"the secret as it was\n"
blobs = {blob_id(data): data}
changes = [
    Change(root, "locked/secret.txt", {"type": "file", "mode": 0o600, "blob": blob_id(data)}, None, "bash"),
    Change(root, "locked/inner", {"type": "folder", "mode": 0o700}, None, "bash"),
    Change(root, "locked/made.txt", None, {"type": "file", "mode": 0o644, "blob": blob_id(b"made\n")}, "bash"),
]
blobs[blob_id(b"made\n")] = b"made\n"
outcome = restore.apply(changes, 0, blobs.__getitem__, lambda c: c.path, 1 << 20, None)
print("complete" if outcome.complete else "failed: " + "; ".join(outcome.failed))
"""


def test_a_restore_as_an_ordinary_user_reaches_beneath_a_folder_it_may_not_read(tmp_path):
    """A user's own folder of mode 0311 (search, no read): the restore goes through it (by its
    search permission, as the kernel allows), puts back a 0600 file and a 0700 folder there and
    removes what the turn made, as the user, never as root."""
    import pwd
    import shutil
    import subprocess
    import sys
    import uuid

    project = os.path.join("/var/tmp", f"bob-restore-{uuid.uuid4().hex[:10]}")  # (reachable by another user)
    os.makedirs(os.path.join(project, "locked"))
    try:
        with open(os.path.join(project, "locked", "made.txt"), "w") as handle:
            handle.write("made\n")
        command = [sys.executable, "-c", RESTORE_AS_USER, project]
        if os.geteuid() == 0:
            if shutil.which("setpriv") is None:
                pytest.skip("setpriv is needed to run the restore as another user")
            nobody = pwd.getpwnam("nobody")
            for folder, _dirs, files in os.walk(project):
                os.chown(folder, nobody.pw_uid, nobody.pw_gid)
                for name in files:
                    os.chown(os.path.join(folder, name), nobody.pw_uid, nobody.pw_gid)
            command = ["setpriv", f"--reuid={nobody.pw_uid}", f"--regid={nobody.pw_gid}", "--clear-groups",
                       "--inh-caps=-all", "--bounding-set=-all", *command]
        os.chmod(os.path.join(project, "locked"), 0o311)
        env = {**os.environ, "PYTHONPATH": os.path.dirname(os.path.dirname(os.path.abspath(__file__)))}
        done = subprocess.run(command, capture_output=True, text=True, timeout=60, env=env, cwd="/")
        assert done.stdout.strip() == "complete", done.stdout + done.stderr
        os.chmod(os.path.join(project, "locked"), 0o755)
        secret = os.path.join(project, "locked", "secret.txt")
        with open(secret) as handle:
            assert handle.read() == "the secret as it was\n"
        assert stat.S_IMODE(os.stat(secret).st_mode) == 0o600
        assert stat.S_IMODE(os.stat(os.path.join(project, "locked", "inner")).st_mode) == 0o700
        assert not os.path.exists(os.path.join(project, "locked", "made.txt"))
    finally:
        os.chmod(os.path.join(project, "locked"), 0o755)
        shutil.rmtree(project, ignore_errors=True)
