"""The script provider: matching, ordering, chunks, delays, tool calls, errors, broken files."""

import os
import threading
import time

import pytest
import yaml

from bob_acp import config
from bob_acp.cancel import Cancel
from bob_acp.context import history
from bob_acp.exceptions import Cancelled, ModelError
from bob_acp.providers.base import TextOnly
from bob_acp.providers.script import ScriptProvider


@pytest.fixture
def provider(tmp_path):
    def make(script, suffix=".yaml", raw=None):
        path = tmp_path / f"script{suffix}"
        path.write_text(raw if raw is not None else yaml.safe_dump(script))
        cfg_path = tmp_path / "config.yaml"
        cfg_path.write_text(yaml.safe_dump({"model": {"provider": "script", "script": str(path)}}))
        return ScriptProvider(config.load(str(cfg_path), env={}).model)
    return make


def play(provider, messages, cancel=None):
    seen = []
    reply = provider.generate(messages, [], TextOnly(seen.append), cancel or Cancel())
    return reply, seen


def conv(*users):
    messages = [history.system("s")]
    for text in users:
        messages.append(history.user(text))
    return messages


def test_turns_by_match_then_by_ordinal_and_replies_by_position(provider):
    p = provider({"turns": [
        {"match": "weather", "replies": [{"text": "sunny"}]},
        {"match": "/^run (\\w+)$/", "replies": [{"text": "regex"}]},
        {"replies": [{"text": "first"}, {"text": "first-second"}]},
        {"replies": [{"text": "second"}]},
    ]})
    assert play(p, conv("What's the WEATHER?"))[0].text == "sunny"
    assert play(p, conv("run tests"))[0].text == "regex"
    assert play(p, conv("hello"))[0].text == "first"
    m = conv("hello") + [history.assistant("first")]
    assert play(p, m)[0].text == "first-second"
    assert play(p, conv("a", "b"))[0].text == "second"
    assert play(p, conv("a", "b", "c"))[0].text == "second"  # the last unmatched turn repeats


def test_summaries_do_not_count_as_user_turns(provider):
    p = provider({"turns": [{"replies": [{"text": "one"}]}, {"replies": [{"text": "two"}]}]})
    messages = [history.system("s"), history.summary("old stuff"), history.user("next")]
    assert play(p, messages)[0].text == "one"


def test_chunks_repeat_and_fallback(provider):
    p = provider({"turns": [{"match": "many", "replies": [{"repeat": {"chunk": "x", "count": 50000}}]},
                            {"match": "some", "replies": [{"chunks": ["a", "b", "c"]}]}],
                  "fallback": {"text": "no idea"}})
    started = time.monotonic()
    reply, seen = play(p, conv("many"))
    assert len(seen) == 50000 and reply.text == "x" * 50000 and time.monotonic() - started < 2
    assert play(p, conv("some"))[1] == ["a", "b", "c"]
    assert play(p, conv("other"))[0].text == "no idea"
    assert play(p, conv("some") + [history.assistant("abc")])[0].text == "no idea"


def test_tool_calls_usage_and_ids(provider):
    p = provider({"turns": [{"replies": [{"text": "ok", "usage": {"input_tokens": 321},
                                          "tool_calls": [{"name": "bash", "arguments": {"command": "ls"}},
                                                         {"name": "read_skill", "arguments": {"name": "x"}}]}]}]})
    reply, _ = play(p, conv("go"))
    assert reply.input_tokens == 321
    assert [(c.id, c.name, c.arguments) for c in reply.tool_calls] == [
        ("script_0_0_0", "bash", {"command": "ls"}), ("script_0_0_1", "read_skill", {"name": "x"})]


def test_delay_honours_cancel(provider):
    p = provider({"turns": [{"replies": [{"chunks": ["a", "b", "c"], "delay": 5}]}]})
    cancel = Cancel()
    threading.Timer(0.2, cancel.set).start()
    started = time.monotonic()
    with pytest.raises(Cancelled):
        play(p, conv("go"), cancel)
    assert time.monotonic() - started < 5  # the chunks would take 10 s


def test_scripted_error_after_chunks(provider):
    p = provider({"turns": [{"replies": [{"chunks": ["part"], "error": "model API 500: scripted"}]}]})
    seen = []
    with pytest.raises(ModelError, match="^model API 500: scripted$"):
        p.generate(conv("go"), [], TextOnly(seen.append), Cancel())
    assert seen == ["part"]


def test_json_scripts_and_reload_on_change(provider, tmp_path):
    p = provider(None, suffix=".json", raw='{"turns": [{"replies": [{"text": "from json"}]}]}')
    assert play(p, conv("x"))[0].text == "from json"
    path = tmp_path / "script.json"
    path.write_text('{"turns": [{"replies": [{"text": "changed"}]}]}')
    os.utime(path, (time.time() + 5, time.time() + 5))
    assert play(p, conv("x"))[0].text == "changed"


@pytest.mark.parametrize("raw, problem", [
    ("turns: [unclosed", "invalid YAML"),
    ("- just a list", "must be a mapping"),
    ("turns: [{replies: 3}]", "turn 1"),
    ("turns: [{replies: [{tool_calls: [{arguments: {}}]}]}]", "needs a name"),
    ("turns: [{replies: [{tool_calls: [{name: bash, arguments: [1]}]}]}]", "arguments must be a mapping"),
    ("turns: [{replies: [{chunks: nope}]}]", "chunks must be a list"),
])
def test_broken_scripts_are_model_errors_naming_the_file(provider, tmp_path, raw, problem):
    p = provider(None, raw=raw)
    with pytest.raises(ModelError) as info:
        play(p, conv("x"))
    assert str(tmp_path / "script.yaml") in str(info.value) and problem in str(info.value)


def test_missing_file(tmp_path):
    cfg_path = tmp_path / "config.yaml"
    cfg_path.write_text(yaml.safe_dump({"model": {"provider": "script", "script": "gone.yaml"}}))
    with pytest.raises(ModelError, match="cannot read"):
        play(ScriptProvider(config.load(str(cfg_path), env={}).model), conv("x"))
