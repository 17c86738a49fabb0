"""Every session Bob writes is listed: a property test writes session files the way Bob does
(checkpoint records, forks, compactions, plans, images, tool calls; text that says "messages"
anywhere) and lists them all, with their title, createdAt and generation kept through saves."""

from __future__ import annotations

import json
import os

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bob_acp import sessions
from bob_acp.context import history

text = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=40)
tricky = st.sampled_from(['"messages"', '"messages": []', '{"messages": 1}', "messages", '\\"messages\\"', "}"])
words = st.one_of(text, tricky, st.builds(lambda a, b: a + b, tricky, text))


@st.composite
def conversations(draw):
    messages = [history.system("you are bob")]
    for turn in range(draw(st.integers(1, 4))):
        if turn == 0 and draw(st.booleans()):
            messages.append(history.summary(draw(words)))  # a compaction's summary first
        images = [{"mimeType": "image/png", "data": "aGk="}] if draw(st.booleans()) else None
        question = history.user(draw(words), images=images)
        if draw(st.booleans()):
            question["checkpoint"] = "a" * 32
        messages.append(question)
        if draw(st.booleans()):
            call = {"id": f"c{turn}", "name": draw(st.sampled_from(["bash", "write_file", "update_plan"])),
                    "arguments": {"messages": draw(words), "entries": [{"content": draw(words)}]}}
            messages.append(history.assistant(draw(words), [call]))
            messages.append(history.tool_result(call, draw(words)))
        messages.append(history.assistant(draw(words)))
    return messages


def records(draw_messages: list[dict]) -> list[dict]:
    return [{"id": "r1", "changes": [{"root": "/p", "path": "a", "before": None, "after": None, "by": "bash"}],
             "notes": ['"messages": 1'], "undone": True, "messages": draw_messages, "mac": "0" * 64}]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(conversations(), st.booleans(), st.booleans(), st.integers(1, 3)), min_size=1, max_size=4))
def test_every_session_written_is_listed_with_its_title_and_creation_kept(tmp_path, written):
    folder = tmp_path / f"case{len(os.listdir(tmp_path))}"
    folder.mkdir()
    store = sessions.SessionStore(str(folder), ".bob/sessions")
    expected = {}
    for index, (messages, with_records, fork, saves) in enumerate(written):
        sid = f"20261204-1200{index:02d}-0000000{index}"
        title = sessions.fork_title("a fork") if fork else sessions.title_of(messages)
        created = None
        for generation in range(1, saves + 1):
            store.save(sid, messages, title, {"mode": "ask"}, (), records(messages[1:]) if with_records else None)
            document = json.loads((folder / ".bob" / "sessions" / f"{sid}.json").read_text())
            created = created or document["createdAt"]
            assert document["createdAt"] == created and document["generation"] == generation
            assert document["title"] == title
        if sum(1 for m in messages if m["role"] == "user") > 0:
            expected[sid] = title
    listed, cursor = sessions.page([store], None, 100)
    assert cursor is None
    assert {item.id: item.title for item in listed} == expected


def test_a_file_whose_head_is_longer_than_what_a_listing_reads_is_read_whole(tmp_path):
    """A file of 0.16 kept its checkpoint records before its messages: a head past 16 KiB."""
    folder = tmp_path / ".bob" / "sessions"
    folder.mkdir(parents=True)
    sid = "20261204-120000-00000001"
    document = {"version": 3, "id": sid, "cwd": str(tmp_path), "title": "kept", "createdAt": "2026-12-04T12:00:00Z",
                "updatedAt": "2026-12-04T12:00:00Z", "generation": 4, "choices": {}, "turns": 1,
                "checkpoints": [{"id": "x", "messages": [{"role": "user", "content": "y" * 40000}]}],
                "messages": [history.system("s"), history.user("kept")]}
    (folder / f"{sid}.json").write_text(json.dumps(document, indent=2))
    store = sessions.SessionStore(str(tmp_path), ".bob/sessions")
    listed, _ = sessions.page([store], None, 10)
    assert [(item.id, item.title) for item in listed] == [(sid, "kept")]
    store.save(sid, document["messages"], "kept")
    saved = json.loads((folder / f"{sid}.json").read_text())
    assert saved["generation"] == 5 and saved["createdAt"] == "2026-12-04T12:00:00Z"
