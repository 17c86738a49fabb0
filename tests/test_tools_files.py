"""read_file, write_file, edit_file and read_skill on real files."""

import os

import pytest
import yaml

from bob_acp import config
from bob_acp.cancel import Cancel
from bob_acp.context.skills import Skill
from bob_acp.files import workspace
from bob_acp.tools import builtin as tools
from bob_acp.tools.base import ToolContext


@pytest.fixture
def ctx(tmp_path):
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump({"tools": {"maxReadBytes": 64}}))
    skill = Skill("demo", "A demo.", str(tmp_path / "skills" / "demo"), "Do the demo.\n",
                  [str(tmp_path / "skills" / "demo" / "run.sh")])
    work = tmp_path / "work"
    work.mkdir()
    return ToolContext(workspace=workspace.of(str(work)), config=config.load(str(path), env={}), skills={"demo": skill})


def call(tool, ctx, **args):
    return tools.get(tool).run(args, ctx, Cancel())


def test_registry_order_and_specs():
    assert [t.name for t in tools.TOOLS] == ["bash", "read_file", "write_file", "edit_file", "read_skill"]
    assert [s["name"] for s in tools.BUILTIN.specs()] == [t.name for t in tools.TOOLS]
    assert all(s["parameters"]["type"] == "object" and s["description"] for s in tools.BUILTIN.specs())
    assert tools.BUILTIN_NAMES == ("bash", "read_file", "write_file", "edit_file", "read_skill", "update_plan", "ask_user")
    assert [t.kind for t in tools.TOOLS] == ["execute", "read", "edit", "edit", "read"]
    assert [t.needs_permission for t in tools.TOOLS] == [True, True, True, True, False]
    # What each may do to files, declared on the tool (checkpoints, permission modes and counts read it).
    assert [t.one_file for t in tools.TOOLS] == [False, True, True, True, False]
    assert [t.changes_files for t in tools.TOOLS] == [True, False, True, True, False]
    assert not tools.PLAN.changes_files and not tools.ASK_USER.changes_files


def test_read_file_whole_offset_limit(ctx):
    with open(os.path.join(ctx.cwd, "a.txt"), "w") as handle:
        handle.write("l1\nl2\nl3\nl4\n")
    assert call("read_file", ctx, path="a.txt").output == "l1\nl2\nl3\nl4\n"
    result = call("read_file", ctx, path="a.txt", offset=2, limit=2)
    assert result.output.startswith("l2\nl3\n") and "continue with offset 4" in result.output


def test_read_file_cap_binary_dir_missing_home(ctx, tmp_path, monkeypatch):
    with open(os.path.join(ctx.cwd, "big.txt"), "w") as handle:
        handle.write("".join(f"line {i}\n" for i in range(100)))
    result = call("read_file", ctx, path="big.txt")
    assert result.output.startswith("line 0\n") and "cut at 64 bytes" in result.output and "continue with offset" in result.output
    with open(os.path.join(ctx.cwd, "long.txt"), "w") as handle:
        handle.write("x" * 500 + "\nnext\n")
    result = call("read_file", ctx, path="long.txt")
    assert "line 1 alone is longer than the 64-byte cap" in result.output
    with open(os.path.join(ctx.cwd, "bin"), "wb") as handle:
        handle.write(b"\x00\x01\x02")
    assert "binary" in call("read_file", ctx, path="bin").output
    assert call("read_file", ctx, path=".").failed
    missing = call("read_file", ctx, path="nope.txt")
    assert missing.failed and "No such file" in missing.output
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / "h.txt").write_text("home")
    assert call("read_file", ctx, path="~/h.txt").output == "home"


def test_write_file_new_and_existing_with_diffs(ctx):
    path = os.path.join(ctx.cwd, "deep", "dir", "f.txt")
    first = call("write_file", ctx, path="deep/dir/f.txt", content="one\n")
    assert not first.failed and open(path).read() == "one\n"
    assert (first.diff.path, first.diff.old_text, first.diff.new_text) == (path, None, "one\n")
    second = call("write_file", ctx, path="deep/dir/f.txt", content="two\n")
    assert (second.diff.old_text, second.diff.new_text) == ("one\n", "two\n")
    assert [loc.path for loc in tools.get("write_file").locations({"path": "deep/dir/f.txt"}, ctx.workspace)] == [path]


def test_write_file_keeps_mode_and_follows_symlinks(ctx):
    real = os.path.join(ctx.cwd, "real.sh")
    with open(real, "w") as handle:
        handle.write("old")
    os.chmod(real, 0o755)
    os.symlink(real, os.path.join(ctx.cwd, "link.sh"))
    call("write_file", ctx, path="link.sh", content="new")
    assert os.path.islink(os.path.join(ctx.cwd, "link.sh")) and open(real).read() == "new"
    assert os.stat(real).st_mode & 0o777 == 0o755
    assert [n for n in os.listdir(ctx.cwd) if n.endswith(".tmp")] == []


def test_edit_file_rules(ctx):
    path = os.path.join(ctx.cwd, "e.txt")
    with open(path, "w") as handle:
        handle.write("a b a\r\nc\r\n")
    once = call("edit_file", ctx, path="e.txt", old_string="c", new_string="C")
    assert not once.failed and open(path, newline="").read() == "a b a\r\nC\r\n"
    assert once.diff.old_text == "a b a\r\nc\r\n"
    many = call("edit_file", ctx, path="e.txt", old_string="a", new_string="x")
    assert many.failed and "appears 2 times" in many.output
    every = call("edit_file", ctx, path="e.txt", old_string="a", new_string="x", replace_all=True)
    assert not every.failed and open(path, newline="").read() == "x b x\r\nC\r\n"
    assert "not found" in call("edit_file", ctx, path="e.txt", old_string="zzz", new_string="y").output
    assert "empty" in call("edit_file", ctx, path="e.txt", old_string="", new_string="y").output
    assert "no such file" in call("edit_file", ctx, path="none.txt", old_string="a", new_string="b").output


@pytest.mark.parametrize("name, args, problem", [
    ("read_file", {}, "'path'"), ("read_file", {"path": 3}, "'path'"), ("read_file", {"path": "a", "offset": "2"}, "'offset'"),
    ("write_file", {"path": "a"}, "'content'"), ("edit_file", {"path": "a", "old_string": "x"}, "'new_string'"),
    ("edit_file", {"path": "a", "old_string": "x", "new_string": "y", "replace_all": "yes"}, "'replace_all'"),
    ("read_file", {"path": "a\x00b"}, "NUL"),
])
def test_argument_errors_are_results(ctx, name, args, problem):
    result = tools.get(name).run(args, ctx, Cancel())
    assert result.failed and problem in result.output


def test_read_skill(ctx):
    result = call("read_skill", ctx, name="demo")
    assert "Do the demo." in result.output and ctx.skills["demo"].files[0] in result.output
    unknown = call("read_skill", ctx, name="nope")
    assert unknown.failed and "demo" in unknown.output
    assert tools.get("read_skill").title({"name": "demo"}) == "read_skill: demo"


def test_an_unasked_write_never_follows_a_link_out_of_the_project(ctx, tmp_path):
    """A write that runs unasked because it stays in the project (ctx.confine) is made through
    descriptors from the project's root: a link flipped between a folder inside and one outside
    in a loop, against a thousand writes, never carries one out (write_file and edit_file), and
    a link that points inside is followed as before."""
    import threading
    import uuid

    work = ctx.workspace.cwd
    inside, outside = os.path.join(work, "inside"), tmp_path / "outside"
    os.mkdir(inside)
    outside.mkdir()
    link = os.path.join(work, "target")
    os.symlink(inside, link)
    (outside / "victim.txt").write_text("keep\n")
    with open(os.path.join(inside, "victim.txt"), "w") as handle:
        handle.write("keep\n")
    stop = threading.Event()

    def flip():
        while not stop.is_set():
            for where in (str(outside), inside):
                temp = os.path.join(work, f".flip-{uuid.uuid4().hex[:8]}")
                os.symlink(where, temp)
                os.replace(temp, link)

    ctx.confine = True
    flipper = threading.Thread(target=flip, daemon=True)
    flipper.start()
    try:
        results = [call("write_file", ctx, path=f"target/f{i}.txt", content="x") for i in range(1000)]
        results += [call("edit_file", ctx, path="target/victim.txt", old_string="keep", new_string="changed")
                    for _ in range(50)]
    finally:
        stop.set()
        flipper.join(5)
    assert sorted(os.listdir(outside)) == ["victim.txt"] and (outside / "victim.txt").read_text() == "keep\n"
    written = [r for r in results if not r.failed]
    refused = [r for r in results if r.failed]
    assert written and all("a link changed since" in r.output or "not found" in r.output for r in refused)
    os.unlink(link)
    os.symlink("inside/victim.txt", os.path.join(work, "alias.txt"))
    assert not call("write_file", ctx, path="alias.txt", content="through a link inside\n").failed
    assert open(os.path.join(inside, "victim.txt")).read() == "through a link inside\n"
    assert os.path.islink(os.path.join(work, "alias.txt"))
    for protected in (".git/config", ".bob/skills/x/SKILL.md", "AGENTS.md", "sub/AGENTS.md"):
        result = call("write_file", ctx, path=protected, content="x")
        assert result.failed and "not written unasked" in result.output, protected
        assert not os.path.exists(os.path.join(work, protected))
