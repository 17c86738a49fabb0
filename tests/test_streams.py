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


# ---- a descriptor: lines across reads, marks between reads ------------------------------------------

def _frames_from_pipe(chunks, max_frame=50, marks=False):
    """read_frames on a pipe written chunk by chunk (each chunk its own read, as a client's
    writes arrive), the writer waiting until the reader took the previous one."""
    import select

    read_fd, write_fd = os.pipe()
    stream = os.fdopen(read_fd, "rb", buffering=1 << 16)
    reads = []
    out = []

    def write():
        for chunk in chunks:
            os.write(write_fd, chunk)
            deadline = 100
            while select.select([read_fd], [], [], 0)[0] and deadline:  # until the reader took it
                threading.Event().wait(0.005)
                deadline -= 1
        os.close(write_fd)

    writer = threading.Thread(target=write)
    writer.start()
    from bob_acp.jsonrpc.streams import FLUSH

    for frame in read_frames(stream, max_frame=max_frame, marks=marks, on_read=lambda: reads.append(1)):
        out.append("FLUSH" if frame is FLUSH else frame)
    writer.join(5)
    stream.close()
    return out, len(reads)


def test_on_a_descriptor_lines_split_across_reads_are_joined_and_marks_come_between_reads():
    out, reads = _frames_from_pipe([b'{"a":1}\n{"b"', b':2}\n{"c":3}\n', b"last"], marks=True)
    assert [f for f in out if f != "FLUSH"] == [b'{"a":1}', b'{"b":2}', b'{"c":3}', b"last"]
    assert out.count("FLUSH") == reads == 3  # one mark after each read's lines
    assert out.index("FLUSH") == 1  # the first read held one whole line


def test_on_a_descriptor_a_line_over_the_cap_across_reads_is_refused_by_size_and_reading_goes_on():
    out, _ = _frames_from_pipe([b"ok\n" + b"x" * 40, b"x" * 40, b"x" * 40 + b"\nnext\n", b"y" * 60, b"\n"])
    assert out[0] == b"ok"
    assert isinstance(out[1], Oversized) and out[1].size == 120 and out[1].head == b"x" * 80 and out[1].tail == b"x" * 120
    assert out[2] == b"next"
    assert isinstance(out[3], Oversized) and out[3].size == 60
    out, _ = _frames_from_pipe([b"z" * 50 + b"\n", b"q" * 30, b"q" * 30])  # at the cap; an oversized last line
    assert out[0] == b"z" * 50 and isinstance(out[1], Oversized) and out[1].size == 60 and len(out) == 2


def test_on_a_descriptor_the_ends_of_an_oversized_line_are_kept_for_its_id():
    head = b'{"jsonrpc":"2.0","id":7,"result":"'
    out, _ = _frames_from_pipe([head + b"a" * 100, b"a" * 100 + b'"}\n'], max_frame=64)
    assert isinstance(out[0], Oversized) and out[0].head.startswith(head) and out[0].tail.endswith(b'"}')
