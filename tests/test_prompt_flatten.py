"""Prompt flattening: text blocks, resource links, @path attachments."""

import os

import pytest

from bob_acp.acp.prompt import attachments, flatten, with_attachments


def test_text_blocks_are_concatenated_and_other_blocks_ignored():
    blocks = [
        {"type": "text", "text": "look at "},
        {"type": "image", "data": "AAAA", "mimeType": "image/png"},
        {"type": "text", "text": "this"},
        {"type": "audio", "data": "AAAA", "mimeType": "audio/wav"},
        {"type": "resource", "resource": {"uri": "file:///x", "text": "t"}},
        "garbage",
    ]
    assert flatten(blocks) == "look at this"


def test_resource_link_becomes_an_attached_file_line():
    blocks = [{"type": "text", "text": "fix"}, {"type": "resource_link", "uri": "file:///src/main.py", "name": "main.py"}]
    assert flatten(blocks) == "fix\n[attached file: /src/main.py]"


@pytest.mark.parametrize("uri, shown", [
    ("file:///home/me/a%20b.txt", "/home/me/a b.txt"),  # a URI, percent-decoded
    ("file:///home/me/caf%C3%A9.py", "/home/me/café.py"),
    ("file:///abs/x.py#L2:3", "/abs/x.py (lines 2-3)"),  # Zed's selection
    ("file:///abs/x.py#L5", "/abs/x.py (line 5)"),
    ("file:///abs/x.py#L4-L9", "/abs/x.py (lines 4-9)"),
    ("file:///abs/x.py?symbol=main#L10:12", "/abs/x.py (lines 10-12)"),
    ("file:///abs/notes.md#intro", "/abs/notes.md"),  # another fragment: taken out of the path
    ("file://localhost/etc/hosts", "/etc/hosts"),
    ("https://example.com/a%20b", "https://example.com/a%20b"),  # not a file: as written
    ("zed://thread/123", "zed://thread/123"),
])
def test_resource_link_uris_are_uris(uri, shown):
    assert flatten([{"type": "resource_link", "uri": uri, "name": "n"}]) == f"\n[attached file: {shown}]"


def test_a_mention_holding_a_nul_is_left_as_text(tmp_path):
    assert attachments("look at @~na\x00me and @/etc/\x00", str(tmp_path)) == []


def test_at_paths_that_exist_are_attached_once_each(tmp_path):
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "a.py").write_text("x")
    text = "read @src/a.py and @src then @src/a.py again, not @missing.txt"
    found = attachments(text, str(tmp_path))
    assert found == [("src/a.py", str(tmp_path / "src" / "a.py"), "file"), ("src", str(tmp_path / "src"), "directory")]
    assert with_attachments(text, found).endswith(
        f"\n[attached file: {tmp_path}/src/a.py]\n[attached directory: {tmp_path}/src]")


def test_absolute_home_quoted_and_trailing_punctuation(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / "notes.md").write_text("n")
    (tmp_path / "with space.txt").write_text("s")
    text = f'see @~/notes.md, @{tmp_path}/notes.md. and @"with space.txt"'
    found = attachments(text, str(tmp_path))
    assert [f[1] for f in found] == [str(tmp_path / "notes.md"), str(tmp_path / "with space.txt")]


def test_emails_and_nul_bytes_are_not_paths(tmp_path):
    (tmp_path / "example.com").write_text("x")
    assert attachments("mail bob@example.com", str(tmp_path)) == []
    assert attachments("@bad\x00name", str(tmp_path)) == []


def test_a_symlink_is_attached_under_the_name_written(tmp_path):
    (tmp_path / "real.txt").write_text("r")
    os.symlink(tmp_path / "real.txt", tmp_path / "link.txt")
    found = attachments("@link.txt", str(tmp_path))
    assert found == [("link.txt", str(tmp_path / "link.txt"), "file")]


def test_two_text_blocks_never_glue_two_words():
    # CodeCompanion re-sends a cancelled message as a first block before the new one.
    blocks = [{"type": "text", "text": "RUN: touch /tmp/stop-file"}, {"type": "text", "text": "hello after stop"}]
    assert flatten(blocks) == "RUN: touch /tmp/stop-file\nhello after stop"
    zed = [{"type": "text", "text": "fix "}, {"type": "text", "text": "@main.py"}, {"type": "text", "text": " please"}]
    assert flatten(zed) == "fix @main.py please"
    assert flatten([{"type": "text", "text": "a\n"}, {"type": "text", "text": "b"}]) == "a\nb"
    assert flatten([{"type": "text", "text": ""}, {"type": "text", "text": "b"}]) == "b"
