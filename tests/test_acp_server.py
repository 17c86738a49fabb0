"""The ACP layer in-process: options Bob itself does not use (auth methods), the held-id rule,
permission-answer validation, and the system prompt."""

import datetime

import pytest

from bob_acp import config, log, sessions
from bob_acp.acp.runtime import Reader
from bob_acp.acp.server import AgentServer
from bob_acp.acp.updates import chosen_option
from bob_acp.config.launch import setup_words
from bob_acp.context import history, skills, system_prompt
from bob_acp.files import workspace
from bob_acp.jsonrpc.endpoint import PeerError, Sent
from bob_acp.jsonrpc.errors import RpcError


def server(profile=None, env=None, path=None):
    log.setup("error")
    return AgentServer(Reader(path, profile, env if env is not None else {"XDG_CONFIG_HOME": "/nonexistent"},
                              log.get("test")), log.get("test"))


def test_with_acp_auth_and_no_model_sessions_ask_for_sign_in_and_authenticate_says_why(tmp_path):
    srv = server("full")
    init = srv.initialize({"protocolVersion": 1, "clientCapabilities": {}})
    assert [m["id"] for m in init.result["authMethods"]] == ["bob-model"] and "type" not in init.result["authMethods"][0]
    with pytest.raises(RpcError) as info:
        srv.new_session({"cwd": str(tmp_path), "mcpServers": []})
    assert info.value.code == -32000 and "OPENAI_API_KEY" in info.value.message
    assert setup_words() in info.value.message  # (as this process was started: `pytest` or `python -m pytest`)
    with pytest.raises(RpcError) as info:
        srv.authenticate({"methodId": "bob-model"})
    assert info.value.code == -32000
    with pytest.raises(RpcError) as info:
        srv.authenticate({"methodId": "other"})
    assert info.value.code == -32602
    terminal = srv.initialize({"protocolVersion": 1, "clientCapabilities": {"auth": {"terminal": True}}})
    method = terminal["authMethods"][0]
    assert (method["type"], method["args"]) == ("terminal", ["setup"])
    assert method["_meta"]["terminal-auth"]["args"][-1] == "setup"
    ready = server("full", {"XDG_CONFIG_HOME": "/nonexistent", "OPENAI_API_KEY": "sk-test-0123456789"})
    ready.initialize({"protocolVersion": 1})
    assert ready.authenticate({"methodId": "bob-model"}) == {} and ready.fresh().usable


def test_bob_without_auth_methods_answers_authenticate_with_nothing():
    srv = server()
    srv.initialize({"protocolVersion": 1})
    assert srv.authenticate({"methodId": "anything"}) == {}


def test_a_session_id_the_connection_holds_is_refused_and_the_held_one_kept(tmp_path):
    srv = server()
    srv.initialize({"protocolVersion": 1})
    first = srv.opener.make("20260101-000000-00000001", workspace.of(str(tmp_path)), None, None, srv.fresh())
    srv.table.admit(first)
    again = srv.opener.make("20260101-000000-00000001", workspace.of(str(tmp_path)), None, None, srv.fresh())
    with pytest.raises(RpcError) as info:
        srv.table.admit(again)
    assert info.value.code == -32603
    assert srv.table.sessions["20260101-000000-00000001"] is first


def settled(result=None, error=None, cancelled=False) -> Sent:
    """A request of Bob's as the endpoint settles it: answered, failed, or without an answer."""
    sent = Sent(0)
    if cancelled:
        sent.cancel()
    elif error is not None:
        sent.set_exception(PeerError(error))
    else:
        sent.set_result(result)
    return sent


@pytest.mark.parametrize("outcome, expected", [
    (settled({"outcome": {"outcome": "selected", "optionId": "allow"}}), "allow"),
    (settled({"outcome": {"outcome": "selected", "optionId": "allow_always"}}), "allow_always"),
    (settled({"outcome": {"outcome": "selected", "optionId": "maybe"}}), "reject"),
    (settled({"outcome": {"outcome": "cancelled"}}), "reject"),
    (settled({"outcome": {"outcome": "selected", "optionId": ["allow"]}}), "reject"),
    (settled({"outcome": "allow"}), "reject"),
    (settled(None), "reject"),
    (settled(error={"code": -1, "message": "no"}), "reject"),
    (settled(cancelled=True), "reject"),
])
def test_only_a_selection_of_an_offered_option_counts(outcome, expected):
    assert chosen_option(outcome, {"allow", "allow_always", "reject"}) == expected


def test_system_prompt_holds_instructions_environment_skills_and_agents_md(tmp_path):
    (tmp_path / "AGENTS.md").write_text("Always run `make check` before committing.\n")
    catalog = skills.discover(str(tmp_path), config.defaults(), env={"XDG_CONFIG_HOME": str(tmp_path / "none")})
    text = system_prompt.build(workspace.of(str(tmp_path)), catalog, datetime.datetime(2026, 12, 3, tzinfo=datetime.timezone.utc))
    assert text.startswith("You are Bob, a bash-first coding agent")
    assert f"working directory: {tmp_path}" in text and "date: 2026-12-03" in text
    assert "- greetings: Greet somebody with a festive message." in text
    assert "Always run `make check` before committing." in text
    other = tmp_path / "other"
    other.mkdir()
    assert "make check" not in system_prompt.build(workspace.of(str(other)), catalog)


def test_load_replaces_the_stored_system_prompt(tmp_path):
    srv = server()
    srv.initialize({"protocolVersion": 1})
    stored = [history.system("an old prompt"), history.user("hi"), history.assistant("hello")]
    session = srv.opener.make(sessions.new_id(), workspace.of(str(tmp_path)), stored, None, srv.fresh())
    assert session.conv.messages[0]["content"].startswith("You are Bob")
    assert session.conv.messages[1:] == stored[1:]
