"""Interop with the official ACP Python SDK (`agent-client-protocol`) as the client.

The SDK is asyncio; only the tests may use it. Everything Bob sends must parse into the SDK's
types without a warning or a logged validation error.
"""

import asyncio
import logging
import warnings

import pytest
import yaml

acp = pytest.importorskip("acp")
from acp import schema  # noqa: E402
from bob_client import bob_command  # noqa: E402

pytestmark = pytest.mark.e2e

SCRIPT = {"turns": [
    {"match": "tools", "replies": [
        {"text": "Working.", "tool_calls": [{"name": "bash", "arguments": {"command": "echo from-bash"}}]},
        {"tool_calls": [{"name": "write_file", "arguments": {"path": "sdk.txt", "content": "v1\n"}}]},
        {"tool_calls": [{"name": "edit_file", "arguments": {"path": "sdk.txt", "old_string": "v1", "new_string": "v2"}}]},
        {"tool_calls": [{"name": "bash", "arguments": {"command": "echo second-bash"}}]},
        {"text": "All done."}]},
    {"match": "slow", "replies": [{"chunks": ["one ", "two ", "three"], "delay": 2}]},
    {"replies": [{"text": "hello from the script"}]},
]}


class RecordingClient:
    """A Client for the SDK: answers permission requests from a list, records every update."""

    def __init__(self, answers):
        self.answers = list(answers)
        self.updates = []
        self.permissions = []

    async def request_permission(self, session_id, tool_call, options, **kwargs):
        self.permissions.append((tool_call, options))
        choice = self.answers.pop(0) if self.answers else "reject"
        if choice == "cancelled":
            return schema.RequestPermissionResponse(outcome=schema.DeniedOutcome(outcome="cancelled"))
        return schema.RequestPermissionResponse(outcome=schema.AllowedOutcome(outcome="selected", option_id=choice))

    async def session_update(self, session_id, update, **kwargs):
        self.updates.append(update)

    async def write_text_file(self, *a, **k):
        raise AssertionError("Bob never calls fs/*")

    async def read_text_file(self, *a, **k):
        raise AssertionError("Bob never calls fs/*")


@pytest.fixture
def sdk_env(tmp_path, bob_env, workdir):
    script = tmp_path / "script.yaml"
    script.write_text(yaml.safe_dump(SCRIPT))
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(
        {"model": {"provider": "script", "script": str(script)}, "sessions": {"enabled": True}}))
    return bob_env


async def _with_bob(env, cwd, client, body):
    command = bob_command()
    async with acp.spawn_agent_process(client, command[0], *command[1:], env=env, cwd=cwd) as (conn, proc):
        try:
            return await asyncio.wait_for(body(conn), 30)
        finally:
            proc.stdin.close()
            await asyncio.wait_for(proc.wait(), 5)
            assert proc.returncode == 0


def run(env, cwd, client, body, caplog):
    caplog.set_level(logging.WARNING)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        result = asyncio.run(_with_bob(env, cwd, client, body))
    problems = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert problems == [], [r.getMessage() for r in problems]
    return result


def kinds(updates):
    return [type(u).__name__ for u in updates]


def test_initialize_new_prompt_with_tools_and_permissions(sdk_env, workdir, caplog):
    client = RecordingClient(["allow", "allow_always", "reject"])

    async def body(conn):
        init = await conn.initialize(protocol_version=1, client_info=schema.Implementation(name="sdk-test", version="1"))
        assert init.protocol_version == 1 and init.agent_info.name == "bob"
        assert init.agent_capabilities.load_session is True
        session = await conn.new_session(cwd=str(workdir), mcp_servers=[])
        response = await conn.prompt(session_id=session.session_id,
                                     prompt=[schema.TextContentBlock(type="text", text="use the tools")])
        return response

    response = run(sdk_env, str(workdir), client, body, caplog)
    assert response.stop_reason == "end_turn"
    # allow (bash), allow_always (write_file), reject (edit_file); the second bash asks again
    assert [p[0].title for p in client.permissions] == [
        "bash: echo from-bash", "write_file: sdk.txt", "edit_file: sdk.txt", "bash: echo second-bash"]
    assert (workdir / "sdk.txt").read_text() == "v1\n"  # the edit was rejected
    names = kinds(client.updates)
    assert names[0] == "AvailableCommandsUpdate" and "ToolCallStart" in names and "ToolCallProgress" in names
    diffs = [c for u in client.updates if type(u).__name__ == "ToolCallProgress" and u.content
             for c in u.content if c.type == "diff"]
    assert diffs[0].path == str(workdir / "sdk.txt") and diffs[0].old_text is None and diffs[0].new_text == "v1\n"


def test_cancel_mid_turn_then_load_in_a_new_process(sdk_env, workdir, caplog):
    client = RecordingClient([])

    async def body(conn):
        await conn.initialize(protocol_version=1)
        session = await conn.new_session(cwd=str(workdir), mcp_servers=[])
        turn = asyncio.ensure_future(conn.prompt(session_id=session.session_id,
                                                 prompt=[schema.TextContentBlock(type="text", text="slow please")]))
        while not any(type(u).__name__ == "AgentMessageChunk" for u in client.updates):
            await asyncio.sleep(0.02)
        await conn.cancel(session_id=session.session_id)
        response = await turn
        assert response.stop_reason == "cancelled"
        second = await conn.prompt(session_id=session.session_id,
                                   prompt=[schema.TextContentBlock(type="text", text="hi")])
        assert second.stop_reason == "end_turn"
        return session.session_id

    sid = run(sdk_env, str(workdir), client, body, caplog)
    loader = RecordingClient([])

    async def load(conn):
        await conn.initialize(protocol_version=1)
        await conn.load_session(cwd=str(workdir), session_id=sid, mcp_servers=[])

    run(sdk_env, str(workdir), loader, load, caplog)
    names = kinds(loader.updates)
    assert names == ["UserMessageChunk", "AgentMessageChunk", "UserMessageChunk", "AgentMessageChunk",
                     "AvailableCommandsUpdate"]
    assert loader.updates[1].content.text == "one "


def test_history_and_selectors_through_the_sdk(tmp_path, bob_env, workdir, caplog):
    script = tmp_path / "script.yaml"
    script.write_text(yaml.safe_dump(SCRIPT))
    (tmp_path / "config.yaml").write_text(yaml.safe_dump({
        "model": {"provider": "script", "script": str(script), "choices": ["model-b"]},
        "sessions": {"enabled": True}, "acp": {"sessionHistory": True, "configOptions": True}}))
    client = RecordingClient([])

    async def first(conn):
        init = await conn.initialize(protocol_version=1)
        assert init.agent_capabilities.session_capabilities.list is not None
        session = await conn.new_session(cwd=str(workdir), mcp_servers=[])
        assert [o.id for o in session.config_options] == ["model", "mode"]
        changed = await conn.set_config_option(config_id="model", session_id=session.session_id, value="model-b")
        assert changed.config_options[0].current_value == "model-b"
        await conn.prompt(session_id=session.session_id,
                          prompt=[schema.TextContentBlock(type="text", text="hello history")])
        listed = await conn.list_sessions(cwd=str(workdir))
        assert listed.sessions[0].session_id == session.session_id and listed.sessions[0].title == "hello history"
        return session.session_id

    sid = run(bob_env, str(workdir), client, first, caplog)

    async def second(conn):
        await conn.initialize(protocol_version=1)
        resumed = await conn.resume_session(session_id=sid, cwd=str(workdir), mcp_servers=[])
        assert resumed.config_options[0].current_value == "model-b"  # kept in the file
        response = await conn.prompt(session_id=sid, prompt=[schema.TextContentBlock(type="text", text="again")])
        assert response.stop_reason == "end_turn"

    run(bob_env, str(workdir), RecordingClient([]), second, caplog)


def test_the_sdk_client_sends_an_image_and_an_embedded_file(tmp_path, bob_env, workdir, server, caplog):
    """Issue 28 with the official client: the full profile's prompt capabilities, the image and the
    resource in the model request (the fake server checks the image part's shape), a plan."""
    png = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
    server.enqueue(server.openai_text("a dot in main.py"))
    (tmp_path / "config.yaml").write_text(yaml.safe_dump({"model": {"baseUrl": server.url + "/v1", "retries": 0}}))
    env = {**bob_env, "OPENAI_API_KEY": "sk-sdk-image-0123456789"}
    client = RecordingClient([])

    async def body(conn):
        init = await conn.initialize(protocol_version=1)
        caps = init.agent_capabilities.prompt_capabilities
        assert caps.image is True and caps.embedded_context is True and caps.audio is False
        session = await conn.new_session(cwd=str(workdir), mcp_servers=[])
        return await conn.prompt(session_id=session.session_id, prompt=[
            schema.TextContentBlock(type="text", text="what is in these?"),
            schema.ImageContentBlock(type="image", mimeType="image/png", data=png),
            schema.EmbeddedResourceContentBlock(type="resource", resource=schema.TextResourceContents(
                uri=f"file://{workdir}/main.py", text="print('unsaved')\n", mimeType="text/x-python"))])

    command = bob_command() + ["--profile", "full"]

    async def with_profile():
        async with acp.spawn_agent_process(client, command[0], *command[1:], env=env, cwd=str(workdir)) as (conn, proc):
            try:
                return await asyncio.wait_for(body(conn), 30)
            finally:
                proc.stdin.close()
                await asyncio.wait_for(proc.wait(), 5)

    caplog.set_level(logging.WARNING)
    response = asyncio.run(with_profile())
    assert response.stop_reason == "end_turn" and server.refused == []
    last = server.requests[-1]["body"]["messages"][-1]
    assert last["content"][1] == {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{png}"}}
    assert f"[attached resource: {workdir}/main.py]\nprint('unsaved')\n" in last["content"][0]["text"]
