"""The bash tool with real processes: output, exit codes, limits, timeouts, cancel, cleanup."""

import os
import threading
import time
import uuid

import pytest
import yaml
from procs import wait_gone, wait_present

from bob_acp import config
from bob_acp.cancel import Cancel
from bob_acp.exceptions import Cancelled
from bob_acp.files import workspace
from bob_acp.tools import bash
from bob_acp.tools.base import ToolContext

TOOL = bash.BashTool()


@pytest.fixture
def ctx(tmp_path):
    def make(**tools):
        path = tmp_path / "config.yaml"
        path.write_text(yaml.safe_dump({"tools": {"bash": tools}} if tools else {}))
        # bash gets a small environment of the test's own, not the developer's whole one
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(tmp_path), "LANG": "C.UTF-8"}
        return ToolContext(workspace=workspace.of(str(tmp_path)), config=config.load(str(path), env={}), env=env)
    return make


def run(ctx, command, cancel=None, **args):
    return TOOL.run({"command": command, **args}, ctx, cancel or Cancel())


def marker():
    return str(int(uuid.uuid4().hex[:8], 16))[:8]


def test_output_is_merged_in_order_with_the_exit_code(ctx):
    result = run(ctx(), "echo out; echo err >&2; echo out2")
    assert result.output == "out\nerr\nout2\n[exit code: 0]" and not result.failed
    result = run(ctx(), "echo nope; exit 3")
    assert result.output == "nope\n[exit code: 3]" and result.failed


def test_it_runs_in_the_session_cwd_with_stdin_at_dev_null(ctx, tmp_path):
    started = time.monotonic()
    result = run(ctx(), "pwd; cat; echo done")
    assert result.output == f"{tmp_path}\ndone\n[exit code: 0]"
    assert time.monotonic() - started < 5


def test_long_output_keeps_head_and_tail_around_a_marker(ctx):
    result = run(ctx(outputLimit=1000), "seq 1 100000")
    assert result.output.startswith("1\n2\n3\n")
    assert "100000\n[exit code: 0]" in result.output
    assert "characters cut" in result.output
    assert len(result.output) < 1200


def test_a_gigabyte_of_output_keeps_memory_flat(ctx):
    def hwm():
        with open("/proc/self/status") as handle:
            return next(int(l.split()[1]) for l in handle if l.startswith("VmHWM")) * 1024
    before = hwm()
    result = run(ctx(), "head -c 1073741824 /dev/zero | tr '\\0' 'x'")
    assert result.output.endswith("[exit code: 0]") and "characters cut" in result.output
    assert hwm() - before < 20 * 1024 * 1024


def test_timeout_kills_the_whole_tree(ctx):
    m = marker()
    started = time.monotonic()
    result = run(ctx(), f"echo begun; sleep 300.{m} & (sleep 301.{m} &); sleep 302.{m}", timeout=1)
    assert time.monotonic() - started < 4
    assert result.failed and result.output.startswith("begun\n") and "[timed out after 1 s: process group killed]" in result.output
    assert wait_gone(m) == []


def test_cancel_kills_the_tree_at_once(ctx):
    m = marker()
    cancel = Cancel()
    errors = []

    def target():
        try:
            run(ctx(), f"sleep 300.{m} & sleep 301.{m}", cancel)
        except Cancelled:
            errors.append("cancelled")

    thread = threading.Thread(target=target)
    thread.start()
    wait_present(m, count=2)
    started = time.monotonic()
    cancel.set()
    thread.join(10)
    assert errors == ["cancelled"] and time.monotonic() - started < 5  # the command sleeps 300 s
    assert wait_gone(m) == []


def test_a_background_child_holding_the_pipe_does_not_hang(ctx):
    m = marker()
    started = time.monotonic()
    result = run(ctx(), f"sleep 300.{m} & echo hi")
    assert result.output == "hi\n[exit code: 0]" and time.monotonic() - started < 3
    assert wait_gone(m) == []


def test_utf8_split_across_reads(ctx):
    result = run(ctx(), "printf 'caf\\303'; sleep 0.2; printf '\\251 ok\\n'")
    assert result.output == "café ok\n[exit code: 0]"


def test_kill_all_ends_running_commands(ctx):
    m = marker()
    results = []
    thread = threading.Thread(target=lambda: results.append(run(ctx(), f"sleep 300.{m}")))
    thread.start()
    wait_present(m)
    deadline = time.monotonic() + 30
    while thread.is_alive() and time.monotonic() < deadline:
        bash.kill_all()  # (a command is registered just after it starts: called until it was)
        thread.join(0.1)
    assert results and results[0].failed and wait_gone(m) == []


@pytest.mark.parametrize("args, problem", [
    ({}, "command"), ({"command": ""}, "command"), ({"command": 5}, "command"),
    ({"command": "true", "timeout": -1}, "timeout"), ({"command": "true", "timeout": "soon"}, "timeout"),
])
def test_bad_arguments_are_results(ctx, args, problem):
    result = TOOL.run(args, ctx(), Cancel())
    assert result.failed and problem in result.output


def test_title_and_kind():
    assert TOOL.title({"command": "ls -la"}) == "bash: ls -la" and TOOL.kind == "execute" and TOOL.needs_permission
