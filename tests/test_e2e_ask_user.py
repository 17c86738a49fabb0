"""ask_user (tools.askUser) against the real bob-acp: a form the client shows where it has
them (elicitation/create), a choice among options as a permission question where it has not,
the chat's prompt; the answer, a decline or a dismissal is the call's result; a rejected call's
"what instead?" is asked the same way where the client cannot say it; without the key there is
no such tool."""

from __future__ import annotations

import json

import pytest
from bob_client import allow, bash, outputs, tool
from chat_helpers import quit_chat

pytestmark = pytest.mark.e2e

FORMS = {"elicitation": {"form": {}}}
TURNS = [
    {"match": "pick a colour", "replies": [tool("ask_user", question="Which colour?", options=["red", "green"]),
                                           {"text": "noted"}]},
    {"match": "ask my name", "replies": [tool("ask_user", question="What is your name?"), {"text": "noted"}]},
    {"match": "list it", "replies": [bash("ls"), {"text": "noted"}]},
]


@pytest.fixture
def asking_bob(spawn_bob, tmp_path):
    def start(capabilities=None, **tools):
        path = tmp_path / "script.json"
        path.write_text(json.dumps({"turns": TURNS}))
        bob = spawn_bob({"model": {"provider": "script", "script": str(path)},
                         "tools": {"askUser": True, **tools}})
        bob.initialize(capabilities)
        return bob, bob.new_session()
    return start


def form_answer(reply):
    """An editor that answers every form with `reply` and records what it was asked."""
    asked = []

    def editor(request):
        assert request["method"] == "elicitation/create"
        asked.append(request["params"])
        return reply
    return editor, asked


def test_without_the_key_there_is_no_ask_user(spawn_bob, tmp_path):
    path = tmp_path / "script.json"
    path.write_text(json.dumps({"turns": TURNS}))
    bob = spawn_bob({"model": {"provider": "script", "script": str(path)}})
    bob.initialize(FORMS)
    sid = bob.new_session()
    _, frames = bob.prompt(sid, "pick a colour")
    assert outputs(frames)[0].startswith("error: unknown tool 'ask_user'")


def test_a_form_asks_and_the_answer_is_the_result(asking_bob):
    bob, sid = asking_bob(FORMS)
    editor, asked = form_answer({"action": "accept", "content": {"answer": "green"}})
    answer, frames = bob.prompt(sid, "pick a colour", editor=editor)
    assert answer["result"] == {"stopReason": "end_turn"}
    call = next(u for u in (f["params"]["update"] for f in frames if f.get("method") == "session/update")
                if u["sessionUpdate"] == "tool_call")
    assert asked == [{"sessionId": sid, "toolCallId": call["toolCallId"], "mode": "form", "message": "Which colour?",
                      "requestedSchema": {"type": "object", "required": ["answer"], "properties": {
                          "answer": {"type": "string", "title": "Your answer", "enum": ["red", "green"]}}}}]
    assert outputs(frames) == ["The user answered: green"]


@pytest.mark.parametrize("reply, said", [
    ({"action": "decline"}, "The user declined to answer."),
    ({"action": "cancel"}, "The user did not answer (they dismissed the question)."),
    ({"action": "accept", "content": {"answer": "purple"}}, "error: the editor's form came back without an answer"),
])
def test_a_decline_a_dismissal_and_a_bad_answer_are_the_result_too(asking_bob, reply, said):
    bob, sid = asking_bob(FORMS)
    editor, _ = form_answer(reply)
    answer, frames = bob.prompt(sid, "pick a colour", editor=editor)
    assert answer["result"] == {"stopReason": "end_turn"}
    assert outputs(frames)[0].startswith(said)


def test_a_typed_answer_through_a_form(asking_bob):
    bob, sid = asking_bob(FORMS)
    editor, asked = form_answer({"action": "accept", "content": {"answer": "Ada"}})
    _, frames = bob.prompt(sid, "ask my name", editor=editor)
    assert "enum" not in asked[0]["requestedSchema"]["properties"]["answer"]
    assert outputs(frames) == ["The user answered: Ada"]


def test_without_forms_options_are_a_choice_and_a_typed_answer_cannot_be_had(asking_bob):
    bob, sid = asking_bob()
    questions = []

    def choose_green(request):
        questions.append(request["params"])
        return {"outcome": {"outcome": "selected", "optionId": "answer-1"}}

    _, frames = bob.prompt(sid, "pick a colour", answer=choose_green)
    # Each option told apart by its kind too (CodeCompanion labels by kind, 1 to 4 in this order;
    # agent-shell keys each kind), its number in its name and in the question.
    options = questions[0]["options"]
    assert [o["name"] for o in options] == ["1: red", "2: green", "None of these (don't answer)"]
    assert [o["kind"] for o in options] == ["allow_always", "allow_once", "reject_once"]
    assert questions[0]["toolCall"]["title"] == "Which colour? (1: red; 2: green)"
    assert outputs(frames) == ["The user answered: green"]
    _, frames = bob.prompt(sid, "pick a colour")  # (the test client rejects: the question dismissed)
    assert outputs(frames) == ["The user did not answer (they dismissed the question)."]
    _, frames = bob.prompt(sid, "ask my name")
    assert outputs(frames)[0].startswith("error: this client cannot take a typed answer")


def test_a_rejection_asks_what_instead_where_the_client_cannot_say_it(asking_bob):
    bob, sid = asking_bob(FORMS)
    editor, asked = form_answer({"action": "accept", "content": {"instead": "use find instead"}})
    _, frames = bob.prompt(sid, "list it", editor=editor)
    assert asked[0]["requestedSchema"]["properties"]["instead"]["title"] == "What should Bob do instead? (optional)"
    assert outputs(frames) == ["[rejected by the user: use find instead]"]
    # Allowed, nothing more is asked; without askUser, nothing either.
    editor, asked = form_answer({"action": "decline"})
    bob.prompt(sid, "list it", answer=allow, editor=editor)
    assert asked == []


def test_without_ask_user_a_rejection_asks_nothing_more(spawn_bob, tmp_path):
    path = tmp_path / "script.json"
    path.write_text(json.dumps({"turns": TURNS}))
    bob = spawn_bob({"model": {"provider": "script", "script": str(path)}})
    bob.initialize(FORMS)
    sid = bob.new_session()
    editor, asked = form_answer({"action": "decline"})
    _, frames = bob.prompt(sid, "list it", editor=editor)
    assert asked == [] and outputs(frames) == ["[command rejected by the user]"]


def test_in_the_chat_the_question_is_asked_on_the_terminal(chat):
    child = chat(["--profile", "full"], {"turns": TURNS})
    child.expect("you> ")
    child.sendline("pick a colour")
    child.expect("Which colour")
    child.expect("2. green")
    child.expect(r"\[1-2")
    child.sendline("2")
    child.expect("The user answered: green")
    quit_chat(child)


@pytest.mark.parametrize("error", [{"code": -32601, "message": "Method not found"},
                                   {"code": -32603, "message": "no forms today"}])
def test_a_client_that_fails_the_form_is_asked_with_a_choice_instead(asking_bob, error):
    """The Python SDK 0.12.1's client advertises forms but answers elicitation/create -32601 unless
    its unstable flag is on: the question still reaches the user, as a choice, and no form is sent
    to that client again."""
    bob, sid = asking_bob(FORMS)
    editor, asked = form_answer({"__error__": error})
    chosen = []

    def choose_green(request):
        chosen.append(request["params"])
        return {"outcome": {"outcome": "selected", "optionId": "answer-1"}}

    _, frames = bob.prompt(sid, "pick a colour", answer=choose_green, editor=editor)
    assert len(asked) == 1 and len(chosen) == 1
    assert outputs(frames) == ["The user answered: green"]
    _, frames = bob.prompt(sid, "pick a colour", answer=choose_green, editor=editor)
    assert len(asked) == 1 and len(chosen) == 2 and outputs(frames) == ["The user answered: green"]


def test_controls_and_bidi_in_an_answer_never_reach_the_model_or_a_terminal(asking_bob):
    bob, sid = asking_bob(FORMS)
    editor, _ = form_answer({"action": "accept", "content": {"answer": "Ada\x1b[2J\u202etxt.exe\r\nrm -rf ~"}})
    _, frames = bob.prompt(sid, "ask my name", editor=editor)
    assert outputs(frames) == ["The user answered: Ada␛[2J<U+202E>txt.exe⏎rm -rf ~"]
