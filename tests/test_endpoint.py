"""The JSON-RPC endpoint in-process: envelope rules, routing, errors, the inbound bound,
outbound requests, shutdown. (The same rules are proven end to end in test_e2e_transport.py.)"""

import os
import queue
import threading
import time
from concurrent.futures import CancelledError

import orjson
import pytest

from bob_acp import log as bob_log
from bob_acp.jsonrpc import endpoint as endpoint_module
from bob_acp.jsonrpc import inbox as inbox_module
from bob_acp.jsonrpc.endpoint import Endpoint, PeerError, Reply, Route
from bob_acp.jsonrpc.errors import RpcError
from bob_acp.jsonrpc.streams import Writer


class Harness:
    def __init__(self, routes, notifications=None, on_close=None, urgent=frozenset(), in_order=frozenset()):
        self.in_r, self.in_w = os.pipe()
        self.out_r, self.out_w = os.pipe()
        self.writer = Writer(self.out_w)
        self.lines: queue.Queue = queue.Queue()
        bob_log.setup("error")
        self.endpoint = Endpoint(self.writer, routes, notifications or {}, bob_log.get("test"),
                                 on_close=on_close, urgent=urgent, max_frame=1024, in_order=in_order)
        self._collector = threading.Thread(target=self._collect, daemon=True)
        self._collector.start()
        self.served = threading.Thread(target=self.endpoint.serve, args=(os.fdopen(self.in_r, "rb"),), daemon=True)
        self.served.start()

    def _collect(self):
        buffer = b""
        while True:
            data = os.read(self.out_r, 65536)
            if not data:
                return
            buffer += data
            while b"\n" in buffer:
                line, buffer = buffer.split(b"\n", 1)
                self.lines.put(orjson.loads(line))

    def send(self, data):
        os.write(self.in_w, data if isinstance(data, bytes) else orjson.dumps(data) + b"\n")

    def next(self, timeout=3):
        return self.lines.get(timeout=timeout)

    def quiet(self, seconds=0.2):
        try:
            frame = self.lines.get(timeout=seconds)
        except queue.Empty:
            return True
        raise AssertionError(f"unexpected frame {frame}")

    def close(self):
        try:
            os.close(self.in_w)
        except OSError:
            pass
        self.served.join(3)
        self.writer.close(1)
        os.close(self.out_w)
        self._collector.join(3)
        os.close(self.out_r)


@pytest.fixture
def harness():
    made = []

    def make(routes=None, **kw):
        h = Harness(routes if routes is not None else {"echo": Route(lambda p: p)}, **kw)
        made.append(h)
        return h

    yield make
    for h in made:
        h.close()


def error_of(frame):
    return frame["id"], frame["error"]["code"]


def test_a_request_is_answered_with_its_id(harness):
    h = harness()
    h.send({"jsonrpc": "2.0", "id": 7, "method": "echo", "params": {"x": 1}})
    assert h.next() == {"jsonrpc": "2.0", "id": 7, "result": {"x": 1}}
    h.send({"jsonrpc": "2.0", "id": "abc", "method": "echo", "params": {}})
    assert h.next()["id"] == "abc"


@pytest.mark.parametrize("raw", [b"{not json\n", b'{"jsonrpc":"2.0","id":1,"method":"echo","params":{"a":NaN}}\n',
                                 b'{"a":"\xff"}\n'])
def test_invalid_json_is_a_parse_error_with_null_id(harness, raw):
    h = harness()
    h.send(raw)
    assert error_of(h.next()) == (None, -32700)


@pytest.mark.parametrize("frame", [
    {"id": 1, "method": "echo"},
    {"jsonrpc": "1.0", "id": 1, "method": "echo"},
    {"jsonrpc": "2.0", "id": {"a": 1}, "method": "echo"},
    {"jsonrpc": "2.0", "id": [1], "method": "echo"},
    {"jsonrpc": "2.0", "id": True, "method": "echo"},
    {"jsonrpc": "2.0", "id": 0.5, "method": "echo"},
    {"jsonrpc": "2.0", "id": 1e30, "method": "echo"},
    {"jsonrpc": "2.0", "id": 1, "method": 5},
    [{"jsonrpc": "2.0", "id": 1, "method": "echo"}],
    "hello",
    42,
    {"jsonrpc": "2.0", "id": 3},
])
def test_bad_envelopes_are_invalid_requests_with_null_id(harness, frame):
    h = harness()
    h.send(frame)
    assert error_of(h.next()) == (None, -32600)


def test_unknown_methods_and_extensions_are_not_found(harness):
    h = harness()
    h.send({"jsonrpc": "2.0", "id": 1, "method": "nope"})
    h.send({"jsonrpc": "2.0", "id": 2, "method": "_vendor/thing"})
    assert error_of(h.next()) == (1, -32601)
    assert error_of(h.next()) == (2, -32601)


def test_unknown_notifications_and_unknown_responses_are_ignored(harness):
    h = harness()
    h.send({"jsonrpc": "2.0", "method": "whatever", "params": {}})
    h.send({"jsonrpc": "2.0", "id": 999, "result": {}})
    assert h.quiet()
    h.send({"jsonrpc": "2.0", "id": 1, "method": "echo", "params": {}})
    assert h.next()["id"] == 1


def test_params_that_are_not_an_object_are_invalid_params(harness):
    h = harness()
    h.send({"jsonrpc": "2.0", "id": 1, "method": "echo", "params": [1, 2]})
    frame = h.next()
    assert error_of(frame) == (1, -32602) and "params" in frame["error"]["message"]


def test_a_handler_exception_fails_only_that_request(harness, capsys):
    def boom(_params):
        raise KeyError("secret detail")

    h = harness({"boom": Route(boom), "echo": Route(lambda p: p)})
    h.send({"jsonrpc": "2.0", "id": 1, "method": "boom", "params": {}})
    frame = h.next()
    assert error_of(frame) == (1, -32603)
    assert "secret detail" not in orjson.dumps(frame).decode()
    h.send({"jsonrpc": "2.0", "id": 2, "method": "echo", "params": {"ok": True}})
    assert h.next()["result"] == {"ok": True}


def test_rpc_errors_keep_their_code_and_data(harness):
    def bad(_params):
        raise RpcError.invalid_params("sessionId: required", data={"sessionId": None})

    h = harness({"bad": Route(bad)})
    h.send({"jsonrpc": "2.0", "id": 1, "method": "bad", "params": {}})
    assert h.next()["error"] == {"code": -32602, "message": "Invalid params: sessionId: required", "data": {"sessionId": None}}


def test_an_oversized_frame_is_refused_and_the_next_answered(harness):
    h = harness()
    h.send(b'{"jsonrpc":"2.0","id":1,"method":"echo","params":{"p":"' + b"x" * 5000 + b'"}}\n')
    assert error_of(h.next()) == (1, -32600)  # its own id, read from the line's start
    h.send(b'[' + b"1," * 3000 + b'1]\n')
    assert error_of(h.next()) == (None, -32600)  # (no request in it: no id to answer under)
    h.send({"jsonrpc": "2.0", "id": 2, "method": "echo", "params": {}})
    assert h.next()["id"] == 2


def test_reply_after_runs_once_the_response_is_queued(harness):
    h = harness()
    h.endpoint._routes["new"] = Route(lambda p: Reply({"sessionId": "s"}, after=lambda: h.endpoint.notify("note", {})))
    h.send({"jsonrpc": "2.0", "id": 1, "method": "new", "params": {}})
    assert h.next()["result"] == {"sessionId": "s"}
    assert h.next()["method"] == "note"


def test_worker_routes_leave_the_dispatcher_free(harness):
    release = threading.Event()
    h = harness({"slow": Route(lambda p: release.wait(5) and {"slow": True}, worker=True), "echo": Route(lambda p: p)})
    h.send({"jsonrpc": "2.0", "id": 1, "method": "slow", "params": {}})
    h.send({"jsonrpc": "2.0", "id": 2, "method": "echo", "params": {}})
    assert h.next()["id"] == 2
    release.set()
    assert h.next() == {"jsonrpc": "2.0", "id": 1, "result": {"slow": True}}


def test_a_full_inbound_queue_holds_the_reader_and_every_request_gets_its_real_answer(harness, monkeypatch):
    """Backpressure: past the bound the reader waits for room (so the client's writes block)
    instead of answering "server busy"; urgent notifications never wait."""
    monkeypatch.setattr(inbox_module, "MAX_PENDING_FRAMES", 4)
    gate = threading.Event()
    seen = []
    h = harness({"block": Route(lambda p: gate.wait(5) and {}), "echo": Route(lambda p: p)},
                notifications={"cancel": lambda p: seen.append(p)}, urgent=frozenset({"cancel"}))
    h.send({"jsonrpc": "2.0", "id": 0, "method": "block", "params": {}})  # holds the dispatcher
    for i in range(1, 6):
        h.send({"jsonrpc": "2.0", "id": i, "method": "echo", "params": {}})
    wait_until(lambda: h.endpoint._inbox.reader_waiting)  # past the bound: the reader waits for room
    assert h.endpoint._inbox.frames <= 4
    h.send({"jsonrpc": "2.0", "method": "cancel", "params": {"n": 1}})
    assert h.quiet(0.2)  # nothing refused, nothing answered while the dispatcher is held
    gate.set()
    frames = [h.next() for _ in range(6)]
    assert [f["id"] for f in frames] == [0, 1, 2, 3, 4, 5] and all("result" in f for f in frames)
    wait_until(lambda: seen == [{"n": 1}])


def test_requests_held_by_workers_past_the_bound_are_server_busy(harness, monkeypatch):
    monkeypatch.setattr(endpoint_module, "MAX_HELD_FRAMES", 2)
    gate = threading.Event()
    h = harness({"slow": Route(lambda p: gate.wait(5) and {"done": True}, worker=True)})
    for i in range(3):
        h.send({"jsonrpc": "2.0", "id": i, "method": "slow", "params": {}})
    busy = h.next()
    assert error_of(busy) == (2, -32603) and "busy" in busy["error"]["message"]
    gate.set()
    assert sorted(h.next()["id"] for _ in range(2)) == [0, 1]


def test_outbound_request_gets_its_answer_and_ignores_a_second(harness):
    h = harness()
    outcomes = []
    t = threading.Thread(target=lambda: outcomes.append(h.endpoint.request("ask", {"q": 1}).result()))
    t.start()
    req = h.next()
    assert req["method"] == "ask" and isinstance(req["id"], int)
    h.send({"jsonrpc": "2.0", "id": req["id"], "result": {"answer": 42}})
    h.send({"jsonrpc": "2.0", "id": req["id"], "result": {"answer": 43}})
    t.join(3)
    assert outcomes == [{"answer": 42}]
    h.send({"jsonrpc": "2.0", "method": "echo", "id": 99, "params": {}})  # the second answer changed nothing
    assert h.next()["id"] == 99 and outcomes == [{"answer": 42}]


def test_an_in_order_notification_is_seen_before_the_answer_sent_after_it(harness):
    """MCP's tools/list_changed comes before the answer to the call that changed the tools; the
    caller must see it when its answer arrives, even with the dispatcher busy elsewhere."""
    gate = threading.Event()
    seen = []
    h = harness({"block": Route(lambda p: gate.wait(5) and {})},
                notifications={"changed": lambda p: seen.append(p)}, in_order=frozenset({"changed"}))
    h.send({"jsonrpc": "2.0", "id": 0, "method": "block", "params": {}})  # holds the dispatcher
    seen_at_answer = []
    t = threading.Thread(target=lambda: (h.endpoint.request("call", {}).result(), seen_at_answer.append(list(seen))))
    t.start()
    req = h.next()
    h.send({"jsonrpc": "2.0", "method": "changed", "params": {"n": 1}})
    h.send({"jsonrpc": "2.0", "id": req["id"], "result": {}})
    t.join(3)
    assert seen_at_answer == [[{"n": 1}]]
    gate.set()
    assert h.next()["id"] == 0


@pytest.mark.parametrize("answer, why", [
    ({"jsonrpc": "2.0", "id": "ID", "result": {}}, "string id where a number was sent"),
    ({"jsonrpc": "2.0", "id": "NUM", "error": {"code": -1, "message": "no"}}, "error"),
    ({"id": "NUM", "result": {}}, "missing jsonrpc"),
    ({"jsonrpc": "2.0", "id": "NUM"}, "neither result nor error"),
])
def test_outbound_request_malformed_answers_settle_it_as_an_error(harness, answer, why):
    """Each settles the request at once, as an error: nobody needs to cancel it."""
    h = harness()
    sent = h.endpoint.request("ask", {})
    req = h.next()
    frame = dict(answer)
    frame["id"] = str(req["id"]) if answer["id"] == "ID" else req["id"]
    h.send(frame)
    failed = sent.exception(timeout=3)  # (a request left waiting: TimeoutError)
    assert isinstance(failed, PeerError) and failed.error and not sent.cancelled(), why


def test_abandon_and_eof_end_an_outbound_wait(harness):
    closed = []
    h = harness(on_close=lambda: closed.append(True))
    first = h.endpoint.request("ask", {})
    waited = []
    waiter = threading.Thread(target=lambda: waited.append(first.settled()))  # (as a turn waits on it)
    waiter.start()
    h.next()
    assert first.cancel()  # from another thread: a cancel of the turn
    waiter.join(2)
    assert waited == [first] and first.cancelled()
    h.send({"jsonrpc": "2.0", "id": first.id, "result": {}})  # an answer after we stopped waiting: ignored
    second = h.endpoint.request("ask", {})
    h.next()
    os.close(h.in_w)
    with pytest.raises(CancelledError):
        second.result(timeout=2)
    assert closed == [True]
    h.served.join(2)
    assert not h.served.is_alive()
    assert h.endpoint.request("late", {}).cancelled()  # after the end: settled at once


def test_a_request_that_cannot_be_encoded_fails_its_caller_at_once(harness):
    h = harness()
    sent = h.endpoint.request("ask", {"bad": object()})
    assert sent.done() and isinstance(sent.exception(), PeerError) and "could not be sent" in sent.exception().error


def test_lone_surrogates_are_answered_under_their_own_id(harness):
    h = harness()
    h.send(b'{"jsonrpc":"2.0","id":7,"method":"echo","params":{"text":"a\\ud83d b \\udc00"}}\n')
    assert h.next() == {"jsonrpc": "2.0", "id": 7, "result": {"text": "a\ufffd b \ufffd"}}
    h.send(b'\xef\xbb\xbf{"jsonrpc":"2.0","id":8,"method":"echo","params":{"pair":"\\ud83d\\ude00"}}\n')
    assert h.next() == {"jsonrpc": "2.0", "id": 8, "result": {"pair": "\U0001f600"}}


def test_a_result_holding_surrogates_is_sent_clean_not_dropped(harness):
    h = harness({"odd": Route(lambda p: {"name": "caf\udce9.txt"})})
    h.send({"jsonrpc": "2.0", "id": 1, "method": "odd", "params": {}})
    assert h.next() == {"jsonrpc": "2.0", "id": 1, "result": {"name": "caf\ufffd.txt"}}


def test_a_guarded_reply_is_made_and_written_under_its_lock(harness):
    lock = threading.Lock()
    order = []

    def handler(_params):
        def make():
            order.append(("made", lock.locked()))
            return {"ok": True}
        return Reply(make, guard=lock)

    h = harness({"g": Route(handler, worker=True)})
    h.send({"jsonrpc": "2.0", "id": 1, "method": "g", "params": {}})
    assert h.next()["result"] == {"ok": True} and order == [("made", True)]


def wait_until(condition, timeout=3.0):
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.005)


def test_frames_queued_before_eof_are_still_answered(harness):
    gate = threading.Event()
    h = harness({"block": Route(lambda p: gate.wait(5) and {}), "echo": Route(lambda p: p)})
    h.send({"jsonrpc": "2.0", "id": 1, "method": "block", "params": {}})
    h.send({"jsonrpc": "2.0", "id": 2, "method": "echo", "params": {}})
    os.close(h.in_w)
    wait_until(lambda: h.endpoint.closed, timeout=30)  # (the reader has met EOF with both frames queued)
    gate.set()
    assert [h.next()["id"], h.next()["id"]] == [1, 2]


# ---- runs: frames handed on together, answers written together ---------------------------------------

def test_a_pipelined_burst_is_answered_whole_and_in_order(harness):
    h = harness()
    h.send(b"".join(orjson.dumps({"jsonrpc": "2.0", "id": i, "method": "echo", "params": {"i": i}}) + b"\n"
                    for i in range(1000)))
    frames = [h.next() for _ in range(1000)]
    assert [f["id"] for f in frames] == list(range(1000)) and all(f["result"] == {"i": f["id"]} for f in frames)


def test_answers_held_back_by_the_dispatcher_come_before_what_a_worker_it_starts_writes(harness):
    """One read brings an inline request (its answer and follow-up are held back for one write)
    and a worker request whose first act is a notification: the first's frames come first."""
    endpoint = []
    h = harness({"inline": Route(lambda p: Reply({"done": 1}, after=lambda: endpoint[0].notify("after", {}))),
                 "work": Route(lambda p: endpoint[0].notify("working", {}) or {"done": 2}, worker=True)})
    endpoint.append(h.endpoint)
    h.send(orjson.dumps({"jsonrpc": "2.0", "id": 1, "method": "inline", "params": {}}) + b"\n"
           + orjson.dumps({"jsonrpc": "2.0", "id": 2, "method": "work", "params": {}}) + b"\n")
    frames = [h.next() for _ in range(4)]
    assert [f.get("id", f.get("method")) for f in frames[:3]] == [1, "after", "working"] and frames[3]["id"] == 2


def test_a_request_to_the_client_from_an_inline_handler_is_sent_before_it_waits(harness):
    """An inline handler that asks the client and waits for the answer: its request is never
    held back with the dispatcher's frames (that would wait for ever)."""
    endpoint = []
    h = harness({"ask": Route(lambda p: endpoint[0].request("question", {}).result())})
    endpoint.append(h.endpoint)
    h.send(orjson.dumps({"jsonrpc": "2.0", "id": 1, "method": "echo", "params": {}}) + b"\n"
           + orjson.dumps({"jsonrpc": "2.0", "id": 2, "method": "ask", "params": {}}) + b"\n")  # one read
    assert h.next()["error"]["code"] == -32601  # (echo: no such route here) held, then written with the question
    question = h.next()
    assert question["method"] == "question"
    h.send({"jsonrpc": "2.0", "id": question["id"], "result": {"answer": 42}})
    assert h.next() == {"jsonrpc": "2.0", "id": 2, "result": {"answer": 42}}


# ---- by messages (the MCP HTTP transports' way): no byte stream, no pipe ----------------------

class Messages:
    """An endpoint served by messages: what it sends, as dicts, in a queue."""

    def __init__(self, routes, notifications=None, in_order=frozenset(), cancel_method=None):
        bob_log.setup("error")
        self.out: queue.Queue = queue.Queue()
        self.endpoint = Endpoint(self.out.put, routes, notifications or {}, bob_log.get("test"), in_order=in_order,
                                 cancel_method=cancel_method)
        self.endpoint.start()

    def next(self, timeout=3):
        return self.out.get(timeout=timeout)


def test_by_messages_requests_are_routed_and_answered_as_dicts():
    m = Messages({"echo": Route(lambda p: p), "slow": Route(lambda p: {"slow": True}, worker=True)})
    m.endpoint.consume({"jsonrpc": "2.0", "id": 1, "method": "echo", "params": {"x": 1}})
    assert m.next() == {"jsonrpc": "2.0", "id": 1, "result": {"x": 1}}
    m.endpoint.consume({"jsonrpc": "2.0", "id": 2, "method": "slow", "params": {}})
    assert m.next() == {"jsonrpc": "2.0", "id": 2, "result": {"slow": True}}
    m.endpoint.consume({"jsonrpc": "2.0", "id": 3, "method": "nope"})
    assert m.next()["error"]["code"] == -32601
    m.endpoint.consume(["not", "a", "message"])  # (what a transport decoded, however wrong: an error, by id null)
    assert m.next()["error"]["code"] == -32600
    m.endpoint.end()
    assert m.endpoint.closed


def test_by_messages_our_request_is_settled_by_the_answer_consumed_and_cancelled_at_the_end():
    changed = []
    m = Messages({}, {"changed": lambda p: changed.append(p)}, in_order=frozenset({"changed"}))
    sent = m.endpoint.request("question", {"q": 1})
    asked = m.next()
    assert asked == {"jsonrpc": "2.0", "id": sent.id, "method": "question", "params": {"q": 1}}
    m.endpoint.consume({"jsonrpc": "2.0", "method": "changed", "params": {"n": 1}})  # (in order: before the answer)
    m.endpoint.consume({"jsonrpc": "2.0", "id": sent.id, "result": {"a": 42}})
    assert sent.settled(3).result() == {"a": 42} and changed == [{"n": 1}]
    waiting = m.endpoint.request("another", {})
    assert m.next()["method"] == "another"
    m.endpoint.end()  # the peer sends no more: what waited ends, and nothing more is taken
    assert waiting.settled(3).cancelled()
    m.endpoint.consume({"jsonrpc": "2.0", "id": 9, "method": "echo"})
    with pytest.raises(queue.Empty):
        m.out.get(timeout=0.2)


def test_by_messages_a_consumer_that_fails_fails_that_send_only():
    refused = []
    bob_log.setup("error")

    def consumer(message):
        if message.get("method") == "bad":
            refused.append(message)
            raise OSError("the server is gone")

    endpoint = Endpoint(consumer, {}, {}, bob_log.get("test"))
    endpoint.start()
    assert endpoint.notify("bad", {}) is False and refused
    sent = endpoint.request("bad", {})
    assert isinstance(sent.settled(3).exception(), PeerError)  # (answered at once: it was never sent)
    assert endpoint.notify("good", {}) is True
    endpoint.end()
