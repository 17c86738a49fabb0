"""Races and leaks found by reading the code, each shown in isolation (issue 12)."""

from __future__ import annotations

import os
import stat
import threading
import time

import pytest
import yaml

from bob_acp import config, log
from bob_acp.acp.turn_queue import TurnQueue
from bob_acp.cancel import Cancel
from bob_acp.exceptions import Cancelled
from bob_acp.files import atomic, workspace
from bob_acp.jsonrpc.streams import Writer
from bob_acp.tools import files
from bob_acp.tools.base import ToolContext, run_in_worker


@pytest.fixture
def ctx(tmp_path):
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump({}))
    work = tmp_path / "work"
    work.mkdir()
    return ToolContext(workspace=workspace.of(str(work)), config=config.load(str(path), env={}),
                       env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(work), "LANG": "C.UTF-8"})


# ---- 1. the umask is never changed -----------------------------------------------------------

def test_atomic_write_never_touches_the_umask(tmp_path, monkeypatch):
    """os.umask can only be read by setting it: a file another thread creates in that window
    gets the temporary mask. Bob reads it once, from /proc."""
    current = os.umask(0o022)
    os.umask(current)
    assert atomic.UMASK == current

    def forbidden(_mask):
        raise AssertionError("os.umask called while other threads may be creating files")

    monkeypatch.setattr(os, "umask", forbidden)
    atomic.atomic_write(str(tmp_path / "new.txt"), b"x")
    assert stat.S_IMODE(os.stat(tmp_path / "new.txt").st_mode) == 0o666 & ~current


# ---- 2. file tools cannot hang a turn or outlive it -----------------------------------------

def test_a_fifo_is_refused_at_once_not_read_forever(ctx):
    fifo = os.path.join(ctx.cwd, "pipe")
    os.mkfifo(fifo)
    started = time.monotonic()
    result = files.ReadFileTool().run({"path": "pipe"}, ctx, Cancel())
    assert result.failed and "is a FIFO" in result.output and "regular files only" in result.output
    assert time.monotonic() - started < 5
    edit = files.EditFileTool().run({"path": "pipe", "old_string": "a", "new_string": "b"}, ctx, Cancel())
    assert edit.failed and "FIFO" in edit.output


def test_write_file_never_replaces_a_device_behind_a_symlink(ctx):
    os.symlink("/dev/null", os.path.join(ctx.cwd, "null"))
    result = files.WriteFileTool().run({"path": "null", "content": "x"}, ctx, Cancel())
    assert result.failed and "character device" in result.output
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)  # (as root, the node itself would have been replaced)


def test_a_cancelled_write_happens_before_the_answer_or_not_at_all(ctx, monkeypatch):
    """The write commits only while the turn is not cancelled, and a cancelled call waits for a
    commit already under way: nothing changes the file after the turn has answered."""
    path = os.path.join(ctx.cwd, "f.txt")
    cancel = Cancel()
    cancel.set()
    with pytest.raises(Cancelled):
        files.WriteFileTool().run({"path": "f.txt", "content": "late"}, ctx, cancel)
    assert not os.path.exists(path)

    started, release = threading.Event(), threading.Event()
    real_fsync = os.fsync

    def slow_fsync(fd):
        started.set()
        release.wait(5)  # the disk is slow: the cancel comes while the data is being flushed
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", slow_fsync)
    cancel = Cancel()
    threading.Thread(target=lambda: (started.wait(5), cancel.set(), release.set())).start()
    with pytest.raises(Cancelled):
        files.WriteFileTool().run({"path": "f.txt", "content": "also late"}, ctx, cancel)
    monkeypatch.setattr(os, "fsync", real_fsync)
    assert not os.path.exists(path) and not [n for n in os.listdir(ctx.cwd) if n.endswith(".tmp")]


def test_a_read_is_bounded_in_time():
    stuck = threading.Event()
    result = run_in_worker(lambda _cancel: stuck.wait(10), Cancel(), time_limit=0.2, what="read_file of 'x'")
    stuck.set()
    assert result.failed and "took longer than 0.2 s" in result.output


def test_skipping_to_an_offset_reads_in_bounded_chunks_and_stops_at_a_cancel(ctx, monkeypatch):
    path = os.path.join(ctx.cwd, "one-line.txt")
    with open(path, "wb") as handle:
        handle.write(b"x" * (8 * 1024 * 1024) + b"\nsecond\n")
    sizes = []
    real = files._skip_lines

    class Spy:
        def __init__(self, handle):
            self.handle = handle

        def read(self, size=-1):
            sizes.append(size)
            return self.handle.read(size)

    monkeypatch.setattr(files, "_skip_lines", lambda handle, count, cancel, size=files.SKIP_CHUNK: real(Spy(handle), count, cancel, size))
    result = files.ReadFileTool().run({"path": "one-line.txt", "offset": 2}, ctx, Cancel())
    assert result.output.startswith("second\n")
    assert sizes and max(sizes) <= files.SKIP_CHUNK  # never one unbounded readline()
    cancel = Cancel()
    cancel.set()
    with pytest.raises(Cancelled):
        files._skip_lines(open(path, "rb"), 5, cancel)


# ---- 3. turns run in arrival order -----------------------------------------------------------

def test_the_turn_queue_is_first_in_first_out_and_a_withdrawn_ticket_gives_its_place_up():
    queue = TurnQueue()
    holder = queue.enqueue()
    assert holder.granted
    tickets = [queue.enqueue() for _ in range(8)]
    order = []

    def run(n, ticket):
        if ticket.wait():
            order.append(n)
            ticket.release()

    threads = [threading.Thread(target=run, args=(n, t)) for n, t in enumerate(tickets)]
    for thread in reversed(threads):  # the threads start in the opposite order: it must not matter
        thread.start()
    tickets[3].withdraw()  # a cancel reaches a waiting prompt at once
    holder.release()
    for thread in threads:
        thread.join(5)
    assert order == [0, 1, 2, 4, 5, 6, 7]
    assert queue.enqueue().granted  # the queue is free again


# ---- 5. memory stays bounded when the client stops reading -----------------------------------

def test_the_writer_backlog_is_bounded_and_a_give_up_passes():
    read_fd, write_fd = os.pipe()
    writer = Writer(write_fd, max_backlog=256 * 1024)
    frame = b"x" * 60000
    sent = []

    def producer():
        for _ in range(40):  # 2.4 MB, far past the pipe and the bound
            sent.append(writer.send(frame))

    thread = threading.Thread(target=producer, daemon=True)
    thread.start()
    thread.join(1)
    assert thread.is_alive() and len(sent) < 20  # it waits for room instead of queueing without bound
    assert writer._backlog_bytes <= 256 * 1024 + len(frame)
    cancelled = Cancel()
    cancelled.set()
    assert writer.send(b"last words", give_up=cancelled.is_set)  # a cancelled turn's last frames pass
    drained = threading.Thread(target=lambda: _read_all(read_fd), daemon=True)
    drained.start()
    thread.join(10)
    assert not thread.is_alive() and len(sent) == 40
    writer.close(5)
    os.close(write_fd)
    drained.join(5)
    os.close(read_fd)


def _read_all(fd):
    while os.read(fd, 1 << 20):
        pass


def test_log_lines_past_the_bound_are_dropped_and_counted(monkeypatch):
    monkeypatch.setattr(log, "MAX_QUEUED", 5)
    hold = threading.Event()
    with log._log.ready:
        log._log.queue.append(lambda: hold.wait(5))  # the log thread is stuck writing
        log._log.ready.notify()
    log.setup("info")
    logger = log.get("test")
    for n in range(50):
        logger.info(f"line {n}")
    assert len(log._log.queue) <= 6 and log._log.dropped >= 40
    hold.set()
    assert log.flush(5)
    assert log._log.dropped == 0  # reported ("N log line(s) dropped") and reset


def test_a_log_line_is_stamped_with_the_time_of_its_event(capsys):
    event = {"_at": 1764763200.25}
    assert log._stamp_processor(None, "info", event) == {"timestamp": "2025-12-03T12:00:00.250000Z"}
