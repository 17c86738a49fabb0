"""On/off session options (SessionConfigBoolean) against the real bob-acp: the sandbox's network
for a session's commands, only to a client that advertises `session.configOptions.boolean`,
set with session/set_config_option, from the next command (a sandbox made with the network
gives a command of a session that turned it off a network namespace of its own), said, kept in
the session file only in the safe direction."""

from __future__ import annotations

import json
import socket

import pytest
from bob_client import allow, bash, outputs, updates

from bob_acp import sandbox as sandbox_module

pytestmark = [pytest.mark.e2e, pytest.mark.skipif(sandbox_module.abi() < 4, reason="needs Landlock ABI 4 (TCP)")]

BOOLEAN = {"session": {"configOptions": {"boolean": {}}, "notices": {}}}
CONFIG = {"tools": {"sandbox": "workspace"}, "acp": {"configOptions": True}, "sessions": {"enabled": True}}


@pytest.fixture
def listener():
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    yield server.getsockname()[1]
    server.close()


def connect(port):
    return (f"python3 -c \"import socket; socket.create_connection(('127.0.0.1', {port}), 5); print('connected')\" "
            "2>/dev/null || echo refused")


@pytest.fixture
def switching_bob(spawn_bob, tmp_path, listener):
    def start(capabilities=BOOLEAN, **more):
        turns = [{"match": "try", "replies": [bash(connect(listener)), {"text": "tried"}]},
                 {"match": "keep a job", "replies": [bash("sleep 60 >/dev/null 2>&1 &"), {"text": "kept"}]},
                 {"match": "leave a relay", "replies": [bash("setsid sh -c 'touch detached; sleep 60' >/dev/null 2>&1 "
                                                             "< /dev/null & while [ ! -e detached ]; do sleep 0.01; done"),
                                                        {"text": "left"}]}]
        path = tmp_path / "script.json"
        path.write_text(json.dumps({"turns": turns}))
        bob = spawn_bob({**CONFIG, "model": {"provider": "script", "script": str(path)}, **more})
        bob.initialize(capabilities)
        return bob
    return start


def network_option(result):
    return next((o for o in result["configOptions"] if o["id"] == "sandboxNetwork"), None)


def switch(bob, sid, value):
    return bob.call("session/set_config_option", {"sessionId": sid, "configId": "sandboxNetwork", "type": "boolean",
                                                  "value": value})


def tried(bob, sid):
    _, frames = bob.prompt(sid, "try", answer=allow)
    return outputs(frames)[0]


def test_only_a_client_that_advertises_booleans_is_offered_one(switching_bob, workdir):
    bob = switching_bob(capabilities={})
    result = bob.result("session/new", {"cwd": str(workdir), "mcpServers": []})
    assert network_option(result) is None
    response, _ = switch(bob, result["sessionId"], True)
    assert response["error"]["code"] == -32602


def test_the_network_switch_takes_effect_at_the_next_command_and_is_said(switching_bob, workdir):
    bob = switching_bob()
    result = bob.result("session/new", {"cwd": str(workdir), "mcpServers": []})
    sid = result["sessionId"]
    assert network_option(result) == {"id": "sandboxNetwork", "name": "Sandbox network", "type": "boolean",
                                      "currentValue": False, "description": network_option(result)["description"]}
    assert tried(bob, sid).startswith("refused")
    response, frames = switch(bob, sid, True)
    assert network_option(response["result"])["currentValue"] is True
    said = [u for u in updates(frames, "notice")]
    assert said and said[0]["title"].startswith("The sandbox's network is on for this session's commands")
    assert [u["configOptions"] for u in updates(frames, "config_option_update")][-1] == response["result"]["configOptions"]
    assert tried(bob, sid).startswith("connected")
    # Off again while a job keeps the sandbox (made with the network) alive: the next command
    # joins it in a network namespace of its own.
    bob.prompt(sid, "keep a job", answer=allow)
    switch(bob, sid, False)
    assert tried(bob, sid).startswith("refused")
    # Not a boolean: refused, nothing changed.
    response, _ = bob.call("session/set_config_option", {"sessionId": sid, "configId": "sandboxNetwork",
                                                         "value": "on"})
    assert response["error"]["code"] == -32602


def test_a_saved_switch_is_restored_only_towards_less_network(switching_bob, workdir, spawn_bob):
    bob = switching_bob(tools={"sandbox": "workspace", "sandboxNetwork": True})
    sid = bob.result("session/new", {"cwd": str(workdir), "mcpServers": []})["sessionId"]
    switch(bob, sid, False)
    stored = json.loads((workdir / ".bob" / "sessions" / f"{sid}.json").read_text())
    assert stored["choices"]["network"] == "off"
    assert bob.close() == 0
    again = spawn_bob()
    again.initialize(BOOLEAN)
    loaded, _ = again.call("session/load", {"sessionId": sid, "cwd": str(workdir), "mcpServers": []})
    assert network_option(loaded["result"])["currentValue"] is False
    assert tried(again, sid).startswith("refused")


def test_turning_the_network_off_ends_the_jobs_that_have_it(switching_bob, workdir):
    """A job started while the network was on keeps it: a relay later commands could use. So
    turning the network off ends the sandbox and its jobs at once, and says so."""
    from test_e2e_sandbox import sandboxes_of

    bob = switching_bob(tools={"sandbox": "workspace", "sandboxNetwork": True})
    sid = bob.result("session/new", {"cwd": str(workdir), "mcpServers": []})["sessionId"]
    bob.prompt(sid, "leave a relay", answer=allow)
    assert sandboxes_of(bob.pid), "the job keeps its sandbox"
    response, frames = switch(bob, sid, False)
    said = [u["title"] for u in updates(frames, "notice")]
    assert any("the jobs still running in the sandbox, which had the network, were ended" in t for t in said), said
    assert not sandboxes_of(bob.pid)
    assert tried(bob, sid).startswith("refused")
