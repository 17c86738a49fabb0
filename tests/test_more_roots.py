"""Issue 27: sessions over more folders than one (acp.additionalDirectories), end to end against
the real bob-acp (every frame validated against the stable schema), the model a fake
OpenAI-compatible server that records each request."""

import json

import pytest
from bob_client import allow

pytestmark = pytest.mark.e2e

KEY = "sk-more-roots-0123456789"


@pytest.fixture
def roots(tmp_path, workdir):
    """A second project beside the session's folder, with its own AGENTS.md and project skill."""
    other = tmp_path / "library"
    (other / ".bob" / "skills" / "lib-release").mkdir(parents=True)
    (other / "AGENTS.md").write_text("LIBRARY RULES: run make lib-check before any commit.\n")
    (other / ".bob" / "skills" / "lib-release" / "SKILL.md").write_text(
        "---\nname: lib-release\ndescription: How the library is released.\n---\nTag, then publish.\n")
    (workdir / "AGENTS.md").write_text("APP RULES\n")
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    return other, outside


def start(spawn_bob, server, **config):
    bob = spawn_bob({"model": {"baseUrl": server.url + "/v1", "retries": 0}, **config}, env={"OPENAI_API_KEY": KEY})
    return bob, bob.initialize()


def new(bob, workdir, more):
    response, _ = bob.call("session/new", {"cwd": str(workdir), "mcpServers": [], "additionalDirectories": more})
    if "result" in response:
        bob.read_frame()  # the available_commands_update
    return response


def system_prompt(server, index=-1):
    return server.requests[index]["body"]["messages"][0]["content"]


def test_a_session_over_two_folders(spawn_bob, server, workdir, roots):
    other, outside = roots
    bob, init = start(spawn_bob, server, acp={"additionalDirectories": True, "sessionHistory": True},
                      sessions={"enabled": True}, permissions={"mode": "allow-edits"})
    assert init["agentCapabilities"]["sessionCapabilities"]["additionalDirectories"] == {}
    sid = new(bob, workdir, [str(other)])["result"]["sessionId"]
    server.enqueue(server.openai_tool_call("write_file", {"path": str(other / "notes.txt"), "content": "x\n"}),
                   server.openai_tool_call("write_file", {"path": str(outside / "notes.txt"), "content": "y\n"},
                                           call_id="call_2"),
                   server.openai_text("done"))
    asked = []

    def answer(request):
        asked.append(request["params"]["toolCall"]["title"])
        return allow(request)

    response, frames = bob.prompt(sid, "write both", answer=answer)
    assert response["result"]["stopReason"] == "end_turn"
    prompt = system_prompt(server)
    assert f"also part of this workspace (absolute paths; the same rules as the working directory): {other}" in prompt
    assert "LIBRARY RULES" in prompt and "APP RULES" in prompt and "lib-release" in prompt
    # allow-edits covers every root: the write in the second folder ran unasked, the one outside asked
    assert asked == [f"write_file: {outside / 'notes.txt'}"]
    assert (other / "notes.txt").read_text() == "x\n" and (outside / "notes.txt").read_text() == "y\n"
    saved = json.loads((workdir / ".bob" / "sessions" / f"{sid}.json").read_text())
    assert saved["additionalDirectories"] == [str(other)]
    listed = bob.result("session/list", {"cwd": str(workdir)})["sessions"]
    assert listed[0]["sessionId"] == sid and listed[0]["additionalDirectories"] == [str(other)]
    assert bob.result("session/list", {"cwd": str(workdir), "additionalDirectories": [str(outside)]}) == {"sessions": []}
    assert bob.close() == 0

    # A new process: load with the list that session/list reported, and the roots are back.
    again, _ = start(spawn_bob, server, acp={"additionalDirectories": True}, sessions={"enabled": True},
                     permissions={"mode": "allow-edits"})
    loaded, _ = again.call("session/load", {"sessionId": sid, "cwd": str(workdir), "mcpServers": [],
                                            "additionalDirectories": listed[0]["additionalDirectories"]})
    assert "result" in loaded
    server.enqueue(server.openai_tool_call("write_file", {"path": str(other / "more.txt"), "content": "z\n"}),
                   server.openai_text("again"))
    response, _ = again.prompt(sid, "one more", answer=answer)
    assert response["result"]["stopReason"] == "end_turn" and (other / "more.txt").read_text() == "z\n"
    assert len(asked) == 1 and str(other) in system_prompt(server)


def test_a_load_without_the_list_has_the_session_folder_alone(spawn_bob, server, workdir, roots):
    """The protocol's rule: omitted or empty, no further roots are activated on load or resume."""
    other, _ = roots
    bob, _ = start(spawn_bob, server, acp={"additionalDirectories": True, "sessionHistory": True},
                   sessions={"enabled": True}, permissions={"mode": "allow-edits"})
    sid = new(bob, workdir, [str(other)])["result"]["sessionId"]
    result = bob.result("session/resume", {"sessionId": sid, "cwd": str(workdir), "mcpServers": []})
    assert "sessionId" not in result
    server.enqueue(server.openai_tool_call("write_file", {"path": str(other / "n.txt"), "content": "x\n"}),
                   server.openai_text("done"))
    asked = []
    bob.prompt(sid, "write", answer=lambda r: asked.append(r) or allow(r))
    assert len(asked) == 1 and str(other) not in system_prompt(server)


def test_folders_are_checked_like_cwd(spawn_bob, server, workdir, roots):
    bob, _ = start(spawn_bob, server, acp={"additionalDirectories": True})
    for given, words in ((["relative/path"], "additionalDirectories[0]: must be an absolute path"),
                         ([str(workdir), str(workdir / "missing")], "additionalDirectories[1]: not a directory"),
                         ("/tmp", "additionalDirectories: must be an array")):
        error = new(bob, workdir, given)["error"]
        assert error["code"] == -32602 and words in error["message"], error


def test_the_default_profile_ignores_the_field(spawn_bob, server, workdir, roots):
    """Without acp.additionalDirectories: no capability, and a request carrying the field is
    answered as before (the field is not read)."""
    other, _ = roots
    bob, init = start(spawn_bob, server)
    assert "sessionCapabilities" not in init["agentCapabilities"]
    assert "result" in new(bob, workdir, ["relative/ignored"])
    sid = new(bob, workdir, [str(other)])["result"]["sessionId"]
    server.enqueue(server.openai_text("hi"))
    bob.prompt(sid, "hello")
    assert str(other) not in system_prompt(server) and "LIBRARY RULES" not in system_prompt(server)
