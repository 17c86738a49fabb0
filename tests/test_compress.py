"""Context compression: turn planning, the summary, the three /compact lines."""

import re

import pytest

from bob_acp.cancel import Cancel
from bob_acp.context import history
from bob_acp.engine import compress
from bob_acp.exceptions import Cancelled, ModelError
from bob_acp.providers.base import ModelReply


class FakeModel:
    def __init__(self, text="the summary", error=None):
        self.text, self.error, self.requests = text, error, []

    def generate(self, messages, tools, stream, cancel, model=None, reasoning=None):
        self.requests.append((messages, tools))
        if self.error:
            raise self.error
        return ModelReply(text=self.text)


def turns(n):
    messages = [history.system("sys")]
    for i in range(n):
        call = {"id": f"t{i}", "ref": f"call_{i}", "name": "bash", "arguments": {"command": f"echo {i}"}}
        messages += [history.user(f"q{i}"), history.assistant("", [call]), history.tool_result(call, f"{i}"),
                     history.assistant(f"a{i}")]
    return messages


def test_plan_cuts_only_at_turn_boundaries():
    messages = turns(3)
    old, kept = compress.plan(messages, 1)
    assert old == messages[1:9] and kept == messages[9:]
    assert kept[0] == history.user("q2")
    assert compress.plan(messages, 3) is None
    old, kept = compress.plan(messages, 0)
    assert old == messages[1:] and kept == []


def test_compress_folds_old_turns_into_one_summary():
    model = FakeModel("they listed files")
    messages = turns(3)
    outcome = compress.compress(messages, model, 2, Cancel())
    assert outcome.changed
    assert outcome.messages[0] == messages[0]
    assert outcome.messages[1] == history.summary("they listed files") and outcome.messages[1]["role"] == "user"
    assert outcome.messages[2:] == messages[5:]
    assert re.fullmatch(r"🗜️ compressed 4 messages → 1 summary \+ 8 kept \([\d,]+ tokens, \d+\.\ds\)", outcome.line)
    request, tools = model.requests[0]
    assert tools == [] and "echo 0" in history.text_of(request[1]) and "q1" not in history.text_of(request[1])


def test_nothing_to_compact_keeps_the_history():
    messages = turns(2)
    outcome = compress.compress(messages, FakeModel(), 2, Cancel())
    assert not outcome.changed and outcome.messages is messages
    assert outcome.line == "🗜️ nothing to compact: 8 message(s), no turn older than the last 2"


@pytest.mark.parametrize("model, explanation", [
    (FakeModel(error=ModelError("model API 500: boom")), "model API 500: boom"),
    (FakeModel(text="  "), "the model returned an empty summary"),
])
def test_failure_keeps_the_history(model, explanation):
    messages = turns(3)
    outcome = compress.compress(messages, model, 1, Cancel())
    assert not outcome.changed and outcome.messages is messages
    assert outcome.line == f"[compact: failed, history kept: {explanation}]"


def test_cancel_propagates():
    with pytest.raises(Cancelled):
        compress.compress(turns(3), FakeModel(error=Cancelled()), 1, Cancel())


def test_thresholds():
    assert compress.should_compress(900, 1000, 0.8) and not compress.should_compress(800, 1000, 0.8)
    assert not compress.should_compress(None, 1000, 0.8)
