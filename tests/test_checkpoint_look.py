"""Bob's own look at a project (bob_acp.checkpoints.look): the .gitignore rules as git reads them
(checked against `git check-ignore` itself), and a look that nothing a command planted can turn
against Bob's unconfined process: no program run, no link followed, no FIFO waited on, no
repository inside entered."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import threading

import pytest

from bob_acp.checkpoints import ignore
from bob_acp.checkpoints.look import blob_id, look

needs_git = pytest.mark.skipif(shutil.which("git") is None, reason="compared with git")

RULES = """\
# a comment
*.log
!keep.log
build/
/top-only.txt
docs/*.tmp
**/cache
logs/**
a/**/z
[abc].txt
\\#hash
trailing\\ 
node_modules
?.q
"""
PATHS = ["x.log", "keep.log", "sub/y.log", "sub/keep.log", "build", "sub/build", "top-only.txt",
         "sub/top-only.txt", "docs/a.tmp", "docs/deep/a.tmp", "cache", "deep/er/cache", "logs/one",
         "logs/deep/two", "a/z", "a/b/z", "a/b/c/z", "a.txt", "d.txt", "#hash", "trailing ", "trailing",
         "node_modules", "lib/node_modules", "q.q", "qq.q", "plain.txt", "buildfile"]
FOLDERS = {"build", "sub/build", "cache", "deep/er/cache", "node_modules", "lib/node_modules", "logs"}


def ours(rules: ignore.Rules, path: str) -> bool:
    folder = path in FOLDERS
    parts = path.split("/")
    for index in range(1, len(parts)):  # (an ignored folder on the way ignores what is inside)
        if rules.decide("/".join(parts[:index]), parts[index - 1], True):
            return True
    return bool(rules.decide(path, parts[-1], folder))


@needs_git
def test_the_rules_match_what_git_ignores(tmp_path):
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    (tmp_path / ".gitignore").write_text(RULES)
    for path in PATHS:
        target = tmp_path / path
        target.parent.mkdir(parents=True, exist_ok=True)
        if path in FOLDERS:
            target.mkdir(exist_ok=True)
            (target / "inside").write_text("x")
        else:
            target.write_text("x")
    asked = "".join(p + ("/inside" if p in FOLDERS else "") + "\n" for p in PATHS)
    out = subprocess.run(["git", "check-ignore", "--stdin", "--no-index"], cwd=tmp_path, input=asked,
                         capture_output=True, text=True).stdout.splitlines()
    by_git = {p.removesuffix("/inside") for p in out}
    rules = ignore.parse(RULES, "")
    by_bob = {p for p in PATHS if ours(rules, p + "/inside" if p in FOLDERS else p)}
    assert by_bob == by_git


def test_a_deeper_gitignore_wins_and_anchors_to_its_own_folder(tmp_path):
    (tmp_path / ".gitignore").write_text("*.gen\n")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / ".gitignore").write_text("!kept.gen\n/only-here.txt\n")
    for path in ("a.gen", "sub/kept.gen", "sub/b.gen", "only-here.txt", "sub/only-here.txt", "sub/deeper/x.txt"):
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(path)
    found = look(str(tmp_path), {}, 1 << 20, blob_id)
    assert set(found.files) == {".gitignore", "sub/.gitignore", "sub/kept.gen", "only-here.txt", "sub/deeper/x.txt"}
    assert set(found.ignored) == {"a.gen", "sub/b.gen", "sub/only-here.txt"}
    assert found.files["only-here.txt"].blob == blob_id(b"only-here.txt")


def test_a_look_reads_only_what_changed(tmp_path, monkeypatch):
    from bob_acp.checkpoints import look as look_module

    monkeypatch.setattr(look_module, "RACY_NS", 0)  # (files written just before: trusted all the same)
    (tmp_path / "a.txt").write_text("one")
    (tmp_path / "b.txt").write_text("two")
    read: list[bytes] = []

    def keep(data: bytes) -> str:
        read.append(data)
        return blob_id(data)

    first = look(str(tmp_path), {}, 1 << 20, keep)
    read.clear()
    second = look(str(tmp_path), first.files, 1 << 20, keep)
    assert read == []
    (tmp_path / "b.txt").write_text("changed")
    third = look(str(tmp_path), second.files, 1 << 20, keep)
    assert read == [b"changed"] and third.changed == ["b.txt"]
    assert third.files["a.txt"] is second.files["a.txt"] is first.files["a.txt"]


def test_a_file_changed_within_the_looks_own_tick_is_read_again(tmp_path):
    (tmp_path / "a.txt").write_text("one")
    first = look(str(tmp_path), {}, 1 << 20, blob_id)  # (written just now: not trusted by its status)
    second = look(str(tmp_path), first.files, 1 << 20, blob_id)
    assert second.changed == ["a.txt"]


def test_a_fifo_a_link_and_a_repository_inside_are_never_read_entered_or_run(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret").write_text("the host's secret")
    project = tmp_path / "project"
    project.mkdir()
    os.mkfifo(project / "pipe")
    (project / "link").symlink_to(outside / "secret")
    (project / "folder-link").symlink_to(outside)
    nested = project / "sub"
    (nested / ".git").mkdir(parents=True)
    os.mkfifo(nested / ".git" / "HEAD")  # (git would block opening it)
    (nested / ".git" / "config").write_text(f"[core]\n\tfsmonitor = touch {tmp_path}/ran\n")
    (nested / "f").write_text("inside the repository")
    (project / ".gitignore").write_text("")
    (project / "deeper").mkdir()
    os.mkfifo(project / "deeper" / ".gitignore")  # (the rules are read as data too)
    done: list[object] = []
    worker = threading.Thread(target=lambda: done.append(look(str(project), {}, 1 << 20, blob_id)), daemon=True)
    worker.start()
    worker.join(30)
    assert done, "the look blocked"
    found = done[0]
    assert set(found.files) == {"link", "folder-link", ".gitignore"}  # (links as links; no FIFO)
    assert found.unread == []  # (a FIFO is no file to read: passed over, not an error)
    assert found.files["link"].blob == blob_id(os.fsencode(outside / "secret"))  # (its target's name, not bytes)
    assert stat.S_ISLNK(found.files["folder-link"].mode)
    assert set(found.nested) == {"sub"} and not (tmp_path / "ran").exists()


def test_a_folder_swapped_for_a_link_during_a_look_is_not_followed(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("outside")
    project = tmp_path / "project"
    (project / "d").mkdir(parents=True)
    for n in range(200):
        (project / "d" / f"f{n}").write_text(str(n))
    stop = threading.Event()

    def flip() -> None:
        while not stop.is_set():
            try:
                os.rename(project / "d", project / "d.away")
                os.symlink(outside, project / "d")
                os.unlink(project / "d")
                os.rename(project / "d.away", project / "d")
            except OSError:
                pass

    flipper = threading.Thread(target=flip)
    flipper.start()
    try:
        for _ in range(50):
            found = look(str(project), {}, 1 << 20, blob_id)
            assert "d/secret.txt" not in found.files and "d.away/secret.txt" not in found.files
    finally:
        stop.set()
        flipper.join()


def test_the_first_look_lasts_across_processes_and_a_cut_one_is_continued(tmp_path, monkeypatch):
    """A store keeps its last look (what each file was, and a ref holding its blobs): the next
    Bob's first look reads only what changed since; a first look cut short (a one-shot chat that
    ended) is continued by the next one, not made again."""
    from bob_acp.cancel import Cancel
    from bob_acp.checkpoints import look as look_module
    from bob_acp.checkpoints.store import Shadow
    from bob_acp.exceptions import Cancelled

    monkeypatch.setattr(look_module, "RACY_NS", 0)  # (files written just before: trusted all the same)
    project, store = tmp_path / "project", str(tmp_path / "store")
    for folder in range(30):
        (project / f"d{folder:02}").mkdir(parents=True)
        for n in range(20):
            (project / f"d{folder:02}" / f"f{n}.txt").write_text(f"{folder}-{n}\n")
    first = Shadow(str(project), store, 1 << 20, look_ref="refs/look/one/0")
    assert len(first.snapshot().changed) == 600
    first.forget_look()  # (its session ends: its own ref goes, the store's last look stays)
    second = Shadow(str(project), store, 1 << 20, look_ref="refs/look/two/0")
    (project / "d03" / "f1.txt").write_text("changed\n")
    found = second.snapshot()
    assert found.changed == ["d03/f1.txt"] and len(found.files) == 600
    assert second.blob(found.files["d07/f2.txt"].blob) == b"7-2\n"  # (its bytes kept, though not read again)

    # A first look cut short: what it read is kept, and the next one reads the rest only.
    class CutAfter(Cancel):  # (a session that ends while its first look is being made)
        asked = 0

        def is_set(self) -> bool:
            self.asked += 1
            return self.asked > 10

    fresh = str(tmp_path / "store2")
    cut = Shadow(str(project), fresh, 1 << 20, look_ref="refs/look/three/0")
    with pytest.raises(Cancelled):
        cut.snapshot(CutAfter())
    again = Shadow(str(project), fresh, 1 << 20, look_ref="refs/look/four/0")
    continued = again.snapshot()
    assert 0 < len(continued.changed) < 600 and len(continued.files) == 600
