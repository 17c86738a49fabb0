"""SPEC §2 against the real bob-acp process: every frame it writes is schema-validated."""

import os
import signal
import time

import pytest
from bob_client import message_text

from bob_acp import __version__

pytestmark = pytest.mark.e2e


def vm(pid, field):
    with open(f"/proc/{pid}/status") as handle:
        for line in handle:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise AssertionError(field)


def err(frame):
    return frame["id"], frame["error"]["code"]


def test_initialize_answers_exactly_and_logs_the_client(spawn_bob):
    bob = spawn_bob()
    before = time.time()
    result = bob.result("initialize", {"protocolVersion": 3, "clientCapabilities": {"fs": {"readTextFile": True}},
                                       "clientInfo": {"name": "zed", "version": "0.201.0"}})
    after = time.time()
    assert result == {
        "protocolVersion": 1,
        "agentCapabilities": {
            "loadSession": False,
            "promptCapabilities": {"image": False, "audio": False, "embeddedContext": False},
            "mcpCapabilities": {"http": False, "sse": False},
        },
        "agentInfo": {"name": "bob", "title": "Bob (bash-first agent)", "version": __version__},
        "authMethods": [],
    }
    assert __version__ == "0.20.0"
    line = next(line for line in bob.wait_stderr("[acp] initialize: client zed 0.201.0, protocol 3").splitlines()
                if "[acp] initialize" in line)
    import datetime
    stamp = datetime.datetime.strptime(line.split()[0], "%Y-%m-%dT%H:%M:%S.%fZ").replace(
        tzinfo=datetime.timezone.utc).timestamp()
    assert before - 0.01 <= stamp <= after + 0.01  # the time of the event, not of its writing
    assert bob.close() == 0


def test_load_session_is_advertised_only_when_sessions_are_enabled(spawn_bob):
    bob = spawn_bob({"sessions": {"enabled": True}})
    assert bob.initialize()["agentCapabilities"]["loadSession"] is True


def test_a_5_mib_line_is_refused_without_holding_it_and_the_next_frame_is_answered(spawn_bob):
    bob = spawn_bob({"log": {"level": "debug"}})
    bob.initialize()
    bob.wait_stderr("warm-up done")  # what start-up loads is loaded: memory from now on is the frames'
    bob.wait_stderr(f"bob {__version__}")
    before = vm(bob.pid, "VmHWM")
    bob.send_raw(b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"pad":"' + b"x" * (5 << 20) + b'"}}\n')
    frame = bob.read_frame()
    # Answered under its own id (read from the line's start), the limit named: the client's request ends.
    assert err(frame) == (1, -32600) and "limit of 4194304 bytes" in frame["error"]["message"]
    assert vm(bob.pid, "VmHWM") - before < 5 << 20
    huge = 64 << 20  # far past the cap: memory must not follow the line
    bob.send_raw(b"[" + b"1," * (huge // 2) + b"1]\n")
    assert err(bob.read_frame(timeout=60)) == (None, -32600)
    assert vm(bob.pid, "VmHWM") - before < 8 << 20
    bob.send_raw(b'{"jsonrpc":"2.0","method":"session/prompt","params":{"pad":"' + b"x" * (5 << 20) + b'"},"id":"s-9"}\n')
    assert err(bob.read_frame()) == ("s-9", -32600)  # (an id after the params: read from the line's end)
    assert bob.result("authenticate", {"methodId": "none"}) == {}


@pytest.mark.parametrize("raw, expected", [
    (b"{oops\n", (None, -32700)),
    (b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"v":Infinity}}\n', (None, -32700)),
    (b'{"id":1,"method":"initialize","params":{}}\n', (None, -32600)),
    (b'{"jsonrpc":"2.1","id":1,"method":"initialize","params":{}}\n', (None, -32600)),
    (b'{"jsonrpc":"2.0","id":{"x":1},"method":"initialize","params":{}}\n', (None, -32600)),
    (b'{"jsonrpc":"2.0","id":[1],"method":"initialize","params":{}}\n', (None, -32600)),
    (b'{"jsonrpc":"2.0","id":false,"method":"initialize","params":{}}\n', (None, -32600)),
    (b'{"jsonrpc":"2.0","id":1,"method":7,"params":{}}\n', (None, -32600)),
    (b'[{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}]\n', (None, -32600)),
    (b'"just a string"\n', (None, -32600)),
    (b'3\n', (None, -32600)),
    (b'{"jsonrpc":"2.0","id":5,"method":"nope/nothing","params":{}}\n', (5, -32601)),
    (b'{"jsonrpc":"2.0","id":6,"method":"_zed/extension","params":{}}\n', (6, -32601)),
    (b'{"jsonrpc":"2.0","id":7,"method":"session/new","params":{"cwd":"/"}}\n', (7, -32600)),
    (b'{"jsonrpc":"2.0","id":8,"method":"session/prompt","params":{}}\n', (8, -32600)),
    (b'{"jsonrpc":"2.0","id":9,"method":"session/set_mode","params":{}}\n', (9, -32600)),
    (b'{"jsonrpc":"2.0","id":10,"method":"authenticate","params":{"methodId":"x"}}\n', (10, -32600)),
])
def test_malformed_frames_get_the_right_error_and_bob_goes_on(spawn_bob, raw, expected):
    bob = spawn_bob()
    bob.send_raw(raw)
    assert err(bob.read_frame()) == expected
    bob.initialize()
    assert bob.close() == 0


def test_unknown_notifications_and_responses_are_ignored(spawn_bob):
    bob = spawn_bob()
    bob.notify("whatever/happened", {"x": 1})
    bob.send({"jsonrpc": "2.0", "id": 4242, "result": {"outcome": {"outcome": "selected", "optionId": "allow"}}})
    bob.send({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": "nobody"}})
    assert bob.no_frame_within(0.3)
    bob.initialize()
    bob.wait_stderr("response to unknown request id 4242 ignored")


@pytest.mark.parametrize("method, params, field", [
    ("initialize", {"protocolVersion": "1"}, "protocolVersion"),
    ("session/new", {"mcpServers": []}, "cwd"),
    ("session/new", {"cwd": "relative/dir", "mcpServers": []}, "cwd"),
    ("session/new", {"cwd": "/definitely/not/here", "mcpServers": []}, "cwd"),
    ("session/new", {"cwd": "/", "mcpServers": {}}, "mcpServers"),
    ("session/prompt", {"prompt": []}, "sessionId"),
    ("session/prompt", {"sessionId": 5, "prompt": []}, "sessionId"),
    ("authenticate", {}, "methodId"),
])
def test_missing_or_mistyped_params_name_the_field(spawn_bob, method, params, field):
    bob = spawn_bob()
    if method != "initialize":
        bob.initialize()
    response, _ = bob.call(method, params)
    assert response["error"]["code"] == -32602
    assert field in response["error"]["message"]


def test_prompt_field_must_be_an_array(spawn_bob, workdir):
    bob = spawn_bob()
    bob.initialize()
    sid = bob.new_session()
    response, _ = bob.call("session/prompt", {"sessionId": sid, "prompt": "hello"})
    assert response["error"]["code"] == -32602 and "prompt" in response["error"]["message"]


def test_unknown_session_is_invalid_params_carrying_the_id(spawn_bob):
    bob = spawn_bob()
    bob.initialize()
    response, _ = bob.call("session/prompt", {"sessionId": "20260101-000000-deadbeef", "prompt": []})
    assert response["error"]["code"] == -32602
    assert response["error"]["data"] == {"sessionId": "20260101-000000-deadbeef"}


@pytest.mark.parametrize("method", ["session/set_mode", "session/set_config_option", "session/list",
                                    "session/resume", "session/close", "logout", "session/load"])
def test_methods_bob_does_not_offer_are_not_found(spawn_bob, method):
    bob = spawn_bob()
    bob.initialize()
    response, _ = bob.call(method, {"sessionId": "x", "cwd": "/", "mcpServers": []})
    assert response["error"]["code"] == -32601


def test_authenticate_answers_empty(spawn_bob):
    bob = spawn_bob()
    bob.initialize()
    assert bob.result("authenticate", {"methodId": "anything"}) == {}


def test_session_new_id_commands_after_response_and_mcp_servers_counted(spawn_bob, workdir):
    bob = spawn_bob()
    bob.initialize()
    servers = [{"name": "fs", "command": "/bin/mcp-fs", "args": [], "env": []},
               {"name": "git", "command": "/bin/mcp-git", "args": [], "env": []}]
    msg_id = bob.request_async("session/new", {"cwd": str(workdir), "mcpServers": servers})
    response = bob.read_frame()
    assert response["id"] == msg_id  # the response comes first: the editor must know the id
    sid = response["result"]["sessionId"]
    import re
    assert re.fullmatch(r"\d{8}-\d{6}-[0-9a-f]{8}", sid)
    stamp = time.strftime("%Y%m%d-%H", time.gmtime())
    assert sid[:11] == stamp[:11]
    update = bob.read_frame()
    assert update["method"] == "session/update" and update["params"]["sessionId"] == sid
    commands = update["params"]["update"]["availableCommands"]
    assert commands[:2] == [
        {"name": "new", "description": "Clear the history and start a new session"},
        {"name": "compact", "description": "Compress the history now, keeping the last turns"},
    ]
    bob.wait_stderr(f"[acp] session {sid}: new in {workdir}; 2 MCP server(s) ignored")


def test_no_model_configured_refuses_with_instructions(spawn_bob):
    bob = spawn_bob()
    bob.initialize()
    sid = bob.new_session()
    response, frames = bob.prompt(sid, "hello")
    assert response["result"] == {"stopReason": "refusal"}
    chunks = [f["params"]["update"] for f in frames]
    assert len(chunks) == 1 and chunks[0]["sessionUpdate"] == "agent_message_chunk"
    assert "OPENAI_API_KEY" in chunks[0]["content"]["text"]


def test_session_bound_refuses_past_the_limit(spawn_bob):
    bob = spawn_bob({"limits": {"maxSessions": 2}})
    bob.initialize()
    bob.new_session()
    bob.new_session()
    response, _ = bob.call("session/new", {"cwd": bob.workdir, "mcpServers": []})
    assert response["error"]["code"] == -32602 and "maxSessions" in response["error"]["message"]


def test_session_bound_evicts_the_oldest(spawn_bob):
    bob = spawn_bob({"limits": {"maxSessions": 2, "sessionOverflow": "evict_oldest"}})
    bob.initialize()
    first = bob.new_session()
    second = bob.new_session()
    third = bob.new_session()
    response, _ = bob.prompt(first, "hi")
    assert response["error"]["code"] == -32602 and response["error"]["data"] == {"sessionId": first}
    for sid in (second, third):
        assert bob.prompt(sid, "hi")[0]["result"]["stopReason"] == "refusal"
    bob.wait_stderr(f"[acp] session {first}: evicted")


def test_eof_exits_0_within_a_second(spawn_bob):
    bob = spawn_bob()
    bob.initialize()
    assert bob.close(timeout=5) == 0  # how fast it exits is measured by scripts/bench.py


def test_requests_queued_before_eof_are_still_answered(spawn_bob):
    bob = spawn_bob()
    bob.send_raw(b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}\n'
                 b'{"jsonrpc":"2.0","id":2,"method":"authenticate","params":{"methodId":"a"}}\n')
    bob.proc.sendeof()
    assert bob.read_frame()["id"] == 1
    assert bob.read_frame()["id"] == 2
    assert bob.wait(3) == 0


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP])
def test_signals_exit_0_within_a_second(spawn_bob, sig):
    bob = spawn_bob()
    bob.initialize()
    os.kill(bob.pid, sig)
    assert bob.wait(5) == 0  # how fast: scripts/bench.py
    bob.wait_stderr(f"[acp] {sig.name}: shutting down")


def test_a_broken_config_is_one_line_and_check_exits_2(spawn_bob, tmp_path, bob_env):
    # Serving ACP, Bob logs the line and serves (the editor then shows it: tests/test_e2e_registry.py);
    # --check stops with it.
    import subprocess

    from bob_client import bob_command
    (tmp_path / "config.yaml").write_text("model:\n  nmae: x\n")
    proc = subprocess.run(bob_command(), input=b"", capture_output=True, env=bob_env, timeout=20)
    assert proc.returncode == 0 and proc.stdout == b""
    errors = [line for line in proc.stderr.decode().splitlines() if "[error" in line]
    assert len(errors) == 1 and "model.nmae" in errors[0] and str(tmp_path / "config.yaml") in errors[0]
    check = subprocess.run(bob_command() + ["--check"], input=b"", capture_output=True, env=bob_env, timeout=20)
    assert check.returncode == 2
    lines = check.stderr.decode().strip().splitlines()
    assert len(lines) == 1 and "model.nmae" in lines[0] and str(tmp_path / "config.yaml") in lines[0]


def test_a_lone_surrogate_in_a_prompt_is_answered_under_its_own_id(scripted):
    bob, sid = scripted([{"replies": [{"text": "fine"}]}])
    raw = ('{"jsonrpc":"2.0","id":41,"method":"session/prompt","params":{"sessionId":"%s",'
           '"prompt":[{"type":"text","text":"broken \\ud83d emoji"}]}}\n' % sid).encode()
    bob._methods[41] = "session/prompt"
    bob.send_raw(raw)
    response, frames = bob.wait_response(41)
    assert response["result"] == {"stopReason": "end_turn"} and message_text(frames) == "fine"
    bob.send_raw(b'\xef\xbb\xbf{"jsonrpc":"2.0","id":42,"method":"authenticate","params":{"methodId":"x"}}\n')
    assert bob.wait_response(42)[0]["result"] == {}  # a BOM before a frame is skipped


def test_unknown_sessions_say_session_not_found(spawn_bob, write_config):
    bob = spawn_bob({"sessions": {"enabled": True}})
    bob.initialize()
    missing = "20260101-000000-0000abcd"
    for method, params in (("session/prompt", {"sessionId": missing, "prompt": []}),
                           ("session/load", {"sessionId": missing, "cwd": bob.workdir, "mcpServers": []})):
        response, _ = bob.call(method, params)
        error = response["error"]
        assert error["code"] == -32602 and "session not found" in error["message"], method
        assert error["data"]["sessionId"] == missing
    assert "error" in error["data"]  # load also says why (the product document)


@pytest.mark.parametrize("burst", [
    [signal.SIGHUP, signal.SIGTERM], [signal.SIGTERM, signal.SIGTERM, signal.SIGINT],
    [signal.SIGUSR1, signal.SIGTERM, signal.SIGUSR1, signal.SIGHUP], [signal.SIGINT] * 8,
])
def test_a_burst_of_signals_never_wedges_bob(spawn_bob, burst):
    """An editor dying sends SIGHUP to the group while something forwards a SIGTERM: a handler
    that logged through a lock deadlocked on the second one (3 of 16 tries). Now a handler
    only notes its signal; whatever the burst, Bob exits 0, said once."""
    for _ in range(4):
        bob = spawn_bob()
        bob.initialize()
        bob.new_session()
        for signum in burst:
            os.kill(bob.pid, signum)
        assert bob.wait(20) == 0
        said = bob.stderr().split("bob " + __version__)[-1]  # (this Bob's own lines: they share a file)
        assert said.count("shutting down") == 1 and "Traceback" not in said, said


def test_a_terminal_that_hangs_up_is_one_line(bob_env, tmp_path):
    """Bob on a pty whose other end closes (a terminal window shut): the input ends with a line,
    never an error and a traceback. What the read sees depends on timing: EIO for a read already
    waiting when the other end closes, the end of input for one that starts after the hang-up (a
    busy machine: CI's loaded run), SIGHUP where the pty is the controlling terminal; each is one
    quiet end."""
    import pty
    import subprocess

    from bob_client import bob_command

    (tmp_path / "config.yaml").write_text("{}\n")
    master, slave = pty.openpty()
    log = tmp_path / "stderr.log"
    with open(log, "wb") as err:
        proc = subprocess.Popen(bob_command(), stdin=slave, stdout=subprocess.DEVNULL, stderr=err, env=bob_env,
                                start_new_session=True)
    os.close(slave)
    deadline = time.monotonic() + 20
    while "speaks the Agent Client Protocol" not in log.read_text() and time.monotonic() < deadline:
        time.sleep(0.02)
    os.close(master)  # (the hang-up)
    assert proc.wait(20) == 0
    text = log.read_text()
    assert "Traceback" not in text and "[error" not in text and "[warning" not in text, text
    said = text.split("speaks the Agent Client Protocol")[-1]
    endings = ("input closed: Input/output error", "SIGHUP: shutting down")
    assert sum(said.count(ending) for ending in endings) <= 1, said  # (one line for the cause, if any)
    assert said.rstrip().endswith("input closed: bye"), said
