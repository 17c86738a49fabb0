"""A fake OpenAI-compatible and Anthropic-compatible model server on 127.0.0.1, for tests.

Responses are enqueued in order and served one per request, whatever the path; each request is
recorded. It can stream scripted SSE (with delays), stall, drop the connection mid-stream,
answer any status (429 with Retry-After, 500, 401), send garbage, or stream without end. It is
used in-process by provider tests and across processes by end-to-end tests (point bob at url).
"""

from __future__ import annotations

import json
import queue
import socket
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable


@dataclass
class Response:
    status: int = 200
    headers: dict = field(default_factory=dict)
    body: bytes = b""
    events: list = field(default_factory=list)  # SSE payloads (bytes), streamed one by one
    delay: float = 0.0  # seconds before each event
    then: str = "end"  # end | stall | drop | endless | pings | cut (ends cleanly, closing events left out)
    gzip: bool = False  # compress the stream when the client accepts gzip (nginx gzip_types, proxies)
    cache_usage: bool = False  # Anthropic: message_start reports prompt-cache reads as the real API does
    silent: float = 0.0  # seconds before the status line (a model still queueing: no headers yet)
    on_request: Callable[[], None] | None = None  # run when the request comes (what happens while the model answers)


def history_problem(path: str, body) -> str | None:
    """Why a real API would refuse this request's history with HTTP 400, or None: every tool
    call must be answered by its result before the conversation goes on, and every result must
    answer a call just made (OpenAI's chat completions and Anthropic's messages both check it)."""
    if path.rstrip("/").split("?")[0].endswith("/responses"):
        return responses_problem(body)
    if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
        return None
    messages = body["messages"]
    problem = _image_problem(path, messages)
    if problem:
        return problem
    if path.rstrip("/").endswith("/messages"):  # Anthropic: tool_use answered in the next user message
        for index, message in enumerate(messages):
            blocks = message.get("content") if isinstance(message, dict) else None
            for block in blocks if isinstance(blocks, list) else []:
                if isinstance(block, dict) and block.get("type") == "text" and not str(block.get("text", "")).strip():
                    return f"messages.{index}: text content blocks must contain non-whitespace text"
            if isinstance(blocks, list) and not blocks:
                return f"messages.{index}: all messages must have non-empty content"
            content = message.get("content") if isinstance(message, dict) else None
            blocks = content if isinstance(content, list) else []
            uses = {b.get("id") for b in blocks if isinstance(b, dict) and b.get("type") == "tool_use"}
            results = {b.get("tool_use_id") for b in blocks if isinstance(b, dict) and b.get("type") == "tool_result"}
            if results:
                before = messages[index - 1] if index else {}
                made = {b.get("id") for b in before.get("content", []) if isinstance(b, dict)
                        and b.get("type") == "tool_use"} if isinstance(before.get("content"), list) else set()
                if not results <= made:
                    return f"messages.{index}: tool_result blocks answer no tool_use of the previous message"
            if uses:
                after = messages[index + 1] if index + 1 < len(messages) else None
                answered = {b.get("tool_use_id") for b in (after or {}).get("content", []) if isinstance(b, dict)
                            and b.get("type") == "tool_result"} if after and isinstance(after.get("content"), list) else set()
                if not uses <= answered:
                    return (f"messages.{index}: tool_use ids were found without tool_result blocks immediately "
                            f"after: {sorted(str(u) for u in uses - answered)}")
        return None
    pending: set = set()
    for index, message in enumerate(messages):
        if not isinstance(message, dict):
            continue
        role = message.get("role")
        if role == "tool":
            if message.get("tool_call_id") not in pending:
                return f"messages.[{index}]: a 'tool' message must respond to a preceding message with 'tool_calls'"
            pending.discard(message.get("tool_call_id"))
            continue
        if pending:
            return (f"messages.[{index}]: an assistant message with 'tool_calls' must be followed by tool messages "
                    f"responding to each 'tool_call_id': missing {sorted(pending)}")
        if role == "assistant":
            pending = {c.get("id") for c in message.get("tool_calls") or [] if isinstance(c, dict)}
    if pending:
        return f"the last assistant message's tool calls have no results: {sorted(pending)}"
    return None


def responses_problem(body) -> str | None:
    """What OpenAI's Responses API refuses with a 400 (as a stateless client sends it): an input
    that is not a list of items, a function_call_output for no function_call before it, a call
    left without its output when the conversation goes on, a reasoning item without its
    encrypted content (with store: false there is nothing on the server to refer to), a part of
    an unknown type."""
    if not isinstance(body, dict) or not isinstance(body.get("input"), list):
        return "input: must be a list of items"
    if body.get("store") is not False or "reasoning.encrypted_content" not in (body.get("include") or []):
        return "this fake serves stateless clients only: store: false and include reasoning.encrypted_content"
    calls: set = set()
    answered: set = set()
    for index, item in enumerate(body["input"]):
        if not isinstance(item, dict):
            return f"input[{index}]: not an object"
        kind = item.get("type", "message")
        if kind == "function_call":
            if not isinstance(item.get("arguments"), str) or not item.get("call_id") or not item.get("name"):
                return f"input[{index}]: a function_call needs call_id, name and arguments (a string)"
            calls.add(item["call_id"])
        elif kind == "function_call_output":
            if item.get("call_id") not in calls or not isinstance(item.get("output"), str):
                return f"input[{index}]: No tool call found for function call output with call_id {item.get('call_id')}"
            answered.add(item["call_id"])
        elif kind == "reasoning":
            if not item.get("encrypted_content"):
                return f"input[{index}]: a reasoning item needs its encrypted_content when store is false"
        elif kind == "message":
            if calls - answered:
                return f"input[{index}]: No tool output found for function call {sorted(calls - answered)[0]}"
            content = item.get("content")
            for part in content if isinstance(content, list) else []:
                if not isinstance(part, dict) or part.get("type") not in ("input_text", "input_image", "output_text"):
                    return f"input[{index}]: unknown content part {part!r}"[:200]
        else:
            return f"input[{index}]: unknown item type {kind!r}"
    if calls - answered:
        return f"No tool output found for function call {sorted(calls - answered)[0]}"
    return None


def _image_problem(path: str, messages: list):
    """Image parts of the shape each API takes (OpenAI: image_url with a data URI; Anthropic: an
    image block with a base64 source), or the 400 the API would answer."""
    anthropic = path.rstrip("/").endswith("/messages")
    for index, message in enumerate(messages):
        content = message.get("content") if isinstance(message, dict) else None
        for part in content if isinstance(content, list) else []:
            kind = part.get("type") if isinstance(part, dict) else None
            if anthropic and kind == "image":
                source = part.get("source") or {}
                if source.get("type") != "base64" or source.get("media_type") not in (
                        "image/png", "image/jpeg", "image/gif", "image/webp") or not isinstance(source.get("data"), str):
                    return f"messages.{index}: an image block needs a base64 source with a media_type"
            elif not anthropic and kind == "image_url":
                url = (part.get("image_url") or {}).get("url", "")
                if not (isinstance(url, str) and url.startswith("data:image/") and ";base64," in url):
                    return f"messages[{index}]: image_url must be a data URI"
            elif not anthropic and kind not in ("text", "image_url"):
                return f"messages[{index}]: unknown content part type {kind!r}"
    return None


def _sse(payload) -> bytes:
    data = payload if isinstance(payload, str) else json.dumps(payload)
    return f"data: {data}\n\n".encode()


def _named(event: str, payload: dict) -> bytes:
    return f"event: {event}\ndata: {json.dumps(payload)}\n\n".encode()


class _Sequence:
    """Responses API events, in the order and shape OpenAI streams them, numbered."""

    def __init__(self) -> None:
        self.events: list[bytes] = []
        self.output: list[dict] = []

    def add(self, kind: str, **payload) -> None:
        self.events.append(_named(kind, {"type": kind, "sequence_number": len(self.events), **payload}))

    def start(self) -> None:
        self.add("response.created", response={"id": "resp_1", "object": "response", "status": "in_progress",
                                                "output": []})
        self.add("response.in_progress", response={"id": "resp_1", "object": "response", "status": "in_progress"})

    def reasoning(self, summary: list[str], encrypted: str | None) -> None:
        index, item_id = len(self.output), f"rs_{len(self.output)}"
        self.add("response.output_item.added", output_index=index, item={"id": item_id, "type": "reasoning",
                                                                           "summary": []})
        for n, text in enumerate(summary):
            part = {"type": "summary_text", "text": ""}
            self.add("response.reasoning_summary_part.added", item_id=item_id, output_index=index, summary_index=n,
                     part=part)
            for piece in (text[: len(text) // 2], text[len(text) // 2:]):
                self.add("response.reasoning_summary_text.delta", item_id=item_id, output_index=index,
                         summary_index=n, delta=piece)
            self.add("response.reasoning_summary_text.done", item_id=item_id, output_index=index, summary_index=n,
                     text=text)
            self.add("response.reasoning_summary_part.done", item_id=item_id, output_index=index, summary_index=n,
                     part={"type": "summary_text", "text": text})
        item = {"id": item_id, "type": "reasoning", "summary": [{"type": "summary_text", "text": t} for t in summary]}
        if encrypted is not None:
            item["encrypted_content"] = encrypted
        self.add("response.output_item.done", output_index=index, item=item)
        self.output.append(item)

    def message(self, text: str, chunks: int = 2) -> None:
        index, item_id = len(self.output), f"msg_{len(self.output)}"
        self.add("response.output_item.added", output_index=index, item={
            "id": item_id, "type": "message", "status": "in_progress", "role": "assistant", "content": []})
        self.add("response.content_part.added", item_id=item_id, output_index=index, content_index=0,
                 part={"type": "output_text", "text": "", "annotations": []})
        size = max(1, -(-len(text) // chunks))
        for i in range(0, len(text), size):
            self.add("response.output_text.delta", item_id=item_id, output_index=index, content_index=0,
                     delta=text[i:i + size], logprobs=[])
        self.add("response.output_text.done", item_id=item_id, output_index=index, content_index=0, text=text)
        part = {"type": "output_text", "text": text, "annotations": []}
        self.add("response.content_part.done", item_id=item_id, output_index=index, content_index=0, part=part)
        item = {"id": item_id, "type": "message", "status": "completed", "role": "assistant", "content": [part]}
        self.add("response.output_item.done", output_index=index, item=item)
        self.output.append(item)

    def call(self, name: str, args: dict, call_id: str, pieces: int = 3) -> None:
        index, item_id = len(self.output), f"fc_{len(self.output)}"
        encoded = json.dumps(args)
        self.add("response.output_item.added", output_index=index, item={
            "id": item_id, "type": "function_call", "status": "in_progress", "arguments": "", "call_id": call_id,
            "name": name})
        size = max(1, -(-len(encoded) // pieces))
        for i in range(0, len(encoded), size):
            self.add("response.function_call_arguments.delta", item_id=item_id, output_index=index,
                     delta=encoded[i:i + size])
        self.add("response.function_call_arguments.done", item_id=item_id, output_index=index, arguments=encoded)
        item = {"id": item_id, "type": "function_call", "status": "completed", "arguments": encoded,
                "call_id": call_id, "name": name}
        self.add("response.output_item.done", output_index=index, item=item)
        self.output.append(item)

    def end(self, usage: dict | None, kind: str = "response.completed", **more) -> list[bytes]:
        status = {"response.completed": "completed", "response.incomplete": "incomplete"}.get(kind, "failed")
        response = {"id": "resp_1", "object": "response", "status": status, "output": self.output,
                    "usage": usage, **more}
        self.add(kind, response=response)
        return self.events


class FakeModelServer:
    def __init__(self):
        self.responses: queue.SimpleQueue = queue.SimpleQueue()
        self.requests: list[dict] = []
        self.models: list[str] | None = None  # what GET …/models lists (None: 404, as servers without it)
        self.gets: list[dict] = []
        self.cache_accounting_log: list[dict] = []
        self.refused: list[str] = []  # why requests were answered 400 (a history a real API refuses)
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._handlers: dict[threading.Thread, socket.socket] = {}
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_POST(self):
                length = int(self.headers.get("Content-Length", 0))
                raw = self.rfile.read(length)
                try:
                    body = json.loads(raw)
                except ValueError:
                    body = None
                server.requests.append({"path": self.path, "headers": dict(self.headers), "body": body, "raw": raw})
                self.request_body = body
                self.accepts_gzip = "gzip" in self.headers.get("Accept-Encoding", "")
                problem = history_problem(self.path, body)
                if problem:  # as the real APIs do: a 400, and the enqueued answer stays for the next request
                    server.refused.append(problem)
                    return server._serve(self, Response(400, body=json.dumps(
                        {"error": {"type": "invalid_request_error", "message": problem}}).encode()))
                try:
                    response = server.responses.get_nowait()
                except queue.Empty:
                    response = Response(500, body=b'{"error": {"message": "fake model: no response enqueued"}}')
                if response.on_request is not None:
                    response.on_request()
                server._serve(self, response)

            def do_GET(self):
                server.gets.append({"path": self.path, "headers": dict(self.headers)})
                if self.path.split("?")[0].endswith("/models") and server.models is not None:
                    body = json.dumps({"object": "list", "data": [{"id": name, "object": "model", "owned_by": "me"}
                                                                  for name in server.models]}).encode()
                    return server._serve(self, Response(200, body=body))
                server._serve(self, Response(404, body=b'{"error": {"message": "not found"}}'))

            def handle(self):
                # Tracked so that stop() can cut every open connection and wait for its thread.
                with server._lock:
                    server._handlers[threading.current_thread()] = self.connection
                try:
                    super().handle()
                finally:
                    with server._lock:
                        server._handlers.pop(threading.current_thread(), None)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self._thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    @property
    def url(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host}:{port}"

    def __enter__(self) -> "FakeModelServer":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def stop(self) -> None:
        """Release stalled handlers, cut open connections, and wait for every thread and the port."""
        self._stop.set()
        if self._thread.is_alive():
            self.httpd.shutdown()
        self.httpd.server_close()
        self._thread.join(5)
        with self._lock:
            handlers = dict(self._handlers)
        for thread, sock in handlers.items():
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            thread.join(5)

    def _serve(self, handler: BaseHTTPRequestHandler, response: Response) -> None:
        if response.silent and self._stop.wait(response.silent):
            return
        try:
            handler.send_response(response.status)
            streaming = bool(response.events) or response.then != "end"
            headers = {"Content-Type": "text/event-stream" if streaming else "application/json", **response.headers}
            if response.gzip and getattr(handler, "accepts_gzip", False):
                import gzip

                body = gzip.compress(b"".join(response.events))
                headers.update({"Content-Encoding": "gzip", "Content-Length": str(len(body))})
                for key, value in headers.items():
                    handler.send_header(key, value)
                handler.end_headers()
                handler.wfile.write(body)
                return
            for key, value in headers.items():
                handler.send_header(key, value)
            if streaming and response.then == "short":  # a length it never sends: the reply breaks off
                handler.send_header("Content-Length", str(1 << 20))
                handler.end_headers()
                self._stream(handler, response)
                handler.connection.shutdown(socket.SHUT_RDWR)
                handler.close_connection = True
            elif streaming:
                handler.send_header("Connection", "close")
                handler.end_headers()
                self._stream(handler, response)
                handler.close_connection = True
            else:
                handler.send_header("Content-Length", str(len(response.body)))
                handler.end_headers()
                handler.wfile.write(response.body)
        except (BrokenPipeError, ConnectionResetError, OSError):
            handler.close_connection = True

    def _stream(self, handler: BaseHTTPRequestHandler, response: Response) -> None:
        events = list(response.events)
        if response.cache_usage and isinstance(getattr(handler, "request_body", None), dict):
            usage = self.cache_accounting(handler.request_body)
            events[0] = _named("message_start", {"type": "message_start", "message": {"usage": usage}})
        for event in events:
            if response.delay and self._stop.wait(response.delay):
                return
            handler.wfile.write(event)
            handler.wfile.flush()
        if response.then == "stall":
            self._stop.wait(120)
        elif response.then == "drop":
            handler.connection.shutdown(socket.SHUT_RDWR)
        elif response.then == "pings":  # a proxy's keep-alive comments, and never an event
            while not self._stop.wait(response.delay or 0.05):
                handler.wfile.write(b": ping\n\n")
                handler.wfile.flush()
        elif response.then == "endless":
            piece = response.body.decode() or "."
            event = _sse({"choices": [{"index": 0, "delta": {"tool_calls": [
                {"index": 0, "id": "c", "function": {"name": "bash", "arguments": piece}}]}}]})
            while not self._stop.is_set():
                handler.wfile.write(event)
                if response.delay:
                    handler.wfile.flush()
                    time.sleep(response.delay)

    # ---- Anthropic prompt caching, as the real API counts it ----------------------------------

    def cache_accounting(self, body: dict) -> dict:
        """Usage for a Messages request: the longest prefix (tools, system, then message blocks)
        that ends at one of this request's breakpoints, or up to 20 blocks before one, and that
        an earlier request wrote to the cache at one of its breakpoints, is a cache read; the
        rest up to the last breakpoint is written; tokens are characters / 4."""
        blocks, marks = [], []
        for tool in body.get("tools") or []:
            blocks.append(tool)
        system = body.get("system")
        for block in system if isinstance(system, list) else ([{"type": "text", "text": system}] if system else []):
            blocks.append(block)
        for message in body.get("messages") or []:
            content = message["content"] if isinstance(message["content"], list) else [
                {"type": "text", "text": message["content"]}]
            for block in content:
                blocks.append({"role": message["role"], **block})
        keys, sizes, total = [], [], 0
        for n, block in enumerate(blocks):
            if "cache_control" in block:
                marks.append(n)
            plain = {k: v for k, v in block.items() if k != "cache_control"}
            text = json.dumps(plain, sort_keys=True)
            total += max(1, len(text) // 4)
            sizes.append(total)
            keys.append(hash((keys[-1] if keys else None, text)))
        cached = self.__dict__.setdefault("_cached_prefixes", set())
        read = 0
        for mark in marks:
            for end in range(mark, max(-1, mark - 20), -1):
                if keys[end] in cached:
                    read = max(read, sizes[end])
                    break
        written = max(0, (sizes[marks[-1]] if marks else 0) - read)
        cached.update(keys[mark] for mark in marks)
        usage = {"input_tokens": total - read - written, "cache_read_input_tokens": read,
                 "cache_creation_input_tokens": written}
        self.cache_accounting_log.append(usage)
        return usage

    # ---- building responses --------------------------------------------------------------

    def enqueue(self, *responses: Response) -> "FakeModelServer":
        for response in responses:
            self.responses.put(response)
        return self

    def openai_text(self, text: str, chunks: int = 1, usage: int | None = None, delay: float = 0.0,
                    then: str = "end", done: bool = True) -> Response:
        size = max(1, -(-len(text) // chunks))
        events = [_sse({"choices": [{"index": 0, "delta": {"role": "assistant", "content": text[i:i + size]}}]})
                  for i in range(0, len(text), size)]
        if then == "end":
            events.append(_sse({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}))
            if usage is not None:
                events.append(_sse({"choices": [], "usage": {"prompt_tokens": usage, "completion_tokens": 5}}))
            if done:
                events.append(_sse("[DONE]"))
        return Response(events=events, delay=delay, then=then)

    def openai_tool_call(self, name: str, args: dict, text: str = "", call_id: str | None = "call_abc",
                         repeat_name: bool = False, pieces: int = 3, usage: int | None = None,
                         id: str | None = None) -> Response:
        """A streamed tool call; `id` (alias of call_id) "" sends none, as some local servers do."""
        call_id = id if id is not None else call_id
        encoded = json.dumps(args)
        size = max(1, -(-len(encoded) // pieces))
        events = [_sse({"choices": [{"index": 0, "delta": {"content": text}}]})] if text else []
        for n, i in enumerate(range(0, len(encoded), size)):
            function = {"arguments": encoded[i:i + size]}
            part = {"index": 0, "function": function}
            if n == 0 or repeat_name:
                part.update({"id": call_id, "type": "function"} if call_id else {"type": "function"})
                function["name"] = name
            events.append(_sse({"choices": [{"index": 0, "delta": {"tool_calls": [part]}}]}))
        events.append(_sse({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}))
        if usage is not None:
            events.append(_sse({"choices": [], "usage": {"prompt_tokens": usage}}))
        events.append(_sse("[DONE]"))
        return Response(events=events)

    def anthropic_text(self, text: str, chunks: int = 1, input_tokens: int = 10, delay: float = 0.0,
                       then: str = "end", cache_usage: bool = False) -> Response:
        size = max(1, -(-len(text) // chunks))
        events = [_named("message_start", {"type": "message_start", "message": {"usage": {"input_tokens": input_tokens}}}),
                  _named("content_block_start", {"type": "content_block_start", "index": 0,
                                                 "content_block": {"type": "text", "text": ""}})]
        events += [_named("content_block_delta", {"type": "content_block_delta", "index": 0,
                                                  "delta": {"type": "text_delta", "text": text[i:i + size]}})
                   for i in range(0, len(text), size)]
        if then == "end":
            events += [_named("content_block_stop", {"type": "content_block_stop", "index": 0}),
                       _named("message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn"}}),
                       _named("message_stop", {"type": "message_stop"})]
        return Response(events=events, delay=delay, then=then, cache_usage=cache_usage)

    def anthropic_tool_call(self, name: str, args: dict, text: str = "", tool_id: str = "toolu_1",
                            cache_usage: bool = False) -> Response:
        encoded = json.dumps(args)
        events = [_named("message_start", {"type": "message_start", "message": {"usage": {"input_tokens": 42}}})]
        index = 0
        if text:
            events += [_named("content_block_start", {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
                       _named("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": text}}),
                       _named("content_block_stop", {"type": "content_block_stop", "index": 0})]
            index = 1
        events.append(_named("content_block_start", {"type": "content_block_start", "index": index,
                                                     "content_block": {"type": "tool_use", "id": tool_id, "name": name, "input": {}}}))
        half = len(encoded) // 2
        for piece in (encoded[:half], encoded[half:]):
            events.append(_named("content_block_delta", {"type": "content_block_delta", "index": index,
                                                         "delta": {"type": "input_json_delta", "partial_json": piece}}))
        events += [_named("content_block_stop", {"type": "content_block_stop", "index": index}),
                   _named("message_delta", {"type": "message_delta", "delta": {"stop_reason": "tool_use"}}),
                   _named("message_stop", {"type": "message_stop"})]
        return Response(events=events, cache_usage=cache_usage)

    # ---- OpenAI's Responses API -----------------------------------------------------------------

    def responses_reply(self, text: str = "", calls: list[tuple[str, dict, str]] | None = None,
                        summary: list[str] | None = None, encrypted: str | None = None, usage: int | None = 100,
                        cached: int = 0, end: str = "response.completed", **more) -> Response:
        """A streamed Responses answer: reasoning (its summary parts, its encrypted content),
        then text, then function calls, then the end event with usage."""
        sequence = _Sequence()
        sequence.start()
        if summary is not None or encrypted is not None:
            sequence.reasoning(summary or [], encrypted)
        if text:
            sequence.message(text)
        for name, args, call_id in calls or []:
            sequence.call(name, args, call_id)
        counts = None if usage is None else {
            "input_tokens": usage, "input_tokens_details": {"cached_tokens": cached}, "output_tokens": 7,
            "output_tokens_details": {"reasoning_tokens": 3 if encrypted else 0}, "total_tokens": usage + 7}
        return Response(events=sequence.end(counts, end, **more))

    def responses_failed(self, message: str, code: str = "server_error") -> Response:
        sequence = _Sequence()
        sequence.start()
        return Response(events=sequence.end(None, "response.failed", error={"code": code, "message": message}))

    def responses_error(self, message: str, code: str = "rate_limit_exceeded") -> Response:
        sequence = _Sequence()
        sequence.start()
        sequence.add("error", code=code, message=message, param=None)
        return Response(events=sequence.events)

    def status(self, code: int, body: bytes | dict | None = None, headers: dict | None = None) -> Response:
        if isinstance(body, dict):
            body = json.dumps(body).encode()
        return Response(status=code, body=body or b"", headers=headers or {})

    def endless(self, chunk: str = ".", delay: float = 0.0) -> Response:
        """A stream that never ends: tool-call argument deltas forever (nothing for the client)."""
        return Response(body=chunk.encode(), delay=delay, then="endless")

    def stall(self, events_before: int = 1) -> Response:
        """An OpenAI stream that sends `events_before` text chunks, then goes silent until stop()."""
        return self._partial(events_before, "stall")

    def drop(self, events_before: int = 1) -> Response:
        """An OpenAI stream that sends `events_before` text chunks, then closes the connection."""
        return self._partial(events_before, "drop")

    def _partial(self, count: int, then: str) -> Response:
        events = [_sse({"choices": [{"index": 0, "delta": {"content": f"part{n} "}}]}) for n in range(count)]
        return Response(events=events, then=then)

    def openai_cut(self, text: str, usage: dict | None = None) -> Response:
        """A reply stopped by the token limit (finish_reason "length"), as LiteLLM and llama.cpp send it."""
        events = [_sse({"choices": [{"index": 0, "delta": {"content": text}}]}),
                  _sse({"choices": [{"index": 0, "delta": {}, "finish_reason": "length"}]})]
        if usage is not None:
            events.append(_sse({"choices": [], "usage": usage}))
        return Response(events=events + [_sse("[DONE]")])

    def anthropic_cut(self, text: str) -> Response:
        """A reply stopped by max_tokens."""
        events = [_named("message_start", {"type": "message_start", "message": {"usage": {"input_tokens": 10}}}),
                  _named("content_block_start", {"type": "content_block_start", "index": 0,
                                                 "content_block": {"type": "text", "text": ""}}),
                  _named("content_block_delta", {"type": "content_block_delta", "index": 0,
                                                 "delta": {"type": "text_delta", "text": text}}),
                  _named("content_block_stop", {"type": "content_block_stop", "index": 0}),
                  _named("message_delta", {"type": "message_delta", "delta": {"stop_reason": "max_tokens"},
                                           "usage": {"output_tokens": 50}}),
                  _named("message_stop", {"type": "message_stop"})]
        return Response(events=events)

    def anthropic_events(self, *payloads: dict) -> Response:
        """Messages API events as given (each payload's type is its event name)."""
        return Response(events=[_named(p["type"], p) for p in payloads])

    def garbage(self) -> Response:
        return Response(events=[b"this is not server-sent events\n", b"\x00\xff{{{\n\n"])

    def raw_events(self, *payloads: str) -> Response:
        return Response(events=[_sse(p) for p in payloads])
