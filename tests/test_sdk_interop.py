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


class EditorClient(RecordingClient):
    """An editor with buffers: fs/read_text_file answers from them (unsaved text the disk does not
    have), fs/write_text_file lands in them; every request is recorded."""

    def __init__(self, buffers):
        super().__init__(["allow"] * 10)
        self.buffers = dict(buffers)
        self.requests = []

    async def read_text_file(self, path, session_id, limit=None, line=None, **kwargs):
        self.requests.append(("read", path, line, limit))
        if path not in self.buffers:
            raise acp.RequestError(-32002, "not open")
        lines = self.buffers[path].splitlines(keepends=True)
        start = (line or 1) - 1
        return schema.ReadTextFileResponse(content="".join(lines[start:start + limit] if limit else lines[start:]))

    async def write_text_file(self, content, path, session_id, **kwargs):
        self.requests.append(("write", path, content))
        self.buffers[path] = content
        return schema.WriteTextFileResponse()


def test_file_tools_read_and_write_through_the_editor(tmp_path, bob_env, workdir, caplog):
    """Issue 27 in part (tools.clientFs): the model sees the unsaved buffer, not the disk, and the
    edit is made from it and sent to the editor, which shows it for review; the disk is untouched."""
    app, other = workdir / "app.py", workdir / "other.py"
    app.write_text("value = 1  # on disk\n")
    other.write_text("only on disk\n")
    script = tmp_path / "script.yaml"
    script.write_text(yaml.safe_dump({"turns": [{"replies": [
        {"tool_calls": [{"name": "read_file", "arguments": {"path": "app.py"}}]},
        {"tool_calls": [{"name": "edit_file", "arguments": {"path": "app.py", "old_string": "unsaved",
                                                            "new_string": "edited"}}]},
        {"tool_calls": [{"name": "write_file", "arguments": {"path": "new.py", "content": "made\n"}}]},
        {"tool_calls": [{"name": "read_file", "arguments": {"path": "other.py"}}]},
        {"tool_calls": [{"name": "write_file", "arguments": {"path": "other.py", "content": "replaced\n"}}]},
        {"text": "done"}]}]}))
    (tmp_path / "config.yaml").write_text(yaml.safe_dump({"model": {"provider": "script", "script": str(script)},
                                                          "tools": {"clientFs": True}}))
    client = EditorClient({str(app): "value = 2  # unsaved\n"})

    async def body(conn):
        await conn.initialize(protocol_version=1, client_capabilities=schema.ClientCapabilities(
            fs=schema.FileSystemCapabilities(read_text_file=True, write_text_file=True)))
        session = await conn.new_session(cwd=str(workdir), mcp_servers=[])
        return await conn.prompt(session_id=session.session_id,
                                 prompt=[schema.TextContentBlock(type="text", text="go")])

    response = run(bob_env, str(workdir), client, body, caplog)
    assert response.stop_reason == "end_turn"
    outputs = [u.raw_output["output"] for u in client.updates
               if type(u).__name__ == "ToolCallProgress" and u.raw_output]
    assert outputs[0] == "value = 2  # unsaved\n"  # the editor's buffer, not the disk
    assert client.buffers[str(app)] == "value = 2  # edited\n" and app.read_text() == "value = 1  # on disk\n"
    assert client.buffers[str(workdir / "new.py")] == "made\n" and not (workdir / "new.py").exists()
    assert outputs[3] == "only on disk\n"  # a file the editor does not have: the disk, said in the log
    diffs = [c for u in client.updates if type(u).__name__ == "ToolCallProgress" and u.content
             for c in u.content if c.type == "diff"]
    assert diffs[0].old_text == "value = 2  # unsaved\n" and diffs[0].new_text == "value = 2  # edited\n"
    assert ("write", str(app), "value = 2  # edited\n") in client.requests
    # Each call asks the editor for a file at most once (one read each of the read_file calls, one
    # for the edit, one for the overwrite), and never for a file the disk does not have.
    reads = [r[1] for r in client.requests if r[0] == "read"]
    assert reads == [str(app), str(app), str(other), str(other)]
    assert client.buffers[str(other)] == "replaced\n"


def test_fork_through_the_sdk_client_copies_the_history_into_a_session_of_its_own(tmp_path, bob_env, workdir, caplog):
    """acp.fork (the full profile): the official client's fork_session; the fork answers as the
    unstable schema has it, holds the conversation so far under its own id, file and title, and
    the original goes on without what the fork was told."""
    script = tmp_path / "script.yaml"
    script.write_text(yaml.safe_dump({"turns": [{"match": "remember", "replies": [{"text": "I will."}]},
                                                {"replies": [{"text": "noted"}]}]}))
    (tmp_path / "config.yaml").write_text(yaml.safe_dump({
        "model": {"provider": "script", "script": str(script)}, "sessions": {"enabled": True},
        "acp": {"fork": True, "sessionHistory": True}}))
    client = RecordingClient([])

    async def body(conn):
        init = await conn.initialize(protocol_version=1)
        assert init.agent_capabilities.session_capabilities.fork is not None
        opened = await conn.new_session(cwd=str(workdir), mcp_servers=[])
        original = opened.session_id
        await conn.prompt(session_id=original, prompt=[schema.TextContentBlock(type="text", text="remember the plan")])
        fork = await conn.fork_session(session_id=original, cwd=str(workdir), mcp_servers=[])
        assert fork.session_id != original and (fork.modes, fork.config_options) == (opened.modes, opened.config_options)
        await conn.prompt(session_id=fork.session_id, prompt=[schema.TextContentBlock(type="text", text="only the fork")])
        listed = {s.session_id: s.title for s in (await conn.list_sessions(cwd=str(workdir))).sessions}
        return original, fork.session_id, listed

    original, forked, listed = run(bob_env, str(workdir), client, body, caplog)
    assert listed == {original: "remember the plan", forked: "remember the plan (fork)"}
    assert any(type(u).__name__ == "SessionInfoUpdate" and u.title == "remember the plan (fork)" for u in client.updates)

    def users(sid):
        saved = yaml.safe_load((workdir / ".bob" / "sessions" / f"{sid}.json").read_text())
        return [m["content"][0]["text"] for m in saved["messages"] if m["role"] == "user"]

    assert users(original) == ["remember the plan"]
    assert users(forked) == ["remember the plan", "only the fork"]


def test_the_default_profile_has_no_fork(spawn_bob, workdir):
    bob = spawn_bob({"sessions": {"enabled": True}})
    init = bob.initialize()
    assert "fork" not in init["agentCapabilities"].get("sessionCapabilities", {})
    response, _ = bob.call("session/fork", {"sessionId": "20260101-000000-00000001", "cwd": str(workdir)})
    assert response["error"]["code"] == -32601


def test_project_rules_through_the_sdk_client(tmp_path, bob_env, workdir, caplog):
    """permissions.projectRules: the SDK's client reads the question's five options and picks
    "always in this project"; a second Bob process runs the command unasked, and says by which
    rule, in updates the SDK's types parse."""
    script = tmp_path / "script.yaml"
    script.write_text(yaml.safe_dump({"turns": [{"replies": [
        {"tool_calls": [{"name": "bash", "arguments": {"command": "echo sdk-rule"}}]}, {"text": "done"}]}]}))
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(
        {"model": {"provider": "script", "script": str(script)}, "permissions": {"projectRules": True}}))

    async def body(conn):
        await conn.initialize(protocol_version=1, client_info=schema.Implementation(name="sdk-test", version="1"))
        session = await conn.new_session(cwd=str(workdir), mcp_servers=[])
        return await conn.prompt(session_id=session.session_id, prompt=[schema.TextContentBlock(type="text", text="go")])

    first = RecordingClient(["allow_project"])
    assert run(bob_env, str(workdir), first, body, caplog).stop_reason == "end_turn"
    options = first.permissions[0][1]
    assert [(o.option_id, o.kind) for o in options] == [
        ("allow", "allow_once"), ("allow_always", "allow_always"), ("allow_project", "allow_always"),
        ("reject", "reject_once"), ("reject_project", "reject_always")]
    second = RecordingClient([])
    assert run(bob_env, str(workdir), second, body, caplog).stop_reason == "end_turn"
    assert second.permissions == []
    ruled = [u for u in second.updates if type(u).__name__ == "ToolCallProgress" and u.field_meta]
    assert ruled and ruled[0].field_meta["bob"]["rule"] == "always `echo sdk-rule …`"
    assert ruled[0].title.endswith("· rule: always `echo sdk-rule …`")
