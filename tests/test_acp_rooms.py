"""The rooms of the ACP layer in-process, each on its own: params, turns, saved sessions,
selectors (acp/params.py, turns.py, saved.py, selectors.py)."""

from __future__ import annotations

import pytest
import yaml

from bob_acp import log, sessions
from bob_acp.acp import params, saved
from bob_acp.acp.runtime import Reader
from bob_acp.acp.server import AgentServer
from bob_acp.context import history
from bob_acp.files import workspace
from bob_acp.jsonrpc.errors import RpcError


class FakeEndpoint:
    def __init__(self):
        self.sent = []

    def notify(self, method, params_, give_up=None):
        self.sent.append((method, params_))
        return True

    def wake_senders(self):
        pass


def make_server(tmp_path, **values):
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(values))
    log.setup("error")
    server = AgentServer(Reader(str(path), None, {}, log.get("test")), log.get("test"))
    server.channel.endpoint = FakeEndpoint()
    server.initialize({"protocolVersion": 1})
    return server


# ---- params -----------------------------------------------------------------------------------

@pytest.mark.parametrize("value, problem", [(None, "required"), (5, "must be a string"), ("rel/dir", "absolute"),
                                            ("/no/such/folder", "not a directory"), ("/tmp/a\0b", "not a directory")])
def test_cwd_param_names_the_field(value, problem):
    with pytest.raises(RpcError) as info:
        params.cwd_param({"cwd": value})
    assert info.value.code == -32602 and "cwd" in info.value.message and problem in info.value.message


def test_unknown_session_says_so_and_carries_the_id():
    error = params.unknown_session("20260101-000000-00000000", "gone")
    assert "session not found" in error.message and error.data == {"sessionId": "20260101-000000-00000000",
                                                                     "error": "gone"}


# ---- turns ------------------------------------------------------------------------------------

def test_a_prompt_is_registered_in_frame_order_and_a_cancel_before_its_answer_wins(tmp_path):
    server = make_server(tmp_path)
    sid = server.new_session({"cwd": str(tmp_path), "mcpServers": []}).result["sessionId"]
    turns = server.rooms.turns
    session, turn = turns.prepare({"sessionId": sid, "prompt": [{"type": "text", "text": "hi"}]})
    assert turn in session.turns and turn.ticket.granted
    turns.cancel({"sessionId": sid})  # read before the answer: the answer is cancelled
    reply = turns.prompt({"sessionId": sid, "prompt": [{"type": "text", "text": "hi"}]}, (session, turn))
    with reply.guard:
        assert reply.result() == {"stopReason": "cancelled"}
    assert not session.turns and not turn.cancel_now()  # answered: a later cancel is too late


def test_a_prompt_for_a_session_being_loaded_is_refused(tmp_path):
    server = make_server(tmp_path)
    sid = server.new_session({"cwd": str(tmp_path), "mcpServers": []}).result["sessionId"]
    server.table.sessions[sid].loading = True
    with pytest.raises(RpcError) as info:
        server.rooms.turns.prepare({"sessionId": sid, "prompt": [{"type": "text", "text": "hi"}]})
    assert info.value.code == -32600 and "being loaded" in info.value.message


def test_new_without_a_model_answers_and_compact_says_no_model(tmp_path):
    server = make_server(tmp_path)
    sid = server.new_session({"cwd": str(tmp_path), "mcpServers": []}).result["sessionId"]
    turns = server.rooms.turns
    prepared = turns.prepare({"sessionId": sid, "prompt": [{"type": "text", "text": "/compact"}]})
    reply = turns.prompt({"sessionId": sid, "prompt": [{"type": "text", "text": "/compact"}]}, prepared)
    with reply.guard:
        assert reply.result() == {"stopReason": "end_turn"}
    chunk = server.channel.endpoint.sent[-1][1]["update"]
    assert chunk["content"]["text"] == "[compact: failed, history kept: no model is configured]"


# ---- saved sessions ------------------------------------------------------------------------------

def test_pages_follow_the_cursor_and_refuse_a_forged_one(tmp_path):
    store = sessions.SessionStore(str(tmp_path), "s")
    for n in range(7):
        store.save(sessions.new_id(), [history.system("s"), history.user(f"t{n}")], title=f"t{n}")
    first, cursor = sessions.page([store], None, 3)
    second, cursor2 = sessions.page([store], cursor, 3)
    third, end = sessions.page([store], cursor2, 3)
    assert len(first) == 3 and len(second) == 3 and len(third) == 1 and end is None
    assert len({s.id for s in first + second + third}) == 7
    with pytest.raises(ValueError):
        sessions.page([store], "Zm9yZ2Vk", 3)


def test_a_replayed_tool_call_keeps_its_title_kind_and_fenced_output(tmp_path):
    item = sessions.ReplayItem("tool", ref="call_9", name="read_file", arguments={"path": "a.py"}, output="x = 1\n")
    frame = saved.replay_update(item, workspace.of(str(tmp_path)))
    assert (frame["title"], frame["kind"], frame["status"]) == ("read_file: a.py", "read", "completed")
    assert frame["content"][0]["content"]["text"] == "```python\nx = 1\n```"
    assert frame["locations"] == [{"path": str(tmp_path / "a.py")}]


# ---- selectors ------------------------------------------------------------------------------------

def test_selectors_offer_the_models_and_modes_and_refuse_others(tmp_path):
    server = make_server(tmp_path, model={"name": "main", "choices": ["main", "alt"]}, acp={"configOptions": True})
    response = server.new_session({"cwd": str(tmp_path), "mcpServers": []}).result
    assert [o["value"] for o in response["configOptions"][0]["options"]] == ["main", "alt"]  # no duplicate
    selectors = server.rooms.selectors
    sid = response["sessionId"]
    with pytest.raises(RpcError):
        selectors.set_config_option({"sessionId": sid, "configId": "temperature", "value": "hot"})
    with pytest.raises(RpcError):
        selectors.set_mode({"sessionId": sid, "modeId": "yolo"})
    session = server.table.sessions[sid]
    selectors.restore(session, {"model": "gone", "mode": "ask"})
    assert session.conv.model is None and session.conv.mode == "ask"


def test_a_saved_mode_that_asks_less_than_the_configured_one_is_not_restored(tmp_path):
    server = make_server(tmp_path, acp={"configOptions": True}, permissions={"mode": "allow-edits"})
    sid = server.new_session({"cwd": str(tmp_path), "mcpServers": []}).result["sessionId"]
    session, selectors = server.table.sessions[sid], server.rooms.selectors
    notice = selectors.restore(session, {"mode": "allow-all"})
    assert session.conv.mode == "allow-edits" and "allow-all" in notice and "allow-edits" in notice
    assert selectors.restore(session, {"mode": "ask"}) is None and session.conv.mode == "ask"
