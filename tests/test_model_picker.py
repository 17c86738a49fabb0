"""Issue 31: several models in one picker (`models:`), each with its own provider and endpoint,
the history carried across a switch, the choice kept in the session file; `choices: auto`;
`--check` over every entry. End to end against the real bob-acp (every frame validated against
the stable schema), the models one fake server that speaks all three APIs."""

import json
import subprocess

import pytest
import yaml
from bob_client import allow, bob_command

pytestmark = pytest.mark.e2e

KEYS = {"OPENAI_API_KEY": "sk-local-0123456789", "HOSTED_KEY": "sk-hosted-0123456789",
        "ANTHROPIC_API_KEY": "sk-ant-0123456789"}


def picker_config(server, **more):
    return {"model": {"name": "small-local", "baseUrl": server.url + "/v1", "retries": 0},
            "models": [{"id": "hosted", "provider": "openai-responses", "name": "gpt-5-codex",
                        "baseUrl": server.url + "/v1", "apiKeyEnv": "HOSTED_KEY", "retries": 0, "window": 400000},
                       {"id": "claude", "provider": "anthropic", "name": "claude-sonnet-4-5",
                        "baseUrl": server.url, "retries": 0}],
            "sessions": {"enabled": True}, "acp": {"configOptions": True}, **more}


def start(spawn_bob, server, config=None):
    bob = spawn_bob(config or picker_config(server), env=KEYS)
    bob.initialize()
    response, _ = bob.call("session/new", {"cwd": bob.workdir, "mcpServers": []})
    bob.read_frame()  # available_commands_update
    return bob, response["result"]


def model_option(result):
    return next(o for o in result["configOptions"] if o["id"] == "model")


def choose(bob, sid, value):
    return bob.result("session/set_config_option", {"sessionId": sid, "configId": "model", "value": value})


def test_the_picker_switches_api_and_endpoint_with_the_history_carried_over(spawn_bob, server, workdir):
    bob, result = start(spawn_bob, server)
    sid = result["sessionId"]
    option = model_option(result)
    assert [o["value"] for o in option["options"]] == ["small-local", "hosted", "claude"]
    assert option["currentValue"] == "small-local"

    # On the local model (chat completions): a tool call and its result.
    server.enqueue(server.openai_tool_call("bash", {"command": "echo local"}, call_id="call:local/1"),
                   server.openai_text("local done"))
    response, _ = bob.prompt(sid, "first", answer=allow)
    assert response["result"]["stopReason"] == "end_turn"
    assert server.requests[-1]["path"] == "/v1/chat/completions"

    # The hosted model on the Responses API: the earlier call and its output as items.
    reasoning = [o for o in choose(bob, sid, "hosted")["configOptions"] if o["id"] == "reasoning"][0]
    assert [o["value"] for o in reasoning["options"]] == ["default", "low", "medium", "high"]
    server.enqueue(server.responses_reply("hosted answer", encrypted="enc-hosted-1", summary=["thinking"]))
    response, frames = bob.prompt(sid, "second")
    assert response["result"]["stopReason"] == "end_turn"
    request = server.requests[-1]
    assert request["path"] == "/v1/responses" and request["headers"]["Authorization"] == "Bearer sk-hosted-0123456789"
    assert request["body"]["model"] == "gpt-5-codex"
    kinds = [item.get("type", "message") for item in request["body"]["input"]]
    assert kinds == ["message", "function_call", "function_call_output", "message", "message"]
    usage = [f["params"]["update"] for f in frames if f["params"]["update"]["sessionUpdate"] == "usage_update"]
    assert usage[-1]["size"] == 400000  # the entry's own context window

    # Anthropic: the other API's encrypted reasoning does not cross; the odd call id is made valid.
    choose(bob, sid, "claude")
    server.enqueue(server.anthropic_text("claude answer"))
    response, _ = bob.prompt(sid, "third")
    assert response["result"]["stopReason"] == "end_turn" and server.refused == []
    body = server.requests[-1]["body"]
    assert server.requests[-1]["path"] == "/v1/messages" and "enc-hosted-1" not in json.dumps(body)
    uses = [b for m in body["messages"] for b in m["content"] if b.get("type") == "tool_use"]
    assert uses[0]["id"] == "call_local_1"
    assert bob.close() == 0

    saved = json.loads(next((workdir / ".bob" / "sessions").glob("*.json")).read_text())
    assert saved["choices"]["model"] == "claude"

    # A new process: the choice is restored; back on the hosted model its own reasoning returns.
    again = spawn_bob(picker_config(server), env=KEYS)
    again.initialize()
    loaded, _ = again.call("session/load", {"sessionId": sid, "cwd": str(workdir), "mcpServers": []})
    assert model_option(loaded["result"])["currentValue"] == "claude"
    choose(again, sid, "hosted")
    server.enqueue(server.responses_reply("hosted again"))
    again.prompt(sid, "fourth")
    sent = server.requests[-1]["body"]["input"]
    assert {"type": "reasoning", "summary": [{"type": "summary_text", "text": "thinking"}],
            "encrypted_content": "enc-hosted-1"} in sent and server.refused == []


def test_an_entry_without_its_key_says_so_when_chosen(spawn_bob, server):
    """An entry for the official endpoint (no baseUrl: a local server needs no key) without its key."""
    config = picker_config(server)
    del config["models"][0]["baseUrl"]
    bob = spawn_bob(config, env={"OPENAI_API_KEY": KEYS["OPENAI_API_KEY"]})
    bob.initialize()
    sid = bob.result("session/new", {"cwd": bob.workdir, "mcpServers": []})["sessionId"]
    choose(bob, sid, "hosted")
    response, frames = bob.prompt(sid, "hi")
    assert response["result"]["stopReason"] == "refusal"
    text = "".join(f["params"]["update"]["content"]["text"] for f in frames
                   if f["params"]["update"]["sessionUpdate"] == "agent_message_chunk")
    assert "The model hosted cannot be used: it needs an API key in $HOSTED_KEY" in text


def test_choices_auto_lists_the_servers_models(spawn_bob, server):
    server.models = ["qwen2.5-coder:7b", "llama3.1:8b"]
    config = {"model": {"name": "llama3.1:8b", "baseUrl": server.url + "/v1", "choices": "auto"},
              "acp": {"configOptions": True}, "log": {"level": "debug"}}
    bob, result = start(spawn_bob, server, config)
    assert [o["value"] for o in model_option(result)["options"]] == ["llama3.1:8b", "qwen2.5-coder:7b"]
    assert server.gets[-1]["path"] == "/v1/models"
    server.enqueue(server.openai_text("from qwen"))
    choose(bob, result["sessionId"], "qwen2.5-coder:7b")
    bob.prompt(result["sessionId"], "hi")
    assert server.requests[-1]["body"]["model"] == "qwen2.5-coder:7b"


def test_choices_auto_with_a_server_that_has_no_list(spawn_bob, server):
    config = {"model": {"name": "local", "baseUrl": server.url + "/v1", "choices": "auto"},
              "acp": {"configOptions": True}}
    bob, result = start(spawn_bob, server, config)
    assert [o["value"] for o in model_option(result)["options"]] == ["local"]
    assert "no model list from its server (GET /models answered 404); offering local alone" in bob.wait_stderr(
        "no model list")


def test_the_default_profile_single_model_is_unchanged(spawn_bob, server):
    """model: alone, no models: the picker offers model.name and its choices, as before."""
    config = {"model": {"name": "one", "baseUrl": server.url + "/v1", "choices": ["two"]},
              "acp": {"configOptions": True}}
    _, result = start(spawn_bob, server, config)
    assert [o["value"] for o in model_option(result)["options"]] == ["one", "two"]


def test_check_says_which_models_answer(tmp_path, bob_env, server):
    config = picker_config(server)
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
    server.enqueue(server.openai_text("ok"), server.responses_failed("no such deployment", "model_not_found"))
    proc = subprocess.run(bob_command() + ["--check"], capture_output=True, env={**bob_env, **KEYS}, timeout=60,
                          text=True)
    lines = proc.stdout.splitlines()
    assert "model small-local: openai/small-local answers in" in "\n".join(lines)
    assert any(line.startswith("model hosted: openai-responses/gpt-5-codex does not answer: model API error: "
                               "no such deployment (model_not_found)") for line in lines)
    assert any(line.startswith("model claude: anthropic/claude-sonnet-4-5 does not answer") for line in lines)
    assert proc.returncode == 1


@pytest.mark.parametrize("models, words", [
    ([{"name": "x"}], "models[0].id"),
    ([{"id": "small-local"}], "the id 'small-local' is given twice"),
    ([{"id": "a", "nmae": "typo"}], "models[0].nmae"),
    ([{"id": "a", "headers": {"X": 1}}], "models[0].headers"),
    ([{"id": "a", "choices": "some"}], 'models[0].choices'),
])
def test_a_wrong_entry_names_its_key(tmp_path, bob_env, models, words):
    (tmp_path / "config.yaml").write_text(yaml.safe_dump({"model": {"name": "small-local"}, "models": models}))
    proc = subprocess.run(bob_command() + ["--check"], capture_output=True, env=bob_env, timeout=30, text=True)
    assert proc.returncode == 2 and words in proc.stderr, proc.stderr
