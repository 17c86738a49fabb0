"""The OpenAI and Anthropic providers against the fake server, through the real requests path."""

import threading
import time

import pytest
import yaml
from fake_model import Response

from bob_acp import config
from bob_acp.cancel import Cancel
from bob_acp.context import history
from bob_acp.exceptions import Cancelled, ModelError
from bob_acp.providers import http as http_module
from bob_acp.providers.anthropic import AnthropicProvider
from bob_acp.providers.base import TextOnly
from bob_acp.providers.openai import OpenAIProvider

KEY = "sk-test-very-secret-key-0123456789"


@pytest.fixture(autouse=True)
def fast_backoff(monkeypatch):
    monkeypatch.setattr(http_module, "BACKOFF_BASE", 0.01)


def cfg(tmp_path, server, **model):
    data = {"model": {"baseUrl": server.url + "/v1", "name": "test-model", "retries": 2, **model}}
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(data))
    return config.load(str(path), env={}).model


def messages():
    call = {"id": "call_1", "ref": "call_1", "name": "bash", "arguments": {"command": "ls"}}
    return [history.system("be brief"), history.user("hi"), history.assistant("", [call]),
            history.tool_result(call, "a.txt"), history.user("and now?")]


def generate(provider, msgs=None, tools=None, cancel=None):
    seen = []
    reply = provider.generate(msgs or messages(), tools or [], TextOnly(seen.append), cancel or Cancel())
    return reply, seen


def test_openai_streams_text_chunk_by_chunk_and_reports_usage(server, tmp_path):
    server.enqueue(server.openai_text("Hello there world", chunks=3, usage=1234, delay=0.05))
    provider = OpenAIProvider(cfg(tmp_path, server), KEY)
    arrivals = []
    reply = provider.generate(messages(), [], TextOnly(lambda c: arrivals.append((c, time.monotonic()))), Cancel())
    assert reply.text == "Hello there world" and reply.input_tokens == 1234 and reply.tool_calls == []
    assert len(arrivals) == 3 and arrivals[-1][1] - arrivals[0][1] > 0.05  # not buffered to the end


def test_openai_request_shape(server, tmp_path):
    server.enqueue(server.openai_text("ok"))
    provider = OpenAIProvider(cfg(tmp_path, server, maxTokens=99, temperature=0.2), KEY)
    spec = {"name": "bash", "description": "run", "parameters": {"type": "object"}}
    generate(provider, tools=[spec])
    request = server.requests[0]
    assert request["path"] == "/v1/chat/completions"
    assert request["headers"]["Authorization"] == f"Bearer {KEY}"
    body = request["body"]
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    assert body["max_tokens"] == 99 and body["temperature"] == 0.2 and body["model"] == "test-model"
    assert body["tools"] == [{"type": "function", "function": spec}]
    assistant = body["messages"][2]
    assert assistant["content"] == "" and assistant["tool_calls"][0]["function"] == {"name": "bash", "arguments": '{"command":"ls"}'}
    assert body["messages"][3] == {"role": "tool", "tool_call_id": "call_1", "content": "a.txt"}


def test_openai_without_a_key_sends_no_authorization(server, tmp_path):
    server.enqueue(server.openai_text("ok"))
    generate(OpenAIProvider(cfg(tmp_path, server), None))
    assert "Authorization" not in server.requests[0]["headers"]


@pytest.mark.parametrize("repeat", [False, True])
def test_openai_tool_call_deltas_are_assembled(server, tmp_path, repeat):
    server.enqueue(server.openai_tool_call("bash", {"command": "ls -la", "timeout": 5}, text="Looking", repeat_name=repeat))
    reply, seen = generate(OpenAIProvider(cfg(tmp_path, server), KEY))
    assert seen == ["Looking"]
    assert len(reply.tool_calls) == 1
    call = reply.tool_calls[0]
    assert (call.id, call.name, call.arguments) == ("call_abc", "bash", {"command": "ls -la", "timeout": 5})


@pytest.mark.parametrize("status, body, line", [
    (401, {"error": {"message": "invalid API key", "type": "invalid_request_error"}}, "model API 401: invalid API key"),
    (400, {"error": {"message": "bad\nrequest"}}, "model API 400: bad request"),
    (404, b"<html>Not Found</html>", "model API 404 at POST {url}/v1/chat/completions: <html>Not Found</html>"),
])
def test_http_errors_are_one_line_and_never_carry_the_key(server, tmp_path, status, body, line):
    server.enqueue(server.status(status, body))
    with pytest.raises(ModelError) as info:
        generate(OpenAIProvider(cfg(tmp_path, server), KEY))
    assert str(info.value) == line.format(url=server.url) and KEY not in str(info.value)
    assert len(server.requests) == 1  # not retried


def test_429_with_retry_after_then_success(server, tmp_path):
    server.enqueue(server.status(429, {"error": {"message": "slow down"}}, {"Retry-After": "0.2"}),
                   server.openai_text("made it"))
    started = time.monotonic()
    reply, _ = generate(OpenAIProvider(cfg(tmp_path, server), KEY))
    assert reply.text == "made it" and time.monotonic() - started >= 0.2 and len(server.requests) == 2


def test_500_then_success_and_retries_exhausted(server, tmp_path):
    server.enqueue(server.status(500, {"error": {"message": "oops"}}), server.openai_text("fine"))
    assert generate(OpenAIProvider(cfg(tmp_path, server), KEY))[0].text == "fine"
    for _ in range(3):
        server.enqueue(server.status(503, {"error": {"message": "overloaded"}}))
    with pytest.raises(ModelError, match="model API 503: overloaded"):
        generate(OpenAIProvider(cfg(tmp_path, server, retries=2), KEY))
    assert len(server.requests) == 2 + 3


def test_connection_refused(tmp_path):
    import socket
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump({"model": {"baseUrl": f"http://127.0.0.1:{port}/v1", "retries": 1}}))
    with pytest.raises(ModelError) as info:
        generate(OpenAIProvider(config.load(str(path), env={}).model, KEY))
    assert str(info.value) == f"model API unreachable: 127.0.0.1:{port}: connection refused"


def test_truncated_stream_and_garbage(server, tmp_path):
    provider = OpenAIProvider(cfg(tmp_path, server), KEY)
    server.enqueue(server.openai_text("half", then="drop"))
    with pytest.raises(ModelError, match="ended early|stream broken"):
        generate(provider)
    server.enqueue(server.garbage())
    with pytest.raises(ModelError, match="ended early"):
        generate(provider)
    server.enqueue(server.raw_events("{not json"))
    with pytest.raises(ModelError, match="invalid JSON in its stream"):
        generate(provider)


def test_invalid_tool_arguments(server, tmp_path):
    provider = OpenAIProvider(cfg(tmp_path, server), KEY)
    server.enqueue(server.raw_events(
        '{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c1","function":{"name":"bash","arguments":"{oops"}}]}}]}',
        '{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}', "[DONE]"))
    with pytest.raises(ModelError, match="invalid JSON in the arguments of tool call 'bash'"):
        generate(provider)


def test_read_timeout_when_the_server_goes_silent(server, tmp_path):
    server.enqueue(server.openai_text("start", then="stall"))
    started = time.monotonic()
    with pytest.raises(ModelError, match=r"model API timeout: no data for 0.5 s"):
        generate(OpenAIProvider(cfg(tmp_path, server, timeout=0.5), KEY))
    assert time.monotonic() - started < 5


def test_cancel_closes_a_silent_stream_at_once_and_leaves_no_thread(server, tmp_path):
    server.enqueue(server.openai_text("start", then="stall"))
    provider = OpenAIProvider(cfg(tmp_path, server), KEY)
    cancel = Cancel()
    threads_before = threading.active_count()
    seen = []
    timer = threading.Timer(0.3, cancel.set)
    timer.start()
    started = time.monotonic()
    with pytest.raises(Cancelled):
        provider.generate(messages(), [], TextOnly(seen.append), cancel)
    assert time.monotonic() - started < 5 and seen == ["start"]  # the stream stalls for ever
    timer.join()
    deadline = time.monotonic() + 5  # (the reading thread ends once its socket is closed)
    while threading.active_count() > threads_before + 1 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert threading.active_count() <= threads_before + 1  # the fake server's handler may linger


def test_cancel_during_backoff(server, tmp_path):
    server.enqueue(server.status(429, {"error": {"message": "wait"}}, {"Retry-After": "30"}))
    cancel = Cancel()
    threading.Timer(0.2, cancel.set).start()
    started = time.monotonic()
    with pytest.raises(Cancelled):
        generate(OpenAIProvider(cfg(tmp_path, server, retries=3), KEY), cancel=cancel)
    assert time.monotonic() - started < 2


def test_anthropic_text_tools_and_request_shape(server, tmp_path):
    server.enqueue(server.anthropic_tool_call("bash", {"command": "ls"}, text="Let me see"),
                   server.anthropic_text("Bye", chunks=2, input_tokens=77))
    provider = AnthropicProvider(cfg(tmp_path, server, baseUrl=server.url), KEY)
    reply, seen = generate(provider, tools=[{"name": "bash", "description": "run", "parameters": {"type": "object"}}])
    assert seen == ["Let me see"] and reply.input_tokens == 42
    assert [(c.id, c.name, c.arguments) for c in reply.tool_calls] == [("toolu_1", "bash", {"command": "ls"})]
    request = server.requests[0]
    assert request["path"] == "/v1/messages" and request["headers"]["x-api-key"] == KEY
    assert request["headers"]["anthropic-version"] == "2023-06-01"
    body = request["body"]
    ephemeral = {"type": "ephemeral"}  # prompt caching: tools, system prompt, latest message
    assert body["system"] == [{"type": "text", "text": "be brief", "cache_control": ephemeral}]
    assert body["max_tokens"] == 8192 and body["stream"] is True
    assert body["tools"] == [{"name": "bash", "description": "run", "input_schema": {"type": "object"},
                              "cache_control": ephemeral}]
    assert [m["role"] for m in body["messages"]] == ["user", "assistant", "user"]
    assert body["messages"][1]["content"] == [{"type": "tool_use", "id": "call_1", "name": "bash", "input": {"command": "ls"}}]
    assert body["messages"][2]["content"] == [{"type": "tool_result", "tool_use_id": "call_1", "content": "a.txt"},
                                              {"type": "text", "text": "and now?", "cache_control": ephemeral}]
    reply, seen = generate(provider)
    assert reply.text == "Bye" and seen == ["By", "e"] and reply.input_tokens == 77


def test_anthropic_errors(server, tmp_path):
    provider = AnthropicProvider(cfg(tmp_path, server, baseUrl=server.url), KEY)
    server.enqueue(server.status(401, {"type": "error", "error": {"type": "authentication_error", "message": "invalid x-api-key"}}))
    with pytest.raises(ModelError, match="^model API 401: invalid x-api-key$"):
        generate(provider)
    server.enqueue(server.raw_events('{"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}'))
    with pytest.raises(ModelError, match="Overloaded"):
        generate(provider)
    server.enqueue(server.anthropic_text("cut", then="drop"))
    with pytest.raises(ModelError, match="ended early|stream broken"):
        generate(provider)


def test_openai_tool_call_without_id_empty_arguments_and_non_object(server, tmp_path):
    provider = OpenAIProvider(cfg(tmp_path, server), KEY)
    server.enqueue(server.openai_tool_call("bash", {"command": "pwd"}, id=""),
                   server.openai_tool_call("bash", {"command": "pwd"}, id=""))
    first, second = generate(provider)[0].tool_calls[0], generate(provider)[0].tool_calls[0]
    assert first.id and first.id != second.id  # generated, unique across replies
    server.enqueue(server.raw_events(
        '{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c1","function":{"name":"list","arguments":""}}]}}]}',
        '{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}'))
    assert generate(provider)[0].tool_calls[0].arguments == {}
    server.enqueue(server.raw_events(
        '{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c1","function":{"name":"bash","arguments":"[1]"}}]}}]}',
        '{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}', "[DONE]"))
    with pytest.raises(ModelError, match="'bash' that are not a JSON object"):
        generate(provider)


def test_openai_error_event_in_the_stream(server, tmp_path):
    server.enqueue(server.raw_events('{"error": {"message": "context length exceeded"}}'))
    with pytest.raises(ModelError, match="^model API error: context length exceeded$"):
        generate(OpenAIProvider(cfg(tmp_path, server), KEY))


def test_stall_and_drop_helpers(server, tmp_path):
    provider = OpenAIProvider(cfg(tmp_path, server, timeout=0.3), KEY)
    server.enqueue(server.drop(events_before=2), server.stall(events_before=1))
    with pytest.raises(ModelError, match="ended early|stream broken"):
        generate(provider)
    with pytest.raises(ModelError, match="model API timeout: no data for 0.3 s"):
        generate(provider)


def test_retry_after_accepts_seconds_and_http_dates():
    from email.utils import formatdate
    assert http_module._retry_after("2") == 2.0
    assert 8 <= http_module._retry_after(formatdate(time.time() + 10, usegmt=True)) <= 10
    assert http_module._retry_after(formatdate(time.time() - 100, usegmt=True)) == 0.0
    assert http_module._retry_after("soon") is None and http_module._retry_after(None) is None


class _Raw:
    """A response body that arrives in the given pieces."""

    def __init__(self, pieces):
        self.pieces = list(pieces)

    def read1(self, _size):
        return self.pieces.pop(0) if self.pieces else b""


@pytest.mark.parametrize("pieces", [
    [b": keep-alive\r\nevent: ping\r\ndata: {}\r\n\r\ndata: line one\ndata: line two\n\nevent:message_stop\ndata:{\"a\":1}"],
    [b": keep-alive\revent: ping\rdata: {}\r\rdata: line one\rdata: line two\r\revent:message_stop\rdata:{\"a\":1}"],
    [b": keep-alive\r", b"\nevent: ping\r", b"\ndata: {}\r", b"\n\r", b"\ndata: line one\n", b"data: line two\n\n",
     b"event:message_stop\n", b"data:{\"a\":1}"],
])
def test_sse_parser_handles_cr_lf_crlf_comments_multiline_data_and_event_names(pieces):
    from bob_acp.providers import sse
    lines = [line.decode() for line in http_module.arriving_lines(_Raw(pieces))]
    assert list(sse.events(lines)) == [("ping", "{}"), ("message", "line one\nline two"), ("message_stop", '{"a":1}')]


def test_anthropic_merges_consecutive_results_and_users(server, tmp_path):
    calls = [{"id": f"t{n}", "ref": f"call_{n}", "name": "bash", "arguments": {"command": "ls"}} for n in (1, 2)]
    msgs = [history.system("sys"), history.summary("earlier work"), history.user("go on"),
            history.assistant("Two at once.", calls), history.tool_result(calls[0], "one"),
            history.tool_result(calls[1], "two")]
    server.enqueue(server.anthropic_text("ok"))
    generate(AnthropicProvider(cfg(tmp_path, server, baseUrl=server.url), None), msgs)
    request = server.requests[0]
    assert "x-api-key" not in request["headers"]
    wire = request["body"]["messages"]
    assert [m["role"] for m in wire] == ["user", "assistant", "user"]
    assert [b["text"] for b in wire[0]["content"]] == [history.text_of(history.summary("earlier work")), "go on"]
    assert wire[1]["content"][0] == {"type": "text", "text": "Two at once."}
    assert [b["tool_use_id"] for b in wire[2]["content"]] == ["t1", "t2"]


def test_anthropic_truncated_and_proxy_error_formats(server, tmp_path):
    provider = AnthropicProvider(cfg(tmp_path, server, baseUrl=server.url), KEY)
    server.enqueue(server.anthropic_text("no stop", then="cut"))
    with pytest.raises(ModelError, match="ended early"):
        generate(provider)
    server.enqueue(server.status(403, {"error": "forbidden by proxy"}))
    with pytest.raises(ModelError, match="^model API 403: forbidden by proxy$"):
        generate(provider)


def test_stop_releases_a_stalled_handler_and_leaves_no_thread(tmp_path):
    from fake_model import FakeModelServer
    before = threading.active_count()
    fake = FakeModelServer().__enter__()
    fake.enqueue(fake.stall(events_before=0))
    done = Cancel()

    def call():
        try:
            generate(OpenAIProvider(cfg(tmp_path, fake, retries=0), KEY))
        except ModelError:
            pass
        done.set()

    caller = threading.Thread(target=call)
    caller.start()
    deadline = time.monotonic() + 5
    while not fake.requests and time.monotonic() < deadline:
        time.sleep(0.01)
    started = time.monotonic()
    fake.stop()
    assert time.monotonic() - started < 3
    caller.join(5)
    assert done.is_set() and threading.active_count() <= before


# ---- the HTTP boundary (issues 13 and 14) ----------------------------------------------------

def test_the_stream_is_asked_for_uncompressed_and_a_compressing_server_still_works(server, tmp_path):
    response = server.openai_text("squeezed", chunks=2)
    response.gzip = True  # compresses whenever the client accepts gzip (nginx gzip_types)
    server.enqueue(response)
    reply, seen = generate(OpenAIProvider(cfg(tmp_path, server), KEY))
    assert reply.text == "squeezed" and seen == ["sque", "ezed"]
    assert server.requests[0]["headers"]["Accept-Encoding"] == "identity"


def test_a_redirect_loop_is_one_line(server, tmp_path):
    for _ in range(10):
        server.enqueue(server.status(307, b"", {"Location": server.url + "/v1/chat/completions"}))
    with pytest.raises(ModelError, match="^model API redirects too often"):
        generate(OpenAIProvider(cfg(tmp_path, server, retries=0), KEY))


def test_keep_alive_comments_do_not_hold_a_call_forever(server, tmp_path):
    """model.timeout counts time since the last event: a proxy's `: ping` every 50 ms is not one."""
    server.enqueue(Response(then="pings", delay=0.05))
    with pytest.raises(ModelError, match="no event for 0.5 s"):
        generate(OpenAIProvider(cfg(tmp_path, server, timeout=0.5, retries=0), KEY))


def test_a_call_past_model_call_timeout_ends_with_one_line(server, tmp_path):
    server.enqueue(server.endless(delay=0.01))
    with pytest.raises(ModelError, match=r"^model API call exceeded 0.5 s \(model.callTimeout\)$"):
        generate(OpenAIProvider(cfg(tmp_path, server, callTimeout=0.5, retries=0), KEY))


@pytest.mark.parametrize("url, problem", [
    ("http://[::1", "model API request"),  # the URL itself
])
def test_requests_own_errors_are_one_line_never_a_traceback(tmp_path, url, problem):
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump({"model": {"name": "m", "retries": 0}}))
    provider = OpenAIProvider(config.load(str(path), env={}).model, KEY)
    provider.url = url
    with pytest.raises(ModelError, match=problem) as info:
        generate(provider)
    assert "\n" not in str(info.value) and KEY not in str(info.value)


def test_a_key_with_a_stray_carriage_return_is_stripped_and_never_shown(tmp_path, server):
    from bob_acp import providers
    from bob_acp.config import keys
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump({"model": {"baseUrl": server.url + "/v1", "retries": 0}}))
    cfg_ = config.load(str(path), env={})
    key = keys.api_key(cfg_, {"OPENAI_API_KEY": KEY + "\r\n"})
    assert key == KEY
    server.enqueue(server.openai_text("fine"))
    assert generate(providers.make_provider(cfg_, {"OPENAI_API_KEY": KEY + "\r\n"}))[0].text == "fine"
    assert server.requests[-1]["headers"]["Authorization"] == f"Bearer {KEY}"
    provider = OpenAIProvider(cfg_.model, KEY + "\r")  # had it not been stripped: requests' InvalidHeader
    with pytest.raises(ModelError) as info:
        generate(provider)
    assert KEY not in str(info.value) and repr(KEY + "\r")[1:-1] not in str(info.value)


def test_the_one_origin_rule_of_every_http_client():
    """One rule for the providers, the model list, MCP over HTTP and SSE: an origin is read as the
    connection is made, and a URL the parsers could read two ways is no origin at all."""
    from bob_acp.providers import httpio

    assert httpio.origin("HTTP://Example.com:80/v1") == ("http", "example.com", 80)
    assert httpio.same_origin("https://api.x.com/v1/a", "https://api.x.com:443/b")
    assert not httpio.same_origin("http://127.0.0.1:5/a", "http://127.0.0.1:6/a")
    for twofold in ("http://127.0.0.1:5\\@127.0.0.1:6/msg", "http://user:pw@127.0.0.1:6/", "http://127.0.0.1:6 /x",
                    "http://127.0.0.1:6\t@x/"):
        assert not httpio.same_origin(twofold, "http://127.0.0.1:6/")
    assert httpio.origin("https://host/models/claude@20240620")[1] == "host"  # (an @ in a path is a path)


def test_the_model_list_never_follows_a_redirect_to_another_origin():
    """setup's and choices: auto's GET /models: a 307 to another server is said, not followed."""
    import http.server
    import threading

    from fake_model import FakeModelServer

    from bob_acp.providers import models

    with FakeModelServer() as elsewhere:
        elsewhere.models = ["stolen"]

        class Redirect(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                self.send_response(307)
                self.send_header("Location", elsewhere.url + "/v1/models")
                self.send_header("Content-Length", "0")
                self.end_headers()

        httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Redirect)
        thread = threading.Thread(target=httpd.serve_forever, daemon=True)
        thread.start()
        try:
            with pytest.raises(ValueError, match="redirect to another origin"):
                models.list_at(f"http://127.0.0.1:{httpd.server_address[1]}/v1/models", {"Authorization": "Bearer k"})
        finally:
            httpd.shutdown()
            httpd.server_close()
            thread.join(5)
        assert elsewhere.gets == []
