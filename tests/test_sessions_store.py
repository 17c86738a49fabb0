"""The session store: ids, atomic saves, validation on load, replay items, crash safety."""

import datetime
import os
import random
import signal
import subprocess
import sys
import time

import orjson
import pytest

from bob_acp import sessions
from bob_acp.context import history


def conversation():
    call = {"id": "tc1", "ref": "call_7", "name": "bash", "arguments": {"command": "ls"}}
    lost = {"id": "tc2", "ref": "call_8", "name": "read_file", "arguments": {"path": "a"}}
    return [
        history.system("sys"),
        history.summary("earlier work"),
        history.user("list files"),
        history.assistant("Looking.", [call]),
        history.tool_result(call, "a\nb\n"),
        history.assistant("", [lost]),
        history.assistant("Done."),
    ]


def test_ids_are_utc_time_sortable_and_validated():
    sid = sessions.new_id(datetime.datetime(2026, 9, 16, 10, 15, 30, tzinfo=datetime.timezone.utc))
    assert sid.startswith("20260916-101530-") and sessions.valid_id(sid)
    for bad in ("../../etc/passwd", "20260916-101530-4F2A9C1E", "20260916-101530-4f2a9c1e\x00", "x", None, 5,
                "20260916-101530-4f2a9c1e/../../x", "/20260916-101530-4f2a9c1e"):
        assert not sessions.valid_id(bad)


def test_a_bad_id_is_refused_before_any_path_is_built(tmp_path):
    store = sessions.SessionStore(str(tmp_path), ".bob/sessions")
    with pytest.raises(ValueError):
        store.path_for("../../outside")
    with pytest.raises(sessions.SessionLoadError) as info:
        store.load("../../outside")
    assert info.value.reason == "not a valid session id"


def test_save_and_load_round_trip_keeping_created_at(tmp_path):
    store = sessions.SessionStore(str(tmp_path), ".bob/sessions")
    sid = sessions.new_id()
    store.save(sid, conversation()[:3])
    first = orjson.loads((tmp_path / ".bob" / "sessions" / f"{sid}.json").read_bytes())
    assert first["version"] == 3 and first["id"] == sid and first["cwd"] == str(tmp_path)
    time.sleep(0.01)
    store.save(sid, conversation())
    loaded = store.load(sid)
    assert loaded.messages == history.repaired(conversation())
    assert loaded.created_at == first["createdAt"] and loaded.updated_at > first["updatedAt"]
    assert os.listdir(tmp_path / ".bob" / "sessions") == [f"{sid}.json"]
    ignored = (tmp_path / ".bob" / ".gitignore").read_text().splitlines()  # Bob's state stays out of git,
    assert "sessions/" in ignored and "*" not in ignored  # its skills can be committed


def test_what_is_saved_or_loaded_is_always_a_history_an_api_accepts(tmp_path):
    messages = conversation()  # call tc2 has no result before the next assistant message
    fixed = history.repaired(messages)
    assert fixed[6] == {"role": "tool", "tool_call_id": "tc2", "name": "read_file", "content": history.NOT_RUN,
                        "failed": True, "unanswered": True}
    assert history.repaired(fixed) is fixed  # a valid history is given back as it is, uncopied
    orphan = [history.system("s"), history.user("u"), {"role": "tool", "tool_call_id": "zz", "name": "bash",
                                                       "content": "?"}]
    assert history.repaired(orphan) == orphan[:2]  # a result answering no call is dropped
    # A file an older Bob wrote at a crash, mid-turn: it loads repaired.
    store = sessions.SessionStore(str(tmp_path), ".bob/sessions")
    sid = sessions.new_id()
    store.save(sid, [history.system("s")])
    path = tmp_path / ".bob" / "sessions" / f"{sid}.json"
    document = orjson.loads(path.read_bytes())
    document["messages"] = messages[:6]
    path.write_bytes(orjson.dumps(document))
    loaded = store.load(sid).messages
    assert loaded[-1]["tool_call_id"] == "tc2" and loaded[-1]["unanswered"] is True
    replay = sessions.replay_items(loaded)
    assert [(i.ref, i.output) for i in replay if i.kind == "tool"] == [("call_7", "a\nb\n"), ("call_8", None)]


@pytest.mark.parametrize("content, reason", [
    (b"{nope", "not valid JSON"),
    (b"[]", "not a session file"),
    (b'{"version": 4, "messages": []}', "unsupported session file version '4'"),
    (b'{"version": 1}', "messages: must be a list"),
    (b'{"version": 1, "messages": [{"role": "wizard", "content": "x"}]}', "malformed message 0: unknown role"),
    (b'{"version": 1, "messages": [{"role": "user", "content": 5}]}', "malformed message 0: content"),
    (b'{"version": 1, "messages": [{"role": "assistant", "content": "", "tool_calls": [{"id": "a", "name": "b", "arguments": "x"}]}]}',
     "arguments must be an object"),
    (b'{"version": 1, "messages": [{"role": "tool", "content": "x"}]}', "tool_call_id"),
])
def test_malformed_files_are_load_errors_not_crashes(tmp_path, content, reason):
    store = sessions.SessionStore(str(tmp_path), "s")
    sid = sessions.new_id()
    os.makedirs(store.folder)
    with open(store.path_for(sid), "wb") as handle:
        handle.write(content)
    with pytest.raises(sessions.SessionLoadError) as info:
        store.load(sid)
    assert reason in info.value.reason


def test_missing_file_is_a_load_error(tmp_path):
    with pytest.raises(sessions.SessionLoadError, match="not found"):
        sessions.SessionStore(str(tmp_path), "s").load(sessions.new_id())


def test_replay_items_follow_the_product_table():
    items = sessions.replay_items(conversation())
    assert [(i.kind, i.text) for i in items if i.kind != "tool"] == [
        ("agent", "🗜️ earlier work"), ("user", "list files"), ("agent", "Looking."), ("agent", "Done.")]
    tools = [i for i in items if i.kind == "tool"]
    assert (tools[0].ref, tools[0].name, tools[0].arguments, tools[0].output) == ("call_7", "bash", {"command": "ls"}, "a\nb\n")
    assert (tools[1].ref, tools[1].output) == ("call_8", None)


SAVER = r"""
import sys
from bob_acp import sessions
from bob_acp.context import history
store = sessions.SessionStore(sys.argv[1], "s")
messages = [history.system("sys")]
i = 0
while True:
    i += 1
    messages.append(history.user("message %d " % i + "x" * (i % 5000)))
    store.save(sys.argv[2], messages)
"""


def test_sigkill_while_saving_never_leaves_a_torn_file(tmp_path):
    sid = sessions.new_id()
    store = sessions.SessionStore(str(tmp_path), "s")
    rng = random.Random(7)
    path = store.path_for(sid)
    for _round in range(8):
        before = os.stat(path).st_mtime_ns if os.path.exists(path) else None
        proc = subprocess.Popen([sys.executable, "-c", SAVER, str(tmp_path), sid])
        deadline = time.monotonic() + 60  # (a busy machine starts Python slowly: its first save is waited for)
        while (not os.path.exists(path) or os.stat(path).st_mtime_ns == before) and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(rng.random() * 0.3)  # (then killed at some point of its saves)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        loaded = store.load(sid)  # parses: the old version or the new one, never a torn one
        assert loaded.messages[0] == history.system("sys")
        numbers = [int(history.text_of(m).split()[1]) for m in loaded.messages[1:]]
        assert numbers == list(range(1, len(numbers) + 1))
        for name in os.listdir(store.folder):
            assert name == f"{sid}.json" or name.startswith(".")


def test_a_save_that_fails_between_its_write_and_its_rename_leaves_the_saved_file_as_it_was(tmp_path, monkeypatch):
    """The seam of an atomic save: the new version is whole somewhere else, the old one untouched
    at its path, until the rename. A save written in place fails this every time."""
    from bob_acp.files import atomic

    store = sessions.SessionStore(str(tmp_path), "s")
    sid = sessions.new_id()
    store.save(sid, conversation()[:3])
    path = store.path_for(sid)
    before = open(path, "rb").read()
    seen = []

    def crash_at_the_rename(source, target, *args, **kwargs):
        seen.append((open(target, "rb").read() == before, orjson.loads(open(source, "rb").read())["messages"]))
        raise OSError(28, "No space left on device")  # (the process could as well die here)

    monkeypatch.setattr(atomic.os, "replace", crash_at_the_rename)
    with pytest.raises(OSError):
        store.save(sid, conversation())
    monkeypatch.undo()
    (old_untouched, new_messages), = seen
    assert old_untouched and new_messages[-1] == history.assistant("Done.")  # the new version whole, beside the old
    assert open(path, "rb").read() == before and store.load(sid).messages == conversation()[:3]
    assert not [name for name in os.listdir(store.folder) if name.endswith(".tmp")]  # the temp file removed


def test_a_version_2_file_loads_its_user_messages_as_parts_and_saves_as_version_3(tmp_path):
    """Issue 25: user content is a list of parts (text, images); a file from 0.13 (a string and an
    `images` list) loads, replays, and reaches the model as before."""
    from bob_acp.providers import openai

    store = sessions.SessionStore(str(tmp_path), "s")
    sid = sessions.new_id()
    os.makedirs(store.folder)
    image = {"mimeType": "image/png", "data": "iVBORw0KGgo="}
    old = {"version": 2, "id": sid, "cwd": str(tmp_path), "title": "look", "createdAt": "2026-12-01T00:00:00Z",
           "updatedAt": "2026-12-01T00:00:00Z", "generation": 1, "choices": {}, "turns": 1,
           "messages": [history.system("sys"), {"role": "user", "content": "look at this", "images": [image]},
                        history.assistant("a dot")]}
    with open(store.path_for(sid), "wb") as handle:
        handle.write(orjson.dumps(old))
    loaded = store.load(sid)
    assert loaded.messages[1] == {"role": "user", "content": [{"type": "text", "text": "look at this"},
                                                              {"type": "image", **image}]}
    assert [(i.kind, i.text, i.image) for i in sessions.replay_items(loaded.messages)] == [
        ("user", "look at this", None), ("image", "", {"type": "image", **image}), ("agent", "a dot", None)]
    assert openai.to_wire(loaded.messages)[1] == openai.to_wire(
        [history.user("look at this", images=[image])])[0] == {"role": "user", "content": [
            {"type": "text", "text": "look at this"},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}]}
    store.save(sid, loaded.messages)
    again = orjson.loads(open(store.path_for(sid), "rb").read())
    assert again["version"] == 3 and again["messages"][1] == loaded.messages[1]
    assert store.load(sid).messages == loaded.messages


def test_the_gitignore_of_an_earlier_bob_is_brought_up_to_date_and_a_users_own_left_alone(tmp_path):
    from bob_acp.files import bobdir

    old, mine = tmp_path / "old", tmp_path / "mine"
    for root, text in ((old, bobdir.OLD_GITIGNORE), (mine, "sessions/\nnotes/\n")):
        (root / ".bob").mkdir(parents=True)
        (root / ".bob" / ".gitignore").write_text(text)
        bobdir.ensure(str(root))
    assert (old / ".bob" / ".gitignore").read_text() == bobdir.GITIGNORE  # (0.15's `*` hid the skills too)
    assert (mine / ".bob" / ".gitignore").read_text() == "sessions/\nnotes/\n"
