"""Issue 27: bash in the editor's own terminal (tools.clientTerminal), served by the official ACP
Python SDK's client side, which runs each command itself as an editor would; everything Bob sends
must parse into the SDK's types without a warning."""

import asyncio
import os
import signal

import pytest
import yaml

acp = pytest.importorskip("acp")
from acp import schema  # noqa: E402
from bob_client import bash  # noqa: E402
from test_sdk_interop import RecordingClient, run  # noqa: E402

pytestmark = pytest.mark.e2e


class TerminalClient(RecordingClient):
    """An editor's terminals: each command run as a process of the client's, its output kept
    within outputByteLimit (the end, as ACP says), every request recorded in order."""

    def __init__(self, fail_create=False):
        super().__init__(["allow"] * 10)
        self.requests = []
        self.terminals = {}
        self.fail_create = fail_create

    async def create_terminal(self, command, session_id, args=None, cwd=None, env=None, output_byte_limit=None,
                              **kwargs):
        self.requests.append(("create", command, args, cwd, env, output_byte_limit))
        if self.fail_create:
            raise acp.RequestError(-32603, "no terminal here")
        variables = {**os.environ, **{v.name: v.value for v in env or []}}
        proc = await asyncio.create_subprocess_exec(command, *(args or []), cwd=cwd, env=variables,
                                                    stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
                                                    start_new_session=True)
        terminal_id = f"term-{len(self.terminals) + 1}"
        state = {"proc": proc, "output": b"", "limit": output_byte_limit, "truncated": False}
        state["reader"] = asyncio.ensure_future(self._read(state))
        self.terminals[terminal_id] = state
        return schema.CreateTerminalResponse(terminal_id=terminal_id)

    async def _read(self, state):
        while True:
            chunk = await state["proc"].stdout.read(65536)
            if not chunk:
                return
            state["output"] += chunk
            if state["limit"] is not None and len(state["output"]) > state["limit"]:
                state["output"] = state["output"][-state["limit"]:]
                state["truncated"] = True

    def _status(self, proc):
        if proc.returncode is None:
            return None
        if proc.returncode < 0:
            return schema.TerminalExitStatus(exit_code=None, signal=signal.Signals(-proc.returncode).name)
        return schema.TerminalExitStatus(exit_code=proc.returncode, signal=None)

    async def wait_for_terminal_exit(self, session_id, terminal_id, **kwargs):
        self.requests.append(("wait", terminal_id))
        state = self.terminals[terminal_id]
        await state["proc"].wait()
        await state["reader"]
        status = self._status(state["proc"])
        return schema.WaitForTerminalExitResponse(exit_code=status.exit_code, signal=status.signal)

    async def terminal_output(self, session_id, terminal_id, **kwargs):
        self.requests.append(("output", terminal_id))
        state = self.terminals[terminal_id]
        return schema.TerminalOutputResponse(output=state["output"].decode(errors="replace"),
                                             truncated=state["truncated"], exit_status=self._status(state["proc"]))

    async def kill_terminal(self, session_id, terminal_id, **kwargs):
        self.requests.append(("kill", terminal_id))
        proc = self.terminals[terminal_id]["proc"]
        if proc.returncode is None:
            os.killpg(proc.pid, signal.SIGKILL)
            await proc.wait()
        return schema.KillTerminalResponse()

    async def release_terminal(self, session_id, terminal_id, **kwargs):
        self.requests.append(("release", terminal_id))
        state = self.terminals.pop(terminal_id)
        if state["proc"].returncode is None:
            os.killpg(state["proc"].pid, signal.SIGKILL)
            await state["proc"].wait()
        state["reader"].cancel()
        return schema.ReleaseTerminalResponse()


def configure(tmp_path, replies, **config):
    script = tmp_path / "script.yaml"
    script.write_text(yaml.safe_dump({"turns": [{"replies": replies}]}))
    (tmp_path / "config.yaml").write_text(yaml.safe_dump({"model": {"provider": "script", "script": str(script)},
                                                          **config}))


async def start(conn, workdir, terminal=True):
    await conn.initialize(protocol_version=1, client_capabilities=schema.ClientCapabilities(terminal=terminal))
    return (await conn.new_session(cwd=str(workdir), mcp_servers=[])).session_id


def outputs(client):
    return [u.raw_output["output"] for u in client.updates if type(u).__name__ == "ToolCallProgress" and u.raw_output]


def test_bash_runs_in_the_editors_terminal_with_keys_kept_out(tmp_path, bob_env, workdir, caplog):
    configure(tmp_path, [bash('echo from-terminal; pwd; echo "token=[$BUILD_TOKEN] key=[$OPENAI_API_KEY]"; exit 3'),
                         {"text": "done"}], tools={"clientTerminal": True})
    env = {**bob_env, "BUILD_TOKEN": "tok-0123456789", "OPENAI_API_KEY": "sk-terminal-0123456789"}
    client = TerminalClient()

    async def body(conn):
        sid = await start(conn, workdir)
        return await conn.prompt(session_id=sid, prompt=[schema.TextContentBlock(type="text", text="go")])

    os.environ["BUILD_TOKEN"] = "tok-in-the-editor-environment"  # what the editor itself holds
    try:
        response = run(env, str(workdir), client, body, caplog)
    finally:
        del os.environ["BUILD_TOKEN"]
    assert response.stop_reason == "end_turn"
    kinds = [r[0] for r in client.requests]
    assert kinds == ["create", "wait", "output", "release"]
    _, command, args, cwd, variables, limit = client.requests[0]
    assert (command, args[0], cwd, limit) == ("bash", "-c", str(workdir), 30000)
    given = {v.name: v.value for v in variables}
    assert given["BUILD_TOKEN"] == "" and given["OPENAI_API_KEY"] == "" and given["HOME"] == bob_env["HOME"]
    shown = [c for u in client.updates if type(u).__name__ == "ToolCallProgress" and u.content
             for c in u.content if c.type == "terminal"]
    assert shown and {c.terminal_id for c in shown} == {"term-1"}
    result = outputs(client)[0]
    assert result == f"from-terminal\n{workdir}\ntoken=[] key=[]\n[exit code: 3]"
    final = [u for u in client.updates if type(u).__name__ == "ToolCallProgress" and u.status == "failed"]
    assert final and final[-1].content[0].type == "terminal"


def test_the_time_limit_kills_the_command_and_the_terminal_is_released(tmp_path, bob_env, workdir, caplog):
    configure(tmp_path, [bash("echo started; sleep 30", timeout=1), {"text": "done"}],
              tools={"clientTerminal": True})
    client = TerminalClient()

    async def body(conn):
        sid = await start(conn, workdir)
        return await conn.prompt(session_id=sid, prompt=[schema.TextContentBlock(type="text", text="go")])

    assert run(bob_env, str(workdir), client, body, caplog).stop_reason == "end_turn"
    assert [r[0] for r in client.requests] == ["create", "wait", "kill", "output", "release"]
    assert outputs(client)[0] == "started\n\n[timed out after 1 s: the command was killed]"


def test_a_cancel_kills_and_releases_the_terminal_and_the_turn_answers_at_once(tmp_path, bob_env, workdir, caplog):
    configure(tmp_path, [bash("sleep 30"), {"text": "never"}], tools={"clientTerminal": True})
    client = TerminalClient()

    async def body(conn):
        sid = await start(conn, workdir)
        turn = asyncio.ensure_future(conn.prompt(session_id=sid, prompt=[schema.TextContentBlock(type="text",
                                                                                                 text="go")]))
        while ("wait", "term-1") not in client.requests:
            await asyncio.sleep(0.02)
        await conn.cancel(session_id=sid)
        response = await asyncio.wait_for(turn, 5)
        for _ in range(250):  # the kill and the release follow the answer
            if ("release", "term-1") in client.requests:
                break
            await asyncio.sleep(0.02)
        return response

    assert run(bob_env, str(workdir), client, body, caplog).stop_reason == "cancelled"
    kinds = [r[0] for r in client.requests]
    assert kinds[:2] == ["create", "wait"] and kinds[-2:] == ["kill", "release"]
    assert client.terminals == {}


def test_a_client_that_cannot_create_a_terminal_gets_bobs_own_process(tmp_path, bob_env, workdir, caplog):
    configure(tmp_path, [bash("echo in-bob"), {"text": "done"}], tools={"clientTerminal": True},
              log={"file": str(tmp_path / "bob.log")})
    client = TerminalClient(fail_create=True)

    async def body(conn):
        sid = await start(conn, workdir)
        return await conn.prompt(session_id=sid, prompt=[schema.TextContentBlock(type="text", text="go")])

    assert run(bob_env, str(workdir), client, body, caplog).stop_reason == "end_turn"
    assert [r[0] for r in client.requests] == ["create"]
    assert outputs(client)[0] == "in-bob\n[exit code: 0]"
    assert "terminal/create: no terminal here; running the command in Bob instead" in (tmp_path / "bob.log").read_text()


def test_the_default_profile_never_uses_the_editors_terminal(tmp_path, bob_env, workdir, caplog):
    """The key off (the default), a client offering terminals still gets none of Bob's requests."""
    configure(tmp_path, [bash("echo own-process"), {"text": "done"}])
    client = TerminalClient()

    async def body(conn):
        sid = await start(conn, workdir)
        return await conn.prompt(session_id=sid, prompt=[schema.TextContentBlock(type="text", text="go")])

    assert run(bob_env, str(workdir), client, body, caplog).stop_reason == "end_turn"
    assert client.requests == [] and outputs(client)[0] == "own-process\n[exit code: 0]"


def test_a_sandboxed_command_in_the_editors_terminal_runs_in_the_sessions_sandbox(tmp_path, bob_env, workdir,
                                                                                 caplog):
    """The editor runs the launcher itself: it joins the session's sandbox (made by Bob), so the
    command cannot write .git or reach the network, and shares the session's own /tmp."""
    from bob_acp import sandbox as sandbox_module

    if sandbox_module.abi() < 6 or not sandbox_module.machine(False).namespaces:
        pytest.skip("needs Landlock ABI 6 and namespaces")
    (workdir / ".git").mkdir()
    configure(tmp_path, [bash("echo inside > /tmp/mark; echo x > .git/x; echo in-project > ok.txt; cat /tmp/mark"),
                         {"text": "done"}], tools={"clientTerminal": True, "sandbox": "workspace"},
              permissions={"mode": "sandboxed"})
    client = TerminalClient()

    async def body(conn):
        sid = await start(conn, workdir)
        return await conn.prompt(session_id=sid, prompt=[schema.TextContentBlock(type="text", text="go")])

    assert run(bob_env, str(workdir), client, body, caplog).stop_reason == "end_turn"
    _, command, args, cwd, variables, limit = client.requests[0]
    from bob_acp.processes.children import PYTHON_FLAGS

    assert args[:5] == [*PYTHON_FLAGS, sandbox_module.LAUNCHER] and "--join" in args
    result = outputs(client)[0]
    assert "Read-only file system" in result and "inside" in result
    assert (workdir / "ok.txt").read_text() == "in-project\n" and not (workdir / ".git" / "x").exists()
    assert not os.path.exists("/tmp/mark") or open("/tmp/mark").read() != "inside\n"
