"""Issue 26 against the real bob-acp: the full profile, sign-in as ACP Registry clients check it,
`bob-acp setup`, the key file, and a broken config said in the editor."""

from __future__ import annotations

import json
import os
import socket
import stat
import subprocess
import time

import pytest
import yaml
from bob_client import Bob, bob_command, message_text

pytestmark = pytest.mark.e2e

REGISTRY_INIT = {"protocolVersion": 1, "clientInfo": {"name": "ACP Registry Validator", "version": "1.0.0"},
                 "clientCapabilities": {"terminal": True, "fs": {"readTextFile": True, "writeTextFile": True},
                                        "_meta": {"terminal_output": True, "terminal-auth": True}}}


def registry_types(methods: list[dict]) -> list[str]:
    """The registry CI's reading of authMethods: `type`, else `_meta` terminal-auth, else agent."""
    found = []
    for method in methods:
        kind = method.get("type")
        if not kind:
            meta = method.get("_meta") or {}
            kind = "terminal" if "terminal-auth" in meta else "agent"
        found.append(kind)
    return found


def test_the_registry_auth_check_passes_with_a_fresh_home(workdir, tmp_path):
    home = tmp_path / "fresh-home"
    home.mkdir()
    env = {"PATH": os.environ["PATH"], "HOME": str(home), "TERM": "dumb"}
    with Bob(str(workdir), env, ["--profile", "full"]) as bob:
        result = bob.result("initialize", REGISTRY_INIT)
        types = registry_types(result["authMethods"])
        assert types and set(types) <= {"agent", "terminal"} and "terminal" in types
        assert result["authMethods"][0]["args"] == ["setup"]
        response, _ = bob.call("session/new", {"cwd": str(workdir), "mcpServers": []})
        assert response["error"]["code"] == -32000 and "bob-acp setup" in response["error"]["message"]


def test_newer_clients_ask_for_terminal_auth_with_auth_terminal_and_others_get_an_agent_method(spawn_bob):
    bob = spawn_bob(args=["--profile", "full"])
    newer = bob.result("initialize", {"protocolVersion": 1, "clientCapabilities": {"auth": {"terminal": True}}})
    assert registry_types(newer["authMethods"]) == ["terminal"]
    plain = bob.result("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
    assert registry_types(plain["authMethods"]) == ["agent"]
    response, _ = bob.call("authenticate", {"methodId": "bob-model"})
    assert response["error"]["code"] == -32000 and "OPENAI_API_KEY" in response["error"]["message"]


def test_with_a_model_nothing_asks_for_authentication(spawn_bob, server, workdir):
    server.enqueue(server.openai_text("hello"))
    bob = spawn_bob({"model": {"baseUrl": server.url + "/v1", "retries": 0}}, args=["--profile", "full"])
    bob.initialize()
    sid = bob.new_session()
    assert message_text(bob.prompt(sid, "hi")[1]) == "hello"
    assert bob.result("authenticate", {"methodId": "bob-model"}) == {}


def test_the_full_profile_switches_every_opt_in_on_and_an_explicit_key_wins(spawn_bob, workdir, tmp_path):
    script = tmp_path / "script.yaml"
    script.write_text(yaml.safe_dump({"turns": []}))
    model = {"provider": "script", "script": str(script)}
    bob = spawn_bob({"model": model, "mcp": {"enabled": False}}, args=["--profile", "full"])
    init = bob.initialize()
    caps = init["agentCapabilities"]
    assert caps["loadSession"] is True and "sessionCapabilities" in caps
    assert caps["mcpCapabilities"]["http"] is False  # set explicitly: wins over the profile
    response, _ = bob.call("session/new", {"cwd": str(workdir), "mcpServers": []})
    assert "configOptions" in response["result"]
    in_file = spawn_bob({"model": model, "profile": "full", "acp": {"configOptions": False}})
    init = in_file.initialize()
    assert init["agentCapabilities"]["loadSession"] is True and init["authMethods"]
    response, _ = in_file.call("session/new", {"cwd": str(workdir), "mcpServers": []})
    assert "configOptions" not in response["result"]


def test_the_default_profile_keeps_the_documented_behaviour(spawn_bob):
    bob = spawn_bob()
    init = bob.initialize()
    assert init["authMethods"] == [] and init["agentCapabilities"]["loadSession"] is False
    assert bob.result("authenticate", {"methodId": "anything"}) == {}


def run_setup(args, bob_env, stdin="", timeout=60):
    return subprocess.run(bob_command() + ["setup", *args], env=bob_env, input=stdin, capture_output=True,
                          text=True, timeout=timeout)


def test_setup_writes_a_checked_config_and_a_private_key_file(bob_env, tmp_path, server, workdir):
    server.enqueue(server.openai_text("ok"), server.openai_text("hello from the set-up model"))
    config = tmp_path / "written" / "config.yaml"
    result = run_setup(["--provider", "openai-compatible", "--base-url", server.url + "/v1", "--model", "local-m",
                        "--key-stdin", "--config", str(config)], bob_env, stdin="sk-setup-key-0123456789\n")
    assert result.returncode == 0, result.stderr
    assert "answers" in result.stdout
    written = yaml.safe_load(config.read_text())
    key_file = written["model"]["apiKeyFile"]
    assert written["model"] == {"provider": "openai", "name": "local-m", "baseUrl": server.url + "/v1",
                                "apiKeyFile": key_file}
    assert stat.S_IMODE(os.stat(key_file).st_mode) == 0o600
    assert "sk-setup-key" not in config.read_text()
    with Bob(str(workdir), {**bob_env, "BOB_CONFIG": str(config)}) as bob:
        bob.initialize()
        sid = bob.new_session()
        assert message_text(bob.prompt(sid, "hi")[1]) == "hello from the set-up model"
        assert server.requests[-1]["headers"]["Authorization"] == "Bearer sk-setup-key-0123456789"
        assert "sk-setup-key" not in bob.stderr()


def test_setup_says_when_the_model_does_not_answer_and_keeps_other_keys(bob_env, tmp_path, server):
    server.enqueue(server.status(401, {"error": {"message": "invalid API key"}}))
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump({"log": {"level": "debug"}}))
    result = run_setup(["--provider", "openai", "--key-stdin", "--config", str(config),
                        "--base-url", server.url + "/v1"], bob_env, stdin="sk-wrong-key-0123456789\n")
    assert result.returncode == 1 and "model API 401: invalid API key" in result.stdout
    assert yaml.safe_load(config.read_text())["log"] == {"level": "debug"}
    missing = run_setup(["--provider", "anthropic", "--config", str(config)], {**bob_env}, stdin="")
    assert missing.returncode == 2 and "needs an API key" in missing.stderr


def test_a_key_file_others_can_read_is_refused_and_said_in_the_editor(bob_env, tmp_path, workdir):
    key = tmp_path / "openai.key"
    key.write_text("sk-readable-key-0123456789\n")
    key.chmod(0o644)
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump({"model": {"apiKeyFile": str(key)}}))
    check = subprocess.run(bob_command() + ["--check"], env=bob_env, capture_output=True, text=True, timeout=30)
    assert check.returncode == 2 and "can be read by others" in check.stderr and "chmod 600" in check.stderr
    with Bob(str(workdir), bob_env) as bob:
        bob.initialize()
        sid = bob.new_session()
        response, frames = bob.prompt(sid, "hi")
        assert response["result"]["stopReason"] == "refusal"
        assert "can be read by others" in message_text(frames) and "bob-acp setup" in message_text(frames)


@pytest.mark.parametrize("content", ["model: {nmae: x}\n", "model: [\n", "model: {baseUrl: ftp://x}\n"])
def test_a_broken_config_is_said_in_the_editor_not_as_an_exit(bob_env, tmp_path, workdir, content):
    (tmp_path / "config.yaml").write_text(content)
    with Bob(str(workdir), bob_env) as bob:
        init = bob.initialize()
        assert init["protocolVersion"] == 1
        sid = bob.new_session()
        response, frames = bob.prompt(sid, "hi")
        assert response["result"]["stopReason"] == "refusal"
        text = message_text(frames)
        assert "could not use its configuration" in text and str(tmp_path / "config.yaml") in text
    with Bob(str(workdir), bob_env, ["--profile", "full"]) as bob:
        bob.initialize()
        response, _ = bob.call("session/new", {"cwd": str(workdir), "mcpServers": []})
        assert response["error"]["code"] == -32000 and "could not use its configuration" in response["error"]["message"]
    check = subprocess.run(bob_command() + ["--check"], env=bob_env, capture_output=True, text=True, timeout=30)
    assert check.returncode == 2


def test_the_registry_manifest_names_this_version_and_the_full_profile():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    with open(os.path.join(root, "agent.json"), encoding="utf-8") as handle:
        manifest = json.load(handle)
    from bob_acp import __version__
    # The registry's folder is the id; "bob" is IBM Bob's, so the id is the package's own name, and
    # the name shown in an editor's list of agents is not IBM Bob's "Bob".
    assert manifest["id"] == "bob-acp" and manifest["version"] == __version__
    assert manifest["name"].strip().lower() not in ("bob", "ibm bob") and "bob-acp" in manifest["name"]
    uvx = manifest["distribution"]["uvx"]
    assert uvx["package"] == f"bob-acp=={__version__}"  # its console script is the package's name
    assert uvx["args"][:2] == ["--profile", "full"]
    for field in ("name", "description", "repository", "authors", "license"):
        assert manifest.get(field), field
    with open(os.path.join(root, "icon.svg"), encoding="utf-8") as handle:
        svg = handle.read()
    assert 'width="16"' in svg and 'height="16"' in svg and "currentColor" in svg
    import re
    colours = set(re.findall(r'(?:fill|stroke)="([^"]+)"', svg))
    assert colours <= {"currentColor", "none"}


# ---- issue 28 in part: embedded context, audio refused, a plan the editor shows ---------------------

def test_embedded_context_reaches_the_model_and_audio_is_refused(spawn_bob, server, workdir):
    from bob_client import updates  # noqa: F401
    server.enqueue(server.openai_text("seen"))
    bob = spawn_bob({"model": {"baseUrl": server.url + "/v1", "retries": 0}, "acp": {"embeddedContext": True}},
                    env={"OPENAI_API_KEY": "sk-embedded-0123456789"})
    init = bob.initialize()
    assert init["agentCapabilities"]["promptCapabilities"] == {"image": False, "audio": False, "embeddedContext": True}
    sid = bob.new_session()
    blocks = [{"type": "text", "text": "explain"},
              {"type": "resource", "resource": {"uri": "file:///home/me/my%20app/main.py#L2-L3",
                                                "text": "unsaved = True\n", "mimeType": "text/x-python"}},
              {"type": "resource", "resource": {"uri": "file:///home/me/logo.png", "blob": "aGVsbG8=",
                                                "mimeType": "image/png"}}]
    response, _ = bob.call("session/prompt", {"sessionId": sid, "prompt": blocks})
    assert response["result"]["stopReason"] == "end_turn"
    sent = server.requests[-1]["body"]["messages"][-1]["content"]
    assert "[attached resource: /home/me/my app/main.py (lines 2-3)]\nunsaved = True\n" in sent
    assert "[attached resource: /home/me/logo.png (image/png, about 5 bytes), not shown]" in sent
    refused, _ = bob.call("session/prompt", {"sessionId": sid, "prompt": [
        {"type": "audio", "data": "AAAA", "mimeType": "audio/wav"}]})
    assert refused["error"]["code"] == -32602 and "audio" in refused["error"]["message"]
    plain = spawn_bob({})
    assert plain.initialize()["agentCapabilities"]["promptCapabilities"]["embeddedContext"] is False


def test_the_plan_tool_sends_the_plan_and_a_load_shows_it_again(spawn_bob, tmp_path, workdir):
    from bob_client import updates
    entries = [{"content": "read the code", "priority": "high", "status": "completed"},
               {"content": "fix the bug", "priority": "medium", "status": "in_progress"}]
    script = tmp_path / "script.yaml"
    script.write_text(yaml.safe_dump({"turns": [{"replies": [
        {"tool_calls": [{"name": "update_plan", "arguments": {"entries": entries}}]}, {"text": "planned"}]}]}))
    config = {"model": {"provider": "script", "script": str(script)}, "tools": {"plan": True},
              "sessions": {"enabled": True}}
    bob = spawn_bob(config)
    bob.initialize()
    sid = bob.new_session()
    response, frames = bob.prompt(sid, "fix it")  # no question: a plan touches nothing
    assert response["result"]["stopReason"] == "end_turn"
    assert not [f for f in frames if f.get("method") == "session/request_permission"]
    assert updates(frames, "plan") == [{"sessionUpdate": "plan", "entries": entries}]
    assert updates(frames, "tool_call")[0]["kind"] == "think"
    bob.close()
    again = spawn_bob(config)
    again.initialize()
    _, frames = again.call("session/load", {"sessionId": sid, "cwd": str(workdir), "mcpServers": []})
    assert updates(frames, "plan")[-1]["entries"] == entries
    default = spawn_bob({"model": {"provider": "script", "script": str(script)}})
    default.initialize()
    sid = default.new_session()
    _, frames = default.prompt(sid, "fix it")
    assert updates(frames, "plan") == []  # without tools.plan the model has no such tool


PNG = ("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==")


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_an_image_reaches_the_model_as_its_api_takes_it_and_a_load_shows_it(spawn_bob, server, workdir, provider):
    from bob_client import updates
    reply = server.openai_text if provider == "openai" else server.anthropic_text
    server.enqueue(reply("a red dot"), reply("still a dot"))
    base = server.url + ("/v1" if provider == "openai" else "")
    config = {"model": {"provider": provider, "baseUrl": base, "retries": 0}, "acp": {"images": True},
              "sessions": {"enabled": True}}
    env = {"OPENAI_API_KEY": "sk-image-0123456789", "ANTHROPIC_API_KEY": "sk-image-0123456789"}
    bob = spawn_bob(config, env=env)
    assert bob.initialize()["agentCapabilities"]["promptCapabilities"]["image"] is True
    sid = bob.new_session()
    blocks = [{"type": "text", "text": "what is this?"}, {"type": "image", "mimeType": "image/png", "data": PNG}]
    response, _ = bob.call("session/prompt", {"sessionId": sid, "prompt": blocks})
    assert response["result"]["stopReason"] == "end_turn" and server.refused == []
    sent = json.dumps(server.requests[-1]["body"])
    assert (f"data:image/png;base64,{PNG}" if provider == "openai" else '"media_type": "image/png"') in sent
    for bad, words in (({"mimeType": "image/tiff", "data": PNG}, "mimeType must be one of"),
                       ({"mimeType": "image/png", "data": "not base64!"}, "not valid base64"),
                       ({"mimeType": "image/png", "data": "A" * (3 << 20)}, "larger than 2 MiB")):
        refused, _ = bob.call("session/prompt", {"sessionId": sid, "prompt": [{"type": "image", **bad}]})
        assert refused["error"]["code"] == -32602 and words in refused["error"]["message"]
    saved = (workdir / ".bob" / "sessions" / f"{sid}.json").read_text()
    assert saved.count(PNG) == 1  # kept once
    bob.close()
    again = spawn_bob(config, env=env)
    again.initialize()
    _, frames = again.call("session/load", {"sessionId": sid, "cwd": str(workdir), "mcpServers": []})
    images = [u["content"] for u in updates(frames, "user_message_chunk") if u["content"]["type"] == "image"]
    assert images == [{"type": "image", "mimeType": "image/png", "data": PNG}]
    response, _ = again.prompt(sid, "and now?")  # the history with its image is sent again, well formed
    assert response["result"]["stopReason"] == "end_turn" and server.refused == []


def test_without_the_key_an_image_block_is_ignored_as_before(spawn_bob, server):
    server.enqueue(server.openai_text("fine"))
    bob = spawn_bob({"model": {"baseUrl": server.url + "/v1", "retries": 0}}, env={"OPENAI_API_KEY": "sk-x-0123456789"})
    assert bob.initialize()["agentCapabilities"]["promptCapabilities"]["image"] is False
    sid = bob.new_session()
    response, _ = bob.call("session/prompt", {"sessionId": sid, "prompt": [
        {"type": "text", "text": "hi"}, {"type": "image", "mimeType": "image/tiff", "data": "??"}]})
    assert response["result"]["stopReason"] == "end_turn"
    assert server.requests[-1]["body"]["messages"][-1] == {"role": "user", "content": "hi"}


def test_setup_picks_from_the_models_a_server_lists_and_offers_the_responses_api(bob_env, tmp_path, server):
    """On a terminal: the providers (the Responses API among them), then an OpenAI-compatible
    server's own models (GET /models) to pick from, not a name to guess; the config's comments are
    said to go and kept in a copy."""
    import pexpect

    server.models = ["qwen3-coder", "llama3.1"]
    server.enqueue(server.openai_text("ok"))
    config = tmp_path / "config.yaml"
    config.write_text("# my notes on this setup\nlog: {level: debug}  # while trying\n")
    child = pexpect.spawn(bob_command()[0], bob_command()[1:] + ["setup", "--config", str(config)],
                          env=bob_env, encoding="utf-8", timeout=30)
    try:
        child.expect("Where does the model run")
        child.expect(r"2\) OpenAI, Responses API")
        child.sendline("4")
        child.expect("The server's URL")
        child.sendline(server.url + "/v1")
        child.expect("API key")
        child.sendline("")
        child.expect("Which of the server's models")
        child.expect(r"1\) llama3\.1")
        child.expect(r"2\) qwen3-coder")
        child.sendline("2")
        child.expect("has comments, which rewriting it drops")
        child.expect(pexpect.EOF)
    finally:
        child.close()
    assert child.exitstatus == 0, child.before
    written = yaml.safe_load(config.read_text())
    assert written["model"] == {"provider": "openai", "name": "qwen3-coder", "baseUrl": server.url + "/v1"}
    assert written["log"] == {"level": "debug"}
    assert (tmp_path / "config.yaml.bak").read_text().startswith("# my notes on this setup\n")
    assert server.gets[0]["path"] == "/v1/models"
    without_terminal = run_setup(["--provider", "openai-compatible", "--base-url", server.url + "/v1", "--no-check",
                                  "--config", str(tmp_path / "second.yaml")], bob_env)
    assert without_terminal.returncode == 0, without_terminal.stderr
    assert yaml.safe_load((tmp_path / "second.yaml").read_text())["model"]["name"] == "llama3.1"  # the first listed
    responses = run_setup(["--provider", "openai-responses", "--key-stdin", "--no-check", "--config",
                           str(tmp_path / "third.yaml")], bob_env, stdin="sk-responses-0123456789\n")
    assert responses.returncode == 0, responses.stderr
    assert yaml.safe_load((tmp_path / "third.yaml").read_text())["model"]["provider"] == "openai-responses"
    assert "has comments" not in responses.stdout


def test_setup_says_an_unreachable_server_at_once(bob_env, tmp_path):
    """Nothing listens at the address: said within seconds (it waited 14 s in silence for the
    check's retries), the config written all the same."""
    with socket.socket() as probe:  # a port nothing listens on: bound, never listening
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
        config = tmp_path / "config.yaml"
        started = time.monotonic()
        result = run_setup(["--provider", "openai-compatible", "--base-url", f"http://127.0.0.1:{port}/v1",
                            "--model", "m", "--config", str(config)], bob_env)
    assert result.returncode == 1 and f"cannot be reached: 127.0.0.1:{port}: Connection refused" in result.stdout
    assert time.monotonic() - started < 60  # (a generous bound: the retries alone took 14 s)
    assert yaml.safe_load(config.read_text())["model"]["baseUrl"] == f"http://127.0.0.1:{port}/v1"


@pytest.mark.parametrize("provider", ["openai-responses", "anthropic"])
def test_setup_lists_the_servers_models_for_every_provider(bob_env, tmp_path, server, provider):
    """With --base-url (a gateway, LiteLLM), every provider's setup offers the server's own models
    (Anthropic's at /v1/models, with its key header), not a name to guess."""
    server.models = ["zeta-model", "alpha-model"]
    config = tmp_path / "config.yaml"
    result = run_setup(["--provider", provider, "--key-stdin", "--no-check", "--config", str(config),
                        "--base-url", server.url], bob_env, stdin="sk-gateway-key-0123456789\n")
    assert result.returncode == 0, result.stderr
    assert yaml.safe_load(config.read_text())["model"]["name"] == "alpha-model"
    asked = server.gets[-1]
    assert asked["path"].endswith("/v1/models" if provider == "anthropic" else "/models")
    if provider == "anthropic":
        assert asked["headers"]["x-api-key"] == "sk-gateway-key-0123456789"
    else:
        assert asked["headers"]["Authorization"] == "Bearer sk-gateway-key-0123456789"


def test_setup_says_in_one_line_that_no_server_answers_and_asks_no_model(bob_env, tmp_path):
    import socket

    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    config = tmp_path / "config.yaml"
    result = run_setup(["--provider", "openai-compatible", "--config", str(config),
                        "--base-url", f"http://127.0.0.1:{port}/v1"], bob_env, stdin="")
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(lines) == 1, result.stderr
    assert f"nothing answers at http://127.0.0.1:{port}/v1" in lines[0] and "start the model's server" in lines[0]
    assert "Traceback" not in result.stderr and "HTTPConnectionPool" not in result.stderr + result.stdout
    assert not config.exists()


def test_sign_in_words_name_what_the_user_can_run(monkeypatch):
    """A registry user runs Bob through uvx: `bob-acp` is no command of theirs; and an editor with
    no terminal sign-in is not offered "the configured model" while there is none."""
    import sys

    from bob_acp.acp import auth
    from bob_acp.config import launch

    monkeypatch.setattr(sys, "argv", ["/home/u/.cache/uv/archive-v0/abc/bin/bob-acp"])
    assert launch.setup_words() == "uvx bob-acp setup"
    (none,) = auth.methods(terminal=False, usable=False)
    assert none["name"] == "Sign in once a model is set up" and "uvx bob-acp setup" in none["description"]
    assert auth.methods(terminal=False, usable=True)[0]["name"] == "Use the configured model"
