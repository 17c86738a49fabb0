#!/usr/bin/env python3
"""An MCP server for Bob's tests, standard library only: stdio (the default) or streamable HTTP.

    python mcp_server.py [--record FILE] [--slow-start S] [--garbage] [--no-answer]
    python mcp_server.py --http PORT_FILE [--sse] [--record FILE]
    python mcp_server.py --legacy-sse PORT_FILE [--record FILE] [--foreign-endpoint URL] [--refuse METHOD]
                         [--no-endpoint] [--redirect-posts URL]

Tools: echo (read-only), add, slow (sleeps until cancelled), fail (isError), image, grow (adds a
tool and says so with notifications/tools/list_changed), crash (the server exits), spawn (starts
a child that sleeps: for the no-orphan checks). tools/list answers in two pages. --record writes
every message received, one JSON object a line.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time

TOOLS = [
    {"name": "echo", "description": "Say the message back.", "annotations": {"readOnlyHint": True},
     "inputSchema": {"type": "object", "properties": {"message": {"type": "string"}}, "required": ["message"]}},
    {"name": "add", "description": "Add two numbers.",
     "inputSchema": {"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}}},
    {"name": "slow", "description": "Take a long time.", "inputSchema": {"type": "object", "properties": {}}},
    {"name": "fail", "description": "Always fails.", "inputSchema": {"type": "object", "properties": {}}},
    {"name": "image", "description": "Returns a picture.", "inputSchema": {"type": "object", "properties": {}}},
    {"name": "grow", "description": "Adds a tool.", "inputSchema": {"type": "object", "properties": {}}},
    {"name": "crash", "description": "Ends the server.", "inputSchema": {"type": "object", "properties": {}}},
    {"name": "spawn", "description": "Starts a child process.",
     "inputSchema": {"type": "object", "properties": {"marker": {"type": "string"}}}},
    {"name": "weird.name with spaces", "description": "A name that needs cleaning.",
     "inputSchema": {"type": "object", "properties": {}}},
    {"name": "escape", "description": "Starts a child that leaves the process group (setsid).",
     "inputSchema": {"type": "object", "properties": {"marker": {"type": "string"}}}},
    {"name": "big", "description": "Answers with `size` bytes of text.",
     "inputSchema": {"type": "object", "properties": {"size": {"type": "integer"}}}},
]
MANY = int(os.environ.get("MCP_TEST_MANY_TOOLS", "0"))  # extra tools listed (the cap on tools offered)
ENDLESS_PAGES = os.environ.get("MCP_TEST_ENDLESS_PAGES") == "1"  # after grow, tools/list pages for ever
EXTRA = {"name": "extra", "description": "Added by grow.", "inputSchema": {"type": "object", "properties": {}}}


class Server:
    def __init__(self, send, record: str | None):
        self.send = send  # send(message dict)
        self.record = record
        self.tools = list(TOOLS) + [{"name": f"many{i}", "description": "One of many.",
                                     "inputSchema": {"type": "object", "properties": {}}} for i in range(MANY)]
        self.cancelled: set = set()
        self.lock = threading.Lock()

    def log(self, message: dict) -> None:
        if self.record:
            with self.lock, open(self.record, "a") as handle:
                handle.write(json.dumps({"at": time.time(), **message}) + "\n")

    def handle(self, message: dict) -> dict | None:
        """The answer to a request (None for a notification, or a call that was cancelled)."""
        self.log(message)
        method = message.get("method")
        if "id" not in message:
            if method == "notifications/cancelled":
                self.cancelled.add(message.get("params", {}).get("requestId"))
            return None
        msg_id = message["id"]
        params = message.get("params") or {}
        if method == "initialize":
            return self.result(msg_id, {"protocolVersion": "2025-11-25", "capabilities": {"tools": {"listChanged": True}},
                                        "serverInfo": {"name": "bob-test-mcp", "version": "1"}})
        if method == "tools/list" and ENDLESS_PAGES and EXTRA in self.tools:
            time.sleep(0.5)  # after grow: a slow server that pages for ever
            return self.result(msg_id, {"tools": self.tools, "nextCursor": f"page{time.time()}"})
        if method == "tools/list":
            half = len(self.tools) // 2
            if params.get("cursor") == "page2":
                return self.result(msg_id, {"tools": self.tools[half:]})
            return self.result(msg_id, {"tools": self.tools[:half], "nextCursor": "page2"})
        if method == "tools/call":
            return self.call(msg_id, params.get("name"), params.get("arguments") or {})
        if method == "ping":
            return self.result(msg_id, {})
        return {"jsonrpc": "2.0", "id": msg_id, "error": {"code": -32601, "message": f"Method not found: {method}"}}

    def result(self, msg_id, result) -> dict:
        return {"jsonrpc": "2.0", "id": msg_id, "result": result}

    def text(self, msg_id, text, error=False) -> dict:
        return self.result(msg_id, {"content": [{"type": "text", "text": text}], "isError": error})

    def call(self, msg_id, name, args) -> dict | None:
        if name == "echo":
            return self.text(msg_id, f"echo: {args.get('message')}")
        if name == "add":
            return self.text(msg_id, str(args.get("a", 0) + args.get("b", 0)))
        if name == "slow":
            deadline = time.time() + 60
            while time.time() < deadline:
                if msg_id in self.cancelled:
                    self.log({"cancelled": msg_id})
                    return None  # a cancelled request is not answered
                time.sleep(0.02)
            return self.text(msg_id, "slow done")
        if name == "fail":
            return self.text(msg_id, "it broke", error=True)
        if name == "image":
            return self.result(msg_id, {"content": [{"type": "text", "text": "a picture:"},
                                                    {"type": "image", "data": "aGVsbG8=", "mimeType": "image/png"}]})
        if name == "grow":
            if EXTRA not in self.tools:
                self.tools.append(EXTRA)
            self.send({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
            return self.text(msg_id, "grown")
        if name == "extra":
            return self.text(msg_id, "extra tool ran")
        if name == "crash":
            os._exit(3)
        if name == "escape":
            subprocess.Popen(["setsid", "sleep", f"300.{args.get('marker', '0')}"], stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
            return self.text(msg_id, "escaped")
        if name == "big":
            return self.text(msg_id, "x" * int(args.get("size", 0)))
        if name == "spawn":
            subprocess.Popen(["sleep", f"300.{args.get('marker', '0')}"], stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
            return self.text(msg_id, "spawned")
        return {"jsonrpc": "2.0", "id": msg_id, "error": {"code": -32602, "message": f"Unknown tool: {name}"}}


def serve_stdio(args) -> None:
    out_lock = threading.Lock()

    def send(message: dict) -> None:
        with out_lock:
            sys.stdout.write(json.dumps(message) + "\n")
            sys.stdout.flush()

    server = Server(send, args.record)
    if args.garbage:
        sys.stdout.write("this is not JSON-RPC\n")
        sys.stdout.flush()
        time.sleep(0.5)
        return
    print("test MCP server ready (stderr goes to Bob's log)", file=sys.stderr, flush=True)
    if args.noisy:
        threading.Thread(target=lambda: [print(f"noise {i}", file=sys.stderr) for i in range(args.noisy)],
                         daemon=True).start()
    for line in sys.stdin:
        try:
            message = json.loads(line)
        except ValueError:
            continue
        if message.get("method") == "initialize":
            if args.no_answer:
                continue
            time.sleep(args.slow_start)

        def work(message=message) -> None:
            answer = server.handle(message)
            if answer is not None:
                send(answer)

        threading.Thread(target=work, daemon=True).start()


def serve_http(args) -> None:
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    sessions: set[str] = set()
    state = {"next": 0}

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *a):
            pass

        def do_POST(self):
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            message = json.loads(body)
            if args.record:
                with open(args.record, "a") as handle:
                    handle.write(json.dumps({"path": self.path, "headers": dict(self.headers)}) + "\n")
            if self.path.startswith("/quiet") and message.get("method") == "tools/call":
                self.send_response(200)  # an event stream begun, then nothing for 30 s
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Connection", "close")
                self.end_headers()
                self.wfile.write(b": priming\n\n")
                self.wfile.flush()
                time.sleep(30)
                self.close_connection = True
                return None
            if self.path.startswith("/silent") and message.get("method") == "tools/call":
                time.sleep(30)  # accepted, and no headers yet: a server still working
            if self.path.startswith("/redirect-here"):  # (the same origin: still not followed)
                return self.reply(307, b"", "application/json", {"Location": "/moved"})
            if self.path.startswith("/redirect"):
                return self.reply(307, b"", "application/json", {"Location": "http://127.0.0.2:9/elsewhere"})
            if self.path.startswith("/huge") and message.get("method") == "tools/call":
                answer = (b'{"jsonrpc": "2.0", "id": %d, "result": {"content": [{"type": "text", "text": "'
                          % message["id"] + b"x" * (args.huge << 20) + b'"}]}}')
                if args.sse:
                    return self.reply(200, b"data: " + answer + b"\n\n", "text/event-stream")
                return self.reply(200, answer, "application/json")
            sid = self.headers.get("Mcp-Session-Id")
            if message.get("method") != "initialize" and sid not in sessions:
                return self.reply(400, b'{"error": "missing or unknown Mcp-Session-Id"}', "application/json")
            local.pending = []
            answer = server.handle(message)
            pending = local.pending
            headers = {}
            if message.get("method") == "initialize":
                state["next"] += 1
                sid = f"session-{state['next']}"
                sessions.add(sid)
                headers["Mcp-Session-Id"] = sid
            if answer is None:
                return self.reply(202, b"", "application/json", headers)
            if args.sse:
                events = b"".join(b"data: " + json.dumps(m).encode() + b"\n\n" for m in [*pending, answer])
                return self.reply(200, b": priming\n\n" + events, "text/event-stream", headers)
            return self.reply(200, json.dumps(answer).encode(), "application/json", headers)

        def do_DELETE(self):
            sessions.discard(self.headers.get("Mcp-Session-Id"))
            if args.record:
                with open(args.record, "a") as handle:
                    handle.write(json.dumps({"deleted": self.headers.get("Mcp-Session-Id")}) + "\n")
            self.reply(200, b"", "application/json")

        def reply(self, status, body, kind, headers=None):
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            for key, value in (headers or {}).items():
                self.send_header(key, value)
            self.end_headers()
            self.wfile.write(body)

    local = threading.local()
    server = Server(lambda message: local.pending.append(message), args.record)
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    with open(args.http + ".tmp", "w") as handle:
        handle.write(str(httpd.server_address[1]))
    os.replace(args.http + ".tmp", args.http)
    httpd.serve_forever()


def serve_legacy_sse(args) -> None:
    """MCP 2024-11-05's HTTP+SSE: GET /sse holds an event stream whose first event (`endpoint`)
    names /messages?session=N; each message POSTed there is accepted (202) and answered on the
    stream. --foreign-endpoint names another host instead; --refuse METHOD answers its POSTs 500;
    --no-endpoint never names one."""
    import queue
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
    from urllib.parse import parse_qs, urlsplit

    streams: dict[str, queue.Queue] = {}
    state = {"next": 0}
    local = threading.local()

    def record(entry: dict) -> None:
        if args.record:
            with open(args.record, "a") as handle:
                handle.write(json.dumps(entry) + "\n")

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.0"  # (the stream's end is the connection's)

        def log_message(self, *a):
            pass

        def do_GET(self):
            record({"get": self.path, "headers": dict(self.headers)})
            if not self.path.startswith("/sse"):
                return self.reply(404, b"")
            state["next"] += 1
            sid = str(state["next"])
            events: queue.Queue = queue.Queue()
            streams[sid] = events
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.end_headers()
            try:
                if not args.no_endpoint:
                    endpoint = (args.foreign_endpoint or f"/messages?session={sid}").replace(
                        "{port}", str(httpd.server_address[1]))
                    self.wfile.write(f": hello\n\nevent: endpoint\ndata: {endpoint}\n\n".encode())
                    self.wfile.flush()
                while True:
                    try:
                        message = events.get(timeout=0.2)
                    except queue.Empty:  # a keep-alive, as servers send: a client gone is seen here
                        self.wfile.write(b": ping\n\n")
                        self.wfile.flush()
                        continue
                    self.wfile.write(b"event: message\ndata: " + json.dumps(message).encode() + b"\n\n")
                    self.wfile.flush()
            except OSError:
                pass
            finally:
                streams.pop(sid, None)
                record({"stream_ended": sid})

        def do_POST(self):
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            message = json.loads(body)
            record({"post": self.path, "headers": dict(self.headers), **message})
            sid = parse_qs(urlsplit(self.path).query).get("session", [""])[0]
            events = streams.get(sid)
            if args.redirect_posts:
                self.send_response(307)
                self.send_header("Location", args.redirect_posts)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return None
            if events is None:
                return self.reply(404, b"no such session")
            if args.refuse and message.get("method") == args.refuse:
                return self.reply(500, b"refused")
            self.reply(202, b"Accepted")
            local.events = events
            answer = server.handle(message)
            if answer is not None:
                events.put(answer)

        def reply(self, status, body):
            self.send_response(status)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            self.wfile.flush()

    server = Server(lambda message: local.events.put(message), None)
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    with open(args.legacy_sse + ".tmp", "w") as handle:
        handle.write(str(httpd.server_address[1]))
    os.replace(args.legacy_sse + ".tmp", args.legacy_sse)
    httpd.serve_forever()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--record")
    parser.add_argument("--slow-start", type=float, default=0.0)
    parser.add_argument("--garbage", action="store_true")
    parser.add_argument("--no-answer", action="store_true")
    parser.add_argument("--http")
    parser.add_argument("--sse", action="store_true")
    parser.add_argument("--marker", default="")  # only so tests can find this process in /proc
    parser.add_argument("--noisy", type=int, default=0)  # lines written to stderr at start
    parser.add_argument("--huge", type=int, default=8)  # MiB of the /huge path's tools/call answer
    parser.add_argument("--legacy-sse")
    parser.add_argument("--foreign-endpoint")  # ({port}: the server's own)
    parser.add_argument("--redirect-posts")  # every message POST answered 307 to this URL
    parser.add_argument("--refuse")
    parser.add_argument("--no-endpoint", action="store_true")
    args = parser.parse_args()
    if args.legacy_sse:
        serve_legacy_sse(args)
    elif args.http:
        serve_http(args)
    else:
        serve_stdio(args)


if __name__ == "__main__":
    main()
