"""The framing layer: capped line reading and the single writer."""

import io
import os
import threading

import orjson

from bob_acp.jsonrpc.streams import Oversized, Writer, read_frames


def test_lines_are_split_without_newlines():
    frames = list(read_frames(io.BytesIO(b'{"a":1}\n{"b":2}\nlast')))
    assert frames == [b'{"a":1}', b'{"b":2}', b"last"]


def test_a_line_over_the_cap_is_reported_by_size_and_reading_goes_on():
    data = b"x" * 100 + b"\n" + b"y" * 10 + b"\n"
    frames = list(read_frames(io.BytesIO(data), max_frame=50))
    assert isinstance(frames[0], Oversized) and frames[0].size == 100
    assert frames[1] == b"y" * 10


def test_a_line_exactly_at_the_cap_is_kept():
    frames = list(read_frames(io.BytesIO(b"z" * 50 + b"\n"), max_frame=50))
    assert frames == [b"z" * 50]


def test_an_oversized_last_line_without_newline_ends_reading():
    frames = list(read_frames(io.BytesIO(b"q" * 200), max_frame=50))
    assert len(frames) == 1 and isinstance(frames[0], Oversized)


def test_writer_writes_each_frame_whole_and_in_order_from_many_threads():
    read_fd, write_fd = os.pipe()
    writer = Writer(write_fd)
    chunks = []
    reader = threading.Thread(target=lambda: chunks.append(_read_all(read_fd)))
    reader.start()

    def produce(n):
        for i in range(500):
            writer.send(orjson.dumps({"thread": n, "i": i, "pad": "p" * (i % 50)}))

    threads = [threading.Thread(target=produce, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert writer.close(timeout=5)
    os.close(write_fd)
    reader.join(5)
    os.close(read_fd)
    lines = chunks[0].split(b"\n")
    assert lines[-1] == b""
    frames = [orjson.loads(line) for line in lines[:-1]]
    assert len(frames) == 2000
    for n in range(4):
        assert [f["i"] for f in frames if f["thread"] == n] == list(range(500))


def test_writer_close_reports_a_client_that_stopped_reading():
    read_fd, write_fd = os.pipe()
    writer = Writer(write_fd)
    for _ in range(200):
        writer.send(b"x" * 4096)  # far more than a pipe holds
    assert writer.close(timeout=0.3) is False
    os.close(read_fd)  # the writer's blocked write now fails with EPIPE and the thread ends
    writer._done.wait(2)
    assert writer.broken
    os.close(write_fd)


def _read_all(fd):
    out = []
    while True:
        data = os.read(fd, 65536)
        if not data:
            return b"".join(out)
        out.append(data)
