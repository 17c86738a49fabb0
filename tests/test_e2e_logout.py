"""logout (with acp.auth) against the real bob-acp: advertised in agentCapabilities.auth; it
forgets the key `bob-acp setup` stored (the file, its record, the config's apiKeyFile) so that
Bob asks for sign-in again, and never a key file the user made, a link put in its place, or a
key in the environment, which it names; without the key, logout is unknown."""

from __future__ import annotations

import os
import subprocess

import pytest
import yaml
from bob_client import bob_command

pytestmark = pytest.mark.e2e
KEY = "sk-stored-by-setup-0123456789"


def setup(bob_env, config_path):
    done = subprocess.run([*bob_command(), "setup", "--provider", "openai", "--model", "gpt-test", "--key-stdin",
                           "--no-check", "--config", str(config_path)], env=bob_env, input=KEY + "\n",
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return yaml.safe_load(config_path.read_text())["model"]["apiKeyFile"]


@pytest.fixture
def signed_in(spawn_bob, bob_env, tmp_path, workdir):
    def start(config=None):
        path = tmp_path / "config.yaml"
        path.write_text(yaml.safe_dump({"acp": {"auth": True}, **(config or {})}))
        key_file = setup(bob_env, path)
        bob = spawn_bob()
        init = bob.initialize()
        return bob, init, key_file, path
    return start


def new_session(bob, workdir):
    return bob.call("session/new", {"cwd": str(workdir), "mcpServers": []})[0]


def test_logout_forgets_the_stored_key_and_sign_in_is_asked_again(signed_in, workdir):
    bob, init, key_file, config = signed_in()
    assert init["agentCapabilities"]["auth"] == {"logout": {}}
    sid = new_session(bob, workdir)["result"]["sessionId"]
    result = bob.result("logout", {})
    assert result["_meta"]["bob"]["forgotten"] == [f"the key bob-acp setup stored in {key_file}",
                                                   f"model.apiKeyFile in {config}"]
    assert result["_meta"]["bob"]["kept"] == [] and result["_meta"]["bob"]["signedIn"] is False
    assert not os.path.exists(key_file)
    assert "apiKeyFile" not in yaml.safe_load(config.read_text())["model"]
    assert yaml.safe_load(config.read_text())["acp"] == {"auth": True}  # (the rest of the file kept)
    # Both a new session and a prompt of an open one ask for sign-in (-32000).
    assert new_session(bob, workdir)["error"]["code"] == -32000
    refused, _ = bob.call("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "hi"}]})
    assert refused["error"]["code"] == -32000
    assert KEY not in bob.stderr()
    # A second logout forgets nothing more, and says so.
    assert bob.result("logout", {})["_meta"]["bob"]["forgotten"] == []


def test_a_key_file_of_the_users_own_is_left(spawn_bob, tmp_path, workdir):
    own = tmp_path / "my.key"
    own.write_text(KEY + "\n")
    own.chmod(0o600)
    bob = spawn_bob({"acp": {"auth": True}, "model": {"provider": "openai", "name": "m", "apiKeyFile": str(own)}})
    bob.initialize()
    result = bob.result("logout", {})
    assert result["_meta"]["bob"]["forgotten"] == []
    assert result["_meta"]["bob"]["kept"] == [f"the key file {own}: yours, not one bob-acp setup stored; "
                                              "left as it is"]
    assert result["_meta"]["bob"]["signedIn"] is True
    assert own.read_text() == KEY + "\n"
    assert "sessionId" in new_session(bob, workdir)["result"]


def test_a_link_put_in_the_stored_keys_place_is_not_followed(signed_in, tmp_path, workdir):
    bob, _, key_file, _ = signed_in()
    precious = tmp_path / "precious.txt"
    precious.write_text("the user's work")
    os.unlink(key_file)
    os.symlink(precious, key_file)
    result = bob.result("logout", {})
    assert result["_meta"]["bob"]["forgotten"] == []
    assert precious.read_text() == "the user's work" and os.path.islink(key_file)


def test_a_key_in_the_environment_is_named_and_left(spawn_bob, bob_env, tmp_path, workdir):
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump({"acp": {"auth": True}}))
    key_file = setup(bob_env, path)
    bob = spawn_bob(env={"OPENAI_API_KEY": "sk-from-the-environment-000"})
    bob.initialize()
    result = bob.result("logout", {})
    assert result["_meta"]["bob"]["forgotten"][0] == f"the key bob-acp setup stored in {key_file}"
    assert result["_meta"]["bob"]["kept"] == [
        "the key in the environment variable OPENAI_API_KEY: the environment's, which Bob cannot change; "
        "unset it where the editor starts Bob"]
    assert result["_meta"]["bob"]["signedIn"] is True
    assert "sessionId" in new_session(bob, workdir)["result"]


def test_without_acp_auth_logout_is_unknown_and_not_advertised(spawn_bob):
    bob = spawn_bob({})
    init = bob.initialize()
    assert "auth" not in init["agentCapabilities"]
    assert bob.call("logout", {})[0]["error"]["code"] == -32601


def test_a_key_setup_could_not_record_is_still_written_and_the_user_is_told(bob_env, tmp_path):
    """The state folder cannot be written (a read-only one): setup writes the key all the same
    and says that sign-out will leave it."""
    state = tmp_path / "ro-state"
    state.mkdir()
    state.chmod(0o555)
    try:
        env = {**bob_env, "XDG_STATE_HOME": str(state)}
        as_user = ["setpriv", "--bounding-set=-all", "--inh-caps=-all", "--"] if os.geteuid() == 0 else []
        config = tmp_path / "config.yaml"
        done = subprocess.run([*as_user, *bob_command(), "setup", "--provider", "openai", "--model", "m",
                               "--key-stdin", "--no-check", "--config", str(config)], env=env, input=KEY + "\n",
                              capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        assert "could not be recorded as bob-acp setup's" in done.stdout and "sign-out will leave it" in done.stdout
        key_file = yaml.safe_load(config.read_text())["model"]["apiKeyFile"]
        assert open(key_file).read() == KEY + "\n"
    finally:
        state.chmod(0o755)


def test_with_a_base_url_logout_signs_out_and_no_request_carries_the_key(spawn_bob, bob_env, tmp_path, workdir,
                                                                          server):
    """A gateway or LiteLLM behind model.baseUrl: a model is "usable" without a key, yet after
    logout no request carries the forgotten key (an open session's prompt included), logout says
    signedIn: false, and new sessions and prompts ask for sign-in (-32000), never a retried 500;
    once a key is set up again, Bob is signed in."""
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump({"acp": {"auth": True}}))
    done = subprocess.run([*bob_command(), "setup", "--provider", "openai", "--model", "gpt-test", "--key-stdin",
                           "--no-check", "--base-url", server.url + "/v1", "--config", str(path)], env=bob_env,
                          input=KEY + "\n", capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    bob = spawn_bob()
    bob.initialize()
    sid = new_session(bob, workdir)["result"]["sessionId"]
    server.enqueue(server.openai_text("signed in"))
    assert bob.call("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "hi"}]})[0]["result"]
    assert server.requests[-1]["headers"]["Authorization"] == f"Bearer {KEY}"
    asked = len(server.requests)
    result = bob.result("logout", {})
    assert result["_meta"]["bob"]["signedIn"] is False
    refused, _ = bob.call("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "again"}]})
    assert refused["error"]["code"] == -32000, refused
    assert new_session(bob, workdir)["error"]["code"] == -32000
    assert len(server.requests) == asked  # (nothing sent: with the old key, or with none)
    done = subprocess.run([*bob_command(), "setup", "--provider", "openai", "--model", "gpt-test", "--key-stdin",
                           "--no-check", "--base-url", server.url + "/v1", "--config", str(path)], env=bob_env,
                          input="sk-a-new-key-9876543210\n", capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "sessionId" in new_session(bob, workdir)["result"]
