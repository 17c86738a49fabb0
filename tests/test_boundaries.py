"""Where data enters Bob: files, file names, the environment, model streams, session files
(issue 13). Each case was reproduced against 0.11.0 and is refused or made safe here."""

from __future__ import annotations

import os
import time

import pytest
import yaml
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from bob_acp import config, sessions
from bob_acp.cancel import Cancel
from bob_acp.context import history
from bob_acp.context.skills import Skill
from bob_acp.exceptions import ModelError
from bob_acp.files import workspace
from bob_acp.jsonrpc import codec
from bob_acp.providers import anthropic, openai
from bob_acp.providers import http as http_module
from bob_acp.providers.base import ModelReply, Quiet, ToolCall
from bob_acp.tools import files
from bob_acp.tools.base import ToolContext
from bob_acp.tools.skill import ReadSkillTool


@pytest.fixture
def ctx(tmp_path):
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump({"tools": {"maxReadBytes": 64}}))
    work = tmp_path / "work"
    work.mkdir()
    return ToolContext(workspace=workspace.of(str(work)), config=config.load(str(path), env={}),
                       env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(work), "LANG": "C.UTF-8"})


# ---- files ------------------------------------------------------------------------------------

def test_edit_file_changes_only_the_bytes_it_was_asked_to(ctx):
    path = os.path.join(ctx.cwd, "latin1.txt")
    with open(path, "wb") as handle:
        handle.write(b"caf\xe9 cr\xe8me\nline two\n")
    result = files.EditFileTool().run({"path": "latin1.txt", "old_string": "line two", "new_string": "LINE TWO"},
                                      ctx, Cancel())
    assert not result.failed and "not valid UTF-8" in result.output
    with open(path, "rb") as handle:
        assert handle.read() == b"caf\xe9 cr\xe8me\nLINE TWO\n"  # every other byte as it was
    assert result.diff.old_text == "caf\ufffd cr\ufffdme\nline two\n"  # shown safely, never written
    codec.dumps({"diff": result.diff.old_text})


def test_edit_file_refuses_a_binary_file_and_leaves_it_alone(ctx):
    path = os.path.join(ctx.cwd, "blob.bin")
    data = bytes(range(256)) * 8 + b"marker\n"
    with open(path, "wb") as handle:
        handle.write(data)
    result = files.EditFileTool().run({"path": "blob.bin", "old_string": "marker", "new_string": "x"}, ctx, Cancel())
    assert result.failed and "binary file" in result.output
    with open(path, "rb") as handle:
        assert handle.read() == data


@pytest.mark.parametrize("target", ["/dev/zero", "/dev/urandom", "/dev/null"])
def test_devices_are_refused_directly_and_through_links(ctx, target):
    os.symlink(target, os.path.join(ctx.cwd, "dev"))
    for args in ({"path": target}, {"path": "dev"}, {"path": "dev", "offset": 3}):
        result = files.ReadFileTool().run(args, ctx, Cancel())
        assert result.failed and "character device" in result.output, args


def test_every_read_is_bounded_by_max_read_bytes_also_while_skipping(ctx, monkeypatch):
    path = os.path.join(ctx.cwd, "lines.txt")
    with open(path, "w") as handle:
        handle.write("".join(f"{n}\n" for n in range(1, 2001)))
    reads = []
    real_open = files.open_regular

    def spying(p):
        handle = real_open(p)
        original = handle.read

        def read(size=-1):
            reads.append(size)
            return original(size)

        handle.read = read
        return handle

    monkeypatch.setattr(files, "open_regular", spying)
    result = files.ReadFileTool().run({"path": "lines.txt", "offset": 1500, "limit": 2}, ctx, Cancel())
    assert result.output.startswith("1500\n1501\n")
    assert reads and all(0 < size <= 65 for size in reads)  # maxReadBytes 64 (+1 to see it was cut)


def test_pages_count_lines_one_way_whatever_the_line_ends(ctx):
    """Form feeds, bare CRs (progress bars) and U+0085 are not line ends for offset, limit or
    the note: paging through a file loses nothing."""
    text = "a\fb\nprogress 1%\rprogress 99%\nnext\u0085line\nlast\n"
    with open(os.path.join(ctx.cwd, "odd.txt"), "w", newline="") as handle:
        handle.write(text)
    ctx.config = config.defaults()
    pages, offset = [], 1
    while True:
        result = files.ReadFileTool().run({"path": "odd.txt", "offset": offset, "limit": 1}, ctx, Cancel())
        if "nothing at offset" in result.output:
            break
        pages.append(result.output.split("\n[showing")[0])
        offset += 1
    assert "".join(pages) == text


# ---- names from the file system and the environment --------------------------------------------

def test_a_file_name_that_is_not_utf8_is_shown_safely(tmp_path):
    folder = tmp_path / "skills" / "odd"
    folder.mkdir(parents=True)
    raw = os.path.join(os.fsencode(str(folder)), b"\xff\xfe.sh")
    with open(raw, "wb") as handle:
        handle.write(b"#!/bin/sh\n")
    skill = Skill("odd", "Odd names.", str(folder), "Run it.\n")
    ctx = ToolContext(workspace=workspace.of(str(tmp_path)), config=config.defaults(), skills={"odd": skill})
    result = ReadSkillTool().run({"name": "odd"}, ctx, Cancel())
    assert "\ufffd\ufffd.sh" in result.output
    codec.dumps({"output": result.output})  # encodes: it can reach a frame and the history


def test_a_home_that_is_not_utf8_never_breaks_a_frame(ctx, monkeypatch):
    monkeypatch.setenv("HOME", os.fsdecode(b"/tmp/h\xe9me"))
    locations = files.WriteFileTool().locations({"path": "~/notes.txt"}, ctx.workspace)
    assert locations[0].path == "/tmp/h\ufffdme/notes.txt"


# ---- model streams -----------------------------------------------------------------------------

def sse(*payloads):
    lines = []
    for payload in payloads:
        lines += [f"data: {payload if isinstance(payload, str) else codec.dumps(payload).decode()}", ""]
    return lines


def delta(**fields):
    return {"choices": [{"index": 0, "delta": fields}]}


FINISH = {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}


class Recorder(Quiet):
    def __init__(self):
        self.texts, self.thoughts = [], []

    def text(self, chunk):
        self.texts.append(chunk)

    def thought(self, chunk):
        self.thoughts.append(chunk)


def test_openai_stream_shapes_that_mean_something_are_accepted():
    stream = Recorder()
    reply = openai.read_stream(sse(
        delta(reasoning_content="thinking "), delta(reasoning="more"),
        delta(content=[{"type": "text", "text": "parts "}, {"type": "image_url"}]),
        '{"choices":[{"index":0,"delta":{"content":"\\ud83d"}}]}', '{"choices":[{"index":0,"delta":{"content":"\\ude00!"}}]}',
        delta(tool_calls=[{"index": 0, "id": 7, "function": {"name": "bash", "arguments": {"command": "ls"}}}]),
        delta(tool_calls=[{"index": "1", "id": "c2", "function": {"name": "read_file", "arguments": '{"path":"a\\udc00"}'}}]),
        FINISH, "[DONE]"), stream)
    assert stream.thoughts == ["thinking ", "more"]
    assert reply.text == "parts 😀!" and stream.texts == ["parts ", "😀!"]  # the split pair joined
    assert [(c.id, c.name, c.arguments) for c in reply.tool_calls] == [
        ("7", "bash", {"command": "ls"}), ("c2", "read_file", {"path": "a\ufffd"})]


@pytest.mark.parametrize("event, problem", [
    (delta(content=5), "delta.content is a int"),
    ({"choices": {"0": {}}}, "choices is not a list"),
    ({"choices": [{"delta": "x"}]}, "delta is not an object"),
    (delta(tool_calls=[{"index": 0, "id": "a", "function": {"name": 5}}]), "name is not a string"),
    (delta(tool_calls=[{"index": 0.5}]), "index is not a number"),
    (delta(tool_calls="x"), "tool_calls is not a list"),
    (delta(tool_calls=[{"index": 0, "function": {"name": "a", "arguments": [1]}}]), "neither text nor an object"),
])
def test_openai_stream_shapes_that_mean_nothing_are_one_line_errors(event, problem):
    with pytest.raises(ModelError, match=problem):
        openai.read_stream(sse(event, FINISH, "[DONE]"), Quiet())


def named(kind, **fields):
    return {"type": kind, **fields}


def test_anthropic_stream_shapes():
    stream = Recorder()
    reply = anthropic.read_stream(sse(
        named("message_start", message={"usage": {"input_tokens": 3, "cache_read_input_tokens": 90}}),
        named("content_block_start", index=0, content_block={"type": "thinking", "thinking": ""}),
        named("content_block_delta", index=0, delta={"type": "thinking_delta", "thinking": "Let me think."}),
        named("content_block_delta", index=0, delta={"type": "signature_delta", "signature": "sig=="}),
        named("content_block_start", index=1, content_block={"type": "tool_use", "id": "t1", "name": "bash",
                                                             "input": {"command": "pwd"}}),
        named("message_delta", usage={"output_tokens": 12}), named("message_stop")), stream)
    assert stream.thoughts == ["Let me think."] and stream.texts == []
    assert reply.thinking == [{"type": "thinking", "thinking": "Let me think.", "signature": "sig=="}]
    assert [(c.id, c.arguments) for c in reply.tool_calls] == [("t1", {"command": "pwd"})]
    assert (reply.usage.input, reply.usage.cache_read, reply.usage.output) == (93, 90, 12)
    with pytest.raises(ModelError, match="text_delta.text is not text"):
        anthropic.read_stream(sse(named("content_block_delta", index=0, delta={"type": "text_delta", "text": 3}),
                                  named("message_stop")), Quiet())


payloads = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-2**63, 2**63 - 1), st.text(max_size=6),
              st.sampled_from(["text_delta", "input_json_delta", "tool_use", "thinking_delta", "message_stop",
                               "content_block_start", "content_block_delta", "stop", "[DONE]"])),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.sampled_from(
        ["choices", "delta", "content", "tool_calls", "index", "id", "function", "name", "arguments", "type",
         "text", "partial_json", "content_block", "input", "usage", "finish_reason", "message", "error",
         "reasoning", "signature", "thinking"]), inner, max_size=4)), max_leaves=10)


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck),
          derandomize=bool(os.environ.get("CI")))
@given(events=st.lists(st.one_of(payloads, st.just("[DONE]"), st.text(max_size=8)), max_size=6),
       which=st.sampled_from(["openai", "anthropic"]))
def test_no_stream_whatever_its_shapes_raises_anything_but_a_model_error(events, which):
    lines = []
    for event in events:
        lines += [f"data: {event if isinstance(event, str) else codec.dumps(event).decode()}", ""]
    reader = openai.read_stream if which == "openai" else anthropic.read_stream
    try:
        reply = reader(lines, Quiet())
    except ModelError as exc:
        assert "\n" not in str(exc)
        return
    assert isinstance(reply, ModelReply)
    codec.dumps([[c.id, c.name, c.arguments] for c in reply.tool_calls])


def test_a_body_without_a_line_end_is_read_in_linear_time():
    """60 MiB and not one newline: 0.11.0 rescanned the whole buffer on every read (quadratic;
    32 MiB took a minute); this finishes long before the test's time limit."""
    chunk = b"x" * 65536

    class Raw:
        left = 960

        def read1(self, _size):
            if not self.left:
                return b""
            self.left -= 1
            return chunk

    lines = list(http_module.arriving_lines(Raw()))
    assert len(lines) == 1 and len(lines[0]) == 960 * 65536


# ---- what Bob saves, Bob loads -------------------------------------------------------------------

tool_ids = st.one_of(st.text(min_size=1, max_size=12), st.integers(-10**6, 10**6))
arguments = st.dictionaries(st.text(max_size=6), st.one_of(st.text(max_size=12), st.integers(), st.none()), max_size=3)
texts = st.text(max_size=30).map(lambda t: t.replace("\x00", ""))


@settings(max_examples=100, deadline=None, suppress_health_check=list(HealthCheck),
          derandomize=bool(os.environ.get("CI")))
@given(replies=st.lists(st.tuples(texts, st.lists(st.tuples(tool_ids, st.sampled_from(["bash", "nope", "read_skill"]),
                                                             arguments), max_size=2)), min_size=1, max_size=4),
       question=texts)
@example(replies=[("", [("0", "bash", {}), ("0", "bash", {})])] * 3, question="")  # a model giving two calls one id
def test_every_history_the_engine_produces_round_trips_through_save_and_load(tmp_path_factory, replies, question):
    from bob_acp.engine import Engine

    folder = tmp_path_factory.mktemp("roundtrip")
    planned = [ModelReply(text, [ToolCall(i, name, args) for i, name, args in calls]) for text, calls in replies]
    planned.append(ModelReply("the end"))

    class Provider:
        def generate(self, messages, tools, stream, cancel, model=None, reasoning=None):
            reply = planned.pop(0) if planned else ModelReply("done")
            stream.text(reply.text)
            return reply

    class Sink:
        def __getattr__(self, name):
            return lambda *args: "reject" if name == "permission" else None

    engine = Engine(config.defaults(), Provider())
    from bob_acp.context.skills import Catalog
    conv = engine.new_conversation(workspace.of(str(folder)), Catalog())
    engine.run_turn(conv, codec.clean(question), Sink(), Cancel())
    store = sessions.SessionStore(str(folder), ".bob/sessions")
    sid = sessions.new_id()
    store.save(sid, conv.messages)
    assert store.load(sid).messages == codec.clean_tree(conv.messages)


@pytest.mark.parametrize("target", ["/dev/zero", "fifo"])
def test_a_session_file_that_is_not_a_regular_file_is_refused_at_once(tmp_path, target):
    store = sessions.SessionStore(str(tmp_path), "s")
    sid = sessions.new_id()
    os.makedirs(store.folder)
    if target == "fifo":
        os.mkfifo(store.path_for(sid))
    else:
        os.symlink(target, store.path_for(sid))
    started = time.monotonic()
    with pytest.raises(sessions.SessionLoadError, match="not a regular file"):
        store.load(sid)
    assert time.monotonic() - started < 5


def test_a_number_as_a_tool_call_id_is_saved_as_text(tmp_path):
    call = ToolCall(12345, "bash", {"command": "ls"})
    assert call.id == "12345"
    store = sessions.SessionStore(str(tmp_path), "s")
    sid = sessions.new_id()
    recorded = {"id": call.id, "ref": "call_1", "name": call.name, "arguments": call.arguments}
    store.save(sid, [history.system("s"), history.user("u"), history.assistant("", [recorded]),
                     history.tool_result(recorded, "ok")])
    assert store.load(sid).messages[2]["tool_calls"][0]["id"] == "12345"
