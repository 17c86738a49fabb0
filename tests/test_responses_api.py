"""Issue 31: OpenAI's Responses API (provider: openai-responses) and the per-model request
settings (headers, query, keyHeader, extraBody), against the fake server through the real
requests path; the default configuration's requests byte for byte as before."""

import json
import threading
import time

import pytest
import yaml

from bob_acp import config
from bob_acp.cancel import Cancel
from bob_acp.context import history
from bob_acp.exceptions import Cancelled, ModelError
from bob_acp.jsonrpc import codec
from bob_acp.providers import http as http_module
from bob_acp.providers.base import Quiet
from bob_acp.providers.openai import OpenAIProvider
from bob_acp.providers.responses import ResponsesProvider

KEY = "sk-responses-secret-0123456789"
TOOLS = [{"name": "bash", "description": "Run a command.", "parameters": {"type": "object", "properties": {
    "command": {"type": "string"}}, "required": ["command"]}}]


@pytest.fixture(autouse=True)
def fast_backoff(monkeypatch):
    monkeypatch.setattr(http_module, "BACKOFF_BASE", 0.01)


def settings(tmp_path, server, **model):
    data = {"model": {"provider": "openai-responses", "baseUrl": server.url + "/v1", "name": "gpt-5-codex",
                      "retries": 0, **model}}
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(data))
    return config.load(str(path), env={}).model


class Seen(Quiet):
    def __init__(self):
        self.texts, self.thoughts = [], []

    def text(self, chunk):
        self.texts.append(chunk)

    def thought(self, chunk):
        self.thoughts.append(chunk)


def test_text_reasoning_summary_and_usage_stream_in_order(server, tmp_path):
    server.enqueue(server.responses_reply("Hello there", summary=["Looking at it.", "Done looking."],
                                          encrypted="gAAAA-enc-1", usage=321, cached=300))
    provider = ResponsesProvider(settings(tmp_path, server, maxTokens=500), KEY)
    seen = Seen()
    reply = provider.generate([history.system("be brief"), history.user("hi")], TOOLS, seen, Cancel(),
                              reasoning="high")
    assert "".join(seen.texts) == "Hello there" and len(seen.texts) == 2
    assert "".join(seen.thoughts) == "Looking at it.\n\nDone looking."
    assert (reply.usage.input, reply.usage.output, reply.usage.cache_read) == (321, 7, 300)
    assert reply.thinking == [{"type": "reasoning", "encrypted_content": "gAAAA-enc-1", "summary": [
        {"type": "summary_text", "text": "Looking at it."}, {"type": "summary_text", "text": "Done looking."}]}]
    request = server.requests[-1]
    assert request["path"] == "/v1/responses" and request["headers"]["Authorization"] == f"Bearer {KEY}"
    body = request["body"]
    assert body["instructions"] == "be brief" and body["input"] == [{"role": "user", "content": "hi"}]
    assert (body["store"], body["include"], body["stream"]) == (False, ["reasoning.encrypted_content"], True)
    assert body["tools"] == [{"type": "function", **TOOLS[0]}]
    assert body["reasoning"] == {"effort": "high", "summary": "auto"} and body["max_output_tokens"] == 500


def test_a_reasoning_model_keeps_its_chain_across_tool_calls(server, tmp_path):
    """The encrypted reasoning item comes back before the call it led to, the call's output after
    it; the fake refuses (400) what the real API refuses."""
    server.enqueue(server.responses_reply(calls=[("bash", {"command": "ls"}, "call_7")], encrypted="enc-A",
                                          summary=["I should list."]),
                   server.responses_reply("two files"))
    provider = ResponsesProvider(settings(tmp_path, server), KEY)
    messages = [history.system("sys"), history.user("what is here?")]
    reply = provider.generate(messages, TOOLS, Quiet(), Cancel())
    assert [(c.id, c.name, c.arguments) for c in reply.tool_calls] == [("call_7", "bash", {"command": "ls"})]
    call = {"id": "call_7", "ref": "call_1", "name": "bash", "arguments": {"command": "ls"}}
    messages += [history.assistant(reply.text, [call], reply.thinking, "default"),
                 history.tool_result(call, "a.py\nb.py\n[exit code: 0]")]
    assert provider.generate(messages, TOOLS, Quiet(), Cancel()).text == "two files"
    assert server.refused == []
    sent = server.requests[-1]["body"]["input"]
    assert sent[1:] == [
        {"type": "reasoning", "summary": [{"type": "summary_text", "text": "I should list."}],
         "encrypted_content": "enc-A"},
        {"type": "function_call", "call_id": "call_7", "name": "bash", "arguments": '{"command":"ls"}'},
        {"type": "function_call_output", "call_id": "call_7", "output": "a.py\nb.py\n[exit code: 0]"}]


def test_failures_are_one_line_errors(server, tmp_path):
    provider = ResponsesProvider(settings(tmp_path, server), KEY)
    server.enqueue(server.responses_failed("The model is overloaded", "server_error"),
                   server.responses_error("Rate limit reached for gpt-5-codex", "rate_limit_exceeded"),
                   server.responses_reply("cut", usage=None))
    with pytest.raises(ModelError, match=r"^model API error: The model is overloaded \(server_error\)$"):
        provider.generate([history.user("x")], [], Quiet(), Cancel())
    with pytest.raises(ModelError, match=r"^model API error: Rate limit reached for gpt-5-codex \(rate_limit_exceeded\)$"):
        provider.generate([history.user("x")], [], Quiet(), Cancel())
    assert provider.generate([history.user("x")], [], Quiet(), Cancel()).text == "cut"


def test_a_stream_without_its_end_event_and_a_cut_at_the_token_limit(server, tmp_path):
    provider = ResponsesProvider(settings(tmp_path, server), KEY)
    whole = server.responses_reply("partial answer")
    server.enqueue(type(whole)(events=whole.events[:-1]),
                   server.responses_reply("cut here", end="response.incomplete",
                                          incomplete_details={"reason": "max_output_tokens"}))
    with pytest.raises(ModelError, match="stream ended early"):
        provider.generate([history.user("x")], [], Quiet(), Cancel())
    reply = provider.generate([history.user("x")], [], Quiet(), Cancel())
    assert reply.truncated and reply.text == "cut here"


def test_a_cancel_closes_a_silent_stream_at_once(server, tmp_path):
    provider = ResponsesProvider(settings(tmp_path, server), KEY)
    stalled = server.responses_reply("never")
    server.enqueue(type(stalled)(events=stalled.events[:4], then="stall"))
    cancel = Cancel()
    threading.Timer(0.3, cancel.set).start()
    started = time.monotonic()
    with pytest.raises(Cancelled):
        provider.generate([history.user("x")], [], Quiet(), cancel)
    assert time.monotonic() - started < 5


def test_azure_headers_query_key_header_and_extra_body(server, tmp_path):
    """docs/usage.md's Azure OpenAI example: the deployment's URL, api-version in the query, the key
    in api-key (no Bearer), a gateway header read from the environment, and extraBody merged."""
    model = settings(tmp_path, server, provider="openai", name="gpt-4o",
                     baseUrl=server.url + "/openai/deployments/gpt-4o", query={"api-version": "2024-10-21"},
                     keyHeader="api-key", headers={"X-Team": "${TEAM_TOKEN}", "X-Plain": "bob"},
                     extraBody={"chat_template_kwargs": {"enable_thinking": False}})
    server.enqueue(server.openai_text("hi from azure"))
    provider = OpenAIProvider(model, KEY, env={"TEAM_TOKEN": "team-secret-42"})
    assert provider.generate([history.user("x")], [], Quiet(), Cancel()).text == "hi from azure"
    request = server.requests[-1]
    assert request["path"] == "/openai/deployments/gpt-4o/chat/completions?api-version=2024-10-21"
    headers = {k.lower(): v for k, v in request["headers"].items()}
    assert headers["api-key"] == KEY and "authorization" not in headers
    assert headers["x-team"] == "team-secret-42" and headers["x-plain"] == "bob"
    assert request["body"]["chat_template_kwargs"] == {"enable_thinking": False}


def test_the_default_configurations_request_is_byte_for_byte_as_before(server, tmp_path):
    """No headers, query or extra body configured: the body and the headers are exactly 0.13's."""
    model = settings(tmp_path, server, provider="openai", name="gpt-4.1-mini")
    server.enqueue(server.openai_text("same"))
    OpenAIProvider(model, KEY).generate([history.system("s"), history.user("u")], TOOLS, Quiet(), Cancel())
    request = server.requests[-1]
    expected = {"model": "gpt-4.1-mini", "messages": [{"role": "system", "content": "s"},
                                                       {"role": "user", "content": "u"}],
                "stream": True, "stream_options": {"include_usage": True},
                "tools": [{"type": "function", "function": TOOLS[0]}]}
    assert request["raw"] == codec.dumps(expected)
    assert request["path"] == "/v1/chat/completions"
    assert {k.lower() for k in request["headers"]} == {
        "host", "user-agent", "accept-encoding", "accept", "connection", "content-type", "authorization",
        "content-length"}


def test_a_header_that_reads_the_environment_is_kept_out_of_tools_and_logs(tmp_path):
    from bob_acp.config import environment

    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump({"models": [
        {"id": "gateway", "baseUrl": "http://127.0.0.1:9/v1", "headers": {"X-Gateway-Key": "Bearer ${GW_KEY}"},
         "apiKeyEnv": "GW_OPENAI"}]}))
    cfg = config.load(str(path), env={})
    env = {"GW_KEY": "gw-secret-value-123", "GW_OPENAI": "sk-gw-openai-456", "PATH": "/bin"}
    assert {"GW_KEY", "GW_OPENAI"} <= set(environment.key_variables(cfg))
    assert "GW_KEY" not in environment.child_env(cfg, env) and "GW_OPENAI" not in environment.child_env(cfg, env)
    known = environment.values(cfg, env, None)
    assert "gw-secret-value-123" in known and "sk-gw-openai-456" in known
    assert json.dumps(cfg.as_dict()).count("gw-secret-value-123") == 0
