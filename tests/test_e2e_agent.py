"""The agent end to end with the script provider: tool calls, the permission gate, frames, files."""


import pytest
from bob_client import allow, allow_always, message_text, reject, updates

pytestmark = pytest.mark.e2e



def strip_update(frame):
    return frame["params"]["update"]


def test_text_is_streamed_chunk_by_chunk(scripted):
    bob, sid = scripted([{"replies": [{"chunks": ["Hel", "lo ", " world\n"]}]}])
    response, frames = bob.prompt(sid, "hi")
    assert response["result"] == {"stopReason": "end_turn"}
    chunks = updates(frames, "agent_message_chunk")
    assert [u["content"]["text"] for u in chunks] == ["Hel", "lo ", " world\n"]
    assert len({u["messageId"] for u in chunks}) == 1  # one model message, one id across its chunks
    assert [u["sessionUpdate"] for u in updates(frames)][-1] == "usage_update"
    bob.wait_stderr("[acp] turn done: 0 command(s) · 0 file op(s) · 0 skill(s)")


def test_a_turn_with_bash_write_and_edit_asserting_every_frame(scripted, workdir):
    turns = [{"replies": [
        {"text": "Let me look.", "tool_calls": [{"name": "bash", "arguments": {"command": "echo hello; exit 3"}}]},
        {"tool_calls": [{"name": "write_file", "arguments": {"path": "notes/a.txt", "content": "one\ntwo\n"}}]},
        {"tool_calls": [{"name": "edit_file", "arguments": {"path": "notes/a.txt", "old_string": "two", "new_string": "TWO"}}]},
        {"text": "Done."},
    ]}]
    bob, sid = scripted(turns)
    answers = iter([allow, allow_always, allow])
    response, frames = bob.prompt(sid, "go", answer=lambda req: next(answers)(req))
    assert response["result"] == {"stopReason": "end_turn"}
    path = str(workdir / "notes" / "a.txt")
    assert (workdir / "notes" / "a.txt").read_text() == "one\nTWO\n"

    shapes = [(f.get("method"), strip_update(f)["sessionUpdate"] if f.get("method") == "session/update" else None)
              for f in frames]
    update, ask = "session/update", "session/request_permission"
    assert shapes == [
        (update, "agent_message_chunk"), (update, "usage_update"),
        (update, "tool_call"), (ask, None), (update, "tool_call_update"), (update, "tool_call_update"),
        (update, "tool_call_update"),
        (update, "usage_update"),
        (update, "tool_call"), (ask, None), (update, "tool_call_update"), (update, "tool_call_update"),
        (update, "usage_update"),
        (update, "tool_call"), (ask, None), (update, "tool_call_update"), (update, "tool_call_update"),
        (update, "agent_message_chunk"), (update, "usage_update"),
    ]
    first_chunk, last_chunk = strip_update(frames[0]), strip_update(frames[-2])
    assert first_chunk["messageId"] != last_chunk["messageId"]  # two model messages
    assert strip_update(frames[1]) == {"sessionUpdate": "usage_update", "used": strip_update(frames[1])["used"],
                                       "size": 128000}
    bash_call = strip_update(frames[2])
    n = int(bash_call["toolCallId"].split("_")[1])
    assert bash_call == {"sessionUpdate": "tool_call", "toolCallId": f"call_{n}", "title": "bash: echo hello; exit 3",
                         "kind": "execute", "status": "pending", "rawInput": {"command": "echo hello; exit 3"}}
    permission = frames[3]["params"]
    assert permission["sessionId"] == sid
    assert permission["toolCall"]["toolCallId"] == f"call_{n}" and permission["toolCall"]["title"] == "bash: echo hello; exit 3"
    assert [(o["optionId"], o["kind"]) for o in permission["options"]] == [
        ("allow", "allow_once"), ("allow_always", "allow_always"), ("reject", "reject_once")]
    assert strip_update(frames[4]) == {"sessionUpdate": "tool_call_update", "toolCallId": f"call_{n}", "status": "in_progress"}
    live = strip_update(frames[5])  # the output so far, while it runs, fenced
    assert live["status"] == "in_progress" and live["content"][0]["content"]["text"] == "```console\nhello\n```"
    done = strip_update(frames[6])
    assert done["status"] == "failed"  # exit code 3
    assert done["rawOutput"]["output"] == "hello\n[exit code: 3]"  # raw, as the model read it
    assert done["content"] == [{"type": "content", "content": {"type": "text", "text": "```console\nhello\n[exit code: 3]\n```"}}]

    write_call = strip_update(frames[8])
    assert write_call["toolCallId"] == f"call_{n + 1}" and write_call["kind"] == "edit"
    assert write_call["title"] == "write_file: notes/a.txt" and write_call["locations"] == [{"path": path}]
    proposed = [{"type": "diff", "path": path, "newText": "one\ntwo\n"}]  # a new file: no oldText at all
    assert write_call["content"] == proposed and frames[9]["params"]["toolCall"]["content"] == proposed
    written = strip_update(frames[11])
    assert written["status"] == "completed"
    assert written["content"] == proposed
    assert isinstance(written["rawOutput"]["output"], str)
    edit_call = strip_update(frames[13])
    change = [{"type": "diff", "path": path, "oldText": "one\ntwo\n", "newText": "one\nTWO\n"}]
    assert edit_call["content"] == change and frames[14]["params"]["toolCall"]["content"] == change
    edited = strip_update(frames[16])
    assert edited["toolCallId"] == f"call_{n + 2}" and edited["content"] == change
    bob.wait_stderr("[acp] turn done: 1 command(s) · 2 file op(s) · 0 skill(s)")


def test_allow_always_skips_the_dialog_for_that_tool_only(scripted, workdir):
    turns = [{"replies": [
        {"tool_calls": [{"name": "bash", "arguments": {"command": "echo 1"}}]},
        {"tool_calls": [{"name": "bash", "arguments": {"command": "echo 2"}}]},
        {"tool_calls": [{"name": "write_file", "arguments": {"path": "x.txt", "content": "x"}}]},
        {"text": "ok"},
    ]}]
    bob, sid = scripted(turns)
    asked = []

    def answer(req):
        asked.append(req["params"]["toolCall"]["title"])
        return allow_always(req)

    response, _ = bob.prompt(sid, "go", answer=answer)
    assert response["result"]["stopReason"] == "end_turn"
    assert asked == ["bash: echo 1", "write_file: x.txt"]


def test_reject_tells_the_model_and_runs_nothing(scripted, workdir):
    turns = [{"replies": [
        {"tool_calls": [{"name": "write_file", "arguments": {"path": "nope.txt", "content": "x"}}]},
        {"text": "understood"},
    ]}]
    bob, sid = scripted(turns)
    response, frames = bob.prompt(sid, "go", answer=reject)
    assert response["result"]["stopReason"] == "end_turn"
    assert not (workdir / "nope.txt").exists()
    final = [u for u in updates(frames, "tool_call_update")][-1]
    assert final["status"] == "failed" and final["rawOutput"]["output"] == "[command rejected by the user]"
    assert message_text(frames) == "understood"


@pytest.mark.parametrize("bad_answer", [
    {"outcome": {"outcome": "cancelled"}},
    {"outcome": {"outcome": "selected", "optionId": "yes-please"}},
    {"outcome": {"outcome": "selected", "optionId": 1}},
    {"outcome": "selected"},
    {},
    "allow",
])
def test_anything_but_a_valid_selection_is_a_rejection(scripted, workdir, bad_answer):
    turns = [{"replies": [
        {"tool_calls": [{"name": "bash", "arguments": {"command": "touch ran.txt"}}]},
        {"text": "ok"},
    ]}]
    bob, sid = scripted(turns)
    response, frames = bob.prompt(sid, "go", answer=lambda req: bad_answer)
    assert response["result"]["stopReason"] == "end_turn"
    assert not (workdir / "ran.txt").exists()
    assert updates(frames, "tool_call_update")[-1]["rawOutput"]["output"] == "[command rejected by the user]"


def test_an_error_answer_is_a_rejection(scripted, workdir):
    turns = [{"replies": [{"tool_calls": [{"name": "bash", "arguments": {"command": "touch ran.txt"}}]}, {"text": "ok"}]}]
    bob, sid = scripted(turns)
    msg_id = bob.request_async("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "go"}]})
    while True:
        frame = bob.read_frame()
        if frame.get("method") == "session/request_permission":
            bob.send({"jsonrpc": "2.0", "id": frame["id"], "error": {"code": -32603, "message": "ui crashed"}})
            break
    response, _ = bob.wait_response(msg_id)
    assert response["result"]["stopReason"] == "end_turn"
    assert not (workdir / "ran.txt").exists()


def test_read_skill_never_asks(scripted):
    turns = [{"replies": [{"tool_calls": [{"name": "read_skill", "arguments": {"name": "greetings"}}]}, {"text": "🎉"}]}]
    bob, sid = scripted(turns)
    response, frames = bob.prompt(sid, "/greetings Bob", answer=lambda req: pytest.fail("asked for read_skill"))
    assert response["result"]["stopReason"] == "end_turn"
    call = updates(frames, "tool_call")[0]
    assert call["title"] == "read_skill: greetings" and call["kind"] == "read"
    assert updates(frames, "tool_call_update")[-1]["status"] == "completed"
    bob.wait_stderr("[acp] turn done: 0 command(s) · 0 file op(s) · 1 skill(s)")


def test_max_model_calls_ends_with_max_turn_requests(scripted):
    loop = [{"tool_calls": [{"name": "bash", "arguments": {"command": f"echo {i}"}}]} for i in range(10)]
    bob, sid = scripted([{"replies": loop}], config={"limits": {"maxModelCalls": 3}})
    response, frames = bob.prompt(sid, "go", answer=allow_always)
    assert response["result"] == {"stopReason": "max_turn_requests"}
    assert len(updates(frames, "tool_call")) == 3


def test_loop_detector_warns_then_stops(scripted, workdir):
    same = {"tool_calls": [{"name": "bash", "arguments": {"command": "echo again >> count.txt"}}]}
    bob, sid = scripted([{"replies": [same] * 8}])
    response, frames = bob.prompt(sid, "go", answer=allow_always)
    assert response["result"] == {"stopReason": "end_turn"}
    assert (workdir / "count.txt").read_text() == "again\nagain\n"  # 3rd and 4th not run, 5th stops
    results = [u["rawOutput"]["output"] for u in updates(frames, "tool_call_update") if u["status"] == "failed"]
    assert len(results) == 3 and "not run" in results[0]
    assert "turn stopped" in message_text(frames) and "5 times" in message_text(frames)


def test_unknown_slash_commands_go_to_the_model_as_typed(scripted):
    bob, sid = scripted([{"match": "/frobnicate now", "replies": [{"text": "matched as typed"}]},
                         {"replies": [{"text": "wrong"}]}])
    _, frames = bob.prompt(sid, "/frobnicate now")
    assert message_text(frames) == "matched as typed"


def test_attachments_reach_the_model_and_are_logged(scripted, workdir):
    (workdir / "main.py").write_text("print(1)\n")
    bob, sid = scripted([{"match": f"[attached file: {workdir}/main.py]", "replies": [{"text": "saw it"}]},
                         {"replies": [{"text": "missing"}]}])
    _, frames = bob.prompt(sid, "look at @main.py")
    assert message_text(frames) == "saw it"
    bob.wait_stderr(f"[acp] session {sid}: attached {workdir}/main.py")


def test_model_failure_is_an_internal_error_with_one_line_and_history_kept(scripted):
    bob, sid = scripted([
        {"match": "first", "replies": [{"chunks": ["partial "], "error": "model API 500: scripted failure"}]},
        {"match": "second", "replies": [{"text": "fine again"}]},
    ])
    response, frames = bob.prompt(sid, "first")
    assert response["error"]["code"] == -32603
    assert response["error"]["data"] == {"error": "model API 500: scripted failure"}
    _, frames = bob.prompt(sid, "second")
    assert message_text(frames) == "fine again"


def test_tool_call_ids_are_numbered_per_process_across_sessions(scripted):
    call = {"tool_calls": [{"name": "read_skill", "arguments": {"name": "greetings"}}]}
    bob, sid = scripted([{"replies": [call, {"text": "ok"}]}])
    _, first = bob.prompt(sid, "a")
    other = bob.new_session()
    _, second = bob.prompt(other, "a")
    a = int(updates(first, "tool_call")[0]["toolCallId"][5:])
    b = int(updates(second, "tool_call")[0]["toolCallId"][5:])
    assert b == a + 1
