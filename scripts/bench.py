#!/usr/bin/env python3
"""Bob's benchmark: what a user feels (start-up, exit, a request's round trip, streaming, a
cancel, memory), measured in one run beside two peers, echo agents on the official Python SDK
(scripts/peer_echo_agent.py) and on the official TypeScript SDK (tests/js/peer_ts_agent.mjs, run
with node from the package the tests install in tests/js; left out, and said so, when node or the
package is missing), and, with --baseline, an earlier release of Bob. It measures the installed
`bob-acp` (the console script beside this interpreter, as `pip install .` puts it), never the
source tree. The same work runs on every agent, alternating; every figure is printed with Bob's
ratio to each other agent that can do the work. What only Bob does (a session, a model's stream,
a command) is stated as a figure of its own: the echo agents answer with an id and nothing else.

    python scripts/bench.py                 # the full run (about five minutes)
    python scripts/bench.py --quick         # fewer repetitions
    python scripts/bench.py --only cold,exit,burst
    python scripts/bench.py --baseline ~/old/bin/bob-acp    # beside an earlier release
    python scripts/bench.py --break-kill    # self-check: Bob with its process-group kill disabled;
                                            # the "no process survives a cancel" target must MISS

Only correct answers count: an error where a result was due (or the wrong error) is a failure,
reported as a count beside the figure. Targets are printed MET or MISSED; nothing here is a test
assertion (machines are noisy).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests"))  # the fake model server of the tests
PY = sys.executable
PEER = [PY, os.path.join(HERE, "peer_echo_agent.py")]
JS = os.path.join(os.path.dirname(HERE), "tests", "js")
TS_PEER = ["node", os.path.join(JS, "peer_ts_agent.mjs")]


def peers() -> dict[str, list[str]]:
    """The peers this machine can run: the Python SDK's always, the TypeScript SDK's with node."""
    found = {"peer": PEER}
    if shutil.which("node") and os.path.isdir(os.path.join(JS, "node_modules", "@agentclientprotocol", "sdk")):
        found["ts"] = TS_PEER
    else:
        print("bench: the TypeScript SDK peer is left out (needs node and tests/js/node_modules: run the tests once)")
    return found
# --break-kill: Bob started with its kill of a command's process group made a no-op.
BROKEN_KILL = ("import sys; del sys.path[0]; import bob_acp.tools.bash as b; b._kill_group = lambda pgid: None; "
               "from bob_acp.cli import main; sys.exit(main())")

try:  # the client must cost as little as possible, for both agents
    from orjson import dumps, loads
except ImportError:  # the benchmark also runs where only the standard library is
    loads = json.loads

    def dumps(obj):
        return json.dumps(obj).encode()


def installed_bob() -> list[str]:
    script = os.path.join(os.path.dirname(PY), "bob-acp")
    found = script if os.path.exists(script) else shutil.which("bob-acp")
    if not found:
        sys.exit("bench: bob-acp is not installed beside this Python: pip install . first")
    if _editable():
        print("bench: bob-acp is an editable install (pip install -e): its import hook costs every start-up "
              "about 15 ms that a user's install does not; measure a `pip install .` for start-up figures")
    return [found]


def _editable() -> bool:
    import glob
    import sysconfig

    return bool(glob.glob(os.path.join(sysconfig.get_paths()["purelib"], "__editable__*bob_acp*")))


def frame(msg_id, method, params):
    return dumps({"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params}) + b"\n"


INIT = {"protocolVersion": 1, "clientCapabilities": {}}


class Proc:
    """A spawned agent, read on the calling thread (the client must not be the bottleneck)."""

    def __init__(self, cmd, env, cwd):
        self.p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                  env=env, cwd=cwd, bufsize=0)
        self.out = os.fdopen(self.p.stdout.fileno(), "rb", buffering=1 << 20, closefd=False)
        self._ids = 1000

    def send(self, data: bytes):
        self.p.stdin.write(data)

    def next(self):
        line = self.out.readline()
        if not line:
            raise RuntimeError("agent exited")
        return loads(line)

    def call(self, method, params, on_frame=None):
        self._ids += 1
        msg_id = self._ids
        self.send(frame(msg_id, method, params))
        while True:
            msg = self.next()
            if msg.get("id") == msg_id and "method" not in msg:
                return msg
            if on_frame:
                on_frame(msg)

    def rss(self, field="VmRSS"):
        with open(f"/proc/{self.p.pid}/status") as handle:
            for line in handle:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
        return 0

    def close(self):
        try:
            self.p.stdin.close()
        except OSError:
            pass
        try:
            self.p.wait(10)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait()


def exited(process, limit=10.0):
    """Wait for the process to end, as a blocking waitpid (Popen.wait with a timeout polls, at
    steps that grow to 50 ms: an exit would be measured late by up to that); killed past `limit`."""
    watchdog = threading.Timer(limit, process.kill)
    watchdog.start()
    try:
        process.wait()
    finally:
        watchdog.cancel()


def pct(values, q):
    values = sorted(values)
    return values[min(len(values) - 1, int(round(q / 100 * (len(values) - 1))))]


# ---- measurements ---------------------------------------------------------------------------

def cold_start(cmd, env, cwd):
    """Spawn → initialize answered (ms); False when the answer was not an initialize result."""
    started = time.perf_counter()
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            env=env, cwd=cwd, bufsize=0)
    proc.stdin.write(frame(1, "initialize", INIT))
    line = proc.stdout.readline()
    ready = time.perf_counter()
    proc.stdin.close()
    proc.wait(10)
    try:
        ok = "protocolVersion" in loads(line)["result"]
    except (ValueError, KeyError, TypeError):
        ok = False
    return (ready - started) * 1000, ok


REGISTRY_INIT = {"protocolVersion": 1, "clientInfo": {"name": "ACP Registry Validator", "version": "1.0.0"},
                 "clientCapabilities": {"terminal": True, "fs": {"readTextFile": True, "writeTextFile": True},
                                        "_meta": {"terminal_output": True, "terminal-auth": True}}}


def first_contact(cmd, env, cwd):
    """As an editor meets Bob from the registry, cold: spawn the manifest's command (its args, a
    fresh HOME) → initialize answered, → the first session/new answered (ms each); False when an
    answer was not what was due (an initialize result with sign-in methods, then a session or,
    with no model, authentication required)."""
    started = time.perf_counter()
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            env=env, cwd=cwd, bufsize=0)
    proc.stdin.write(frame(1, "initialize", REGISTRY_INIT))
    init = proc.stdout.readline()
    initialized = time.perf_counter()
    proc.stdin.write(frame(2, "session/new", {"cwd": cwd, "mcpServers": []}))
    new = proc.stdout.readline()
    while new and b'"id":2' not in new.replace(b" ", b""):  # (updates before the answer, if any)
        new = proc.stdout.readline()
    opened = time.perf_counter()
    proc.stdin.close()
    proc.wait(10)
    try:
        answer = loads(new)
        ok = bool(loads(init)["result"]["authMethods"]) and (
            "sessionId" in answer.get("result", {}) or answer.get("error", {}).get("code") == -32000)
    except (ValueError, KeyError, TypeError):
        ok = False
    return (initialized - started) * 1000, (opened - started) * 1000, ok


def idle_exit(cmd, env, cwd):
    """Initialize, open a session, sit idle, close stdin: ms until the process has exited."""
    proc = Proc(cmd, env, cwd)
    proc.call("initialize", INIT)
    ok = "result" in proc.call("session/new", {"cwd": cwd, "mcpServers": []})
    time.sleep(0.5)  # idle: what was loading in the background has loaded
    started = time.perf_counter()
    proc.p.stdin.close()
    exited(proc.p)
    return (time.perf_counter() - started) * 1000, ok and proc.p.returncode == 0


def exit_with_sessions(cmd, env, cwd, script, sessions=300):
    """The full profile's checkpoints, sandbox and session files, `sessions` sessions open and
    idle, then stdin closed: ms until the process has exited (each open session's end is paid).
    (A usable model: the full profile's sign-in refuses sessions without one.)"""
    config = write_config(cwd, {"profile": "full", "limits": {"maxSessions": -1},
                                "model": {"provider": "script", "script": script}})
    proc = Proc(cmd, {**env, "BOB_CONFIG": config}, cwd)
    proc.call("initialize", INIT)
    ok = all("result" in proc.call("session/new", {"cwd": cwd, "mcpServers": []}) for _ in range(sessions))
    time.sleep(1.0)  # idle: their first looks made
    started = time.perf_counter()
    proc.p.stdin.close()
    exited(proc.p, limit=30.0)
    return (time.perf_counter() - started) * 1000, ok and proc.p.returncode == 0


def early_exit(cmd, env, cwd):
    """Initialize, then stdin closed at once (as an editor's probe and the registry's check do):
    ms until the process has exited, whatever it was still loading."""
    proc = Proc(cmd, env, cwd)
    ok = "result" in proc.call("initialize", INIT)
    started = time.perf_counter()
    proc.p.stdin.close()
    exited(proc.p)
    return (time.perf_counter() - started) * 1000, ok and proc.p.returncode == 0


def burst(cmd, env, cwd, n, method, params, correct):
    """n pipelined requests written as fast as the pipe takes them (a writer thread), answers
    read meanwhile; (answers per second, correct answers, wrong answers)."""
    proc = Proc(cmd, env, cwd)
    proc.call("initialize", INIT)
    payload = b"".join(frame(i, method, params) for i in range(n))
    started = time.perf_counter()
    writer = threading.Thread(target=proc.send, args=(payload,))
    writer.start()
    seen, good, bad = set(), 0, 0
    while len(seen) < n:
        msg = proc.next()
        if "method" in msg:
            continue  # a notification (available_commands_update)
        if msg["id"] in seen:
            bad += 1
            continue
        seen.add(msg["id"])
        if correct(msg):
            good += 1
        else:
            bad += 1
    elapsed = time.perf_counter() - started
    writer.join()
    proc.close()
    return n / elapsed, good, bad


def round_trips(cmds, env, cwd, n, method, params_of, block=25):
    """Sequential round trips, both agents alive side by side and served in alternating blocks
    (drift and noise of the machine fall on both alike): {name: (p50 µs, p99 µs, wrong)}."""
    procs = {name: Proc(cmd, env, cwd) for name, cmd in cmds.items()}
    samples = {name: [] for name in procs}
    bad = dict.fromkeys(procs, 0)
    for proc in procs.values():
        proc.call("initialize", INIT)
    for _ in range(max(1, n // block)):
        for name, proc in procs.items():
            for _ in range(block):
                started = time.perf_counter()
                msg = proc.call(method, params_of(), on_frame=lambda _m: None)
                samples[name].append((time.perf_counter() - started) * 1e6)
                bad[name] += "result" not in msg
    for proc in procs.values():
        proc.close()
    return {name: (statistics.median(s), pct(s, 99), bad[name]) for name, s in samples.items()}


def streaming(cmd, env, cwd, n, prompt_text):
    proc = Proc(cmd, env, cwd)
    proc.call("initialize", INIT)
    sid = proc.call("session/new", {"cwd": cwd, "mcpServers": []})["result"]["sessionId"]
    time.sleep(0.3)
    stamps = []

    def on_frame(msg):
        if msg.get("params", {}).get("update", {}).get("sessionUpdate") == "agent_message_chunk":
            stamps.append(time.perf_counter())

    result = proc.call("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": prompt_text}]}, on_frame)
    ended = time.perf_counter()
    proc.close()
    ok = len(stamps) == n and result.get("result", {}).get("stopReason") == "end_turn"
    return len(stamps) / (ended - stamps[0]), ok


def _model_stream(port_queue, sent_queue, count, gap):
    """A model server (its own process, so the client and Bob never wait on it): one streamed
    OpenAI answer of `count` chunks, `gap` seconds apart (sleeping, never spinning: a spinning
    sender takes a core from Bob and the client), each chunk's send time put on `sent_queue`
    (perf_counter is the same clock in every process here: CLOCK_MONOTONIC)."""
    import re
    import socket

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(4)
    port_queue.put(listener.getsockname()[1])
    conn, _ = listener.accept()
    data = b""
    while b"\r\n\r\n" not in data:
        data += conn.recv(65536)
    head, _, body = data.partition(b"\r\n\r\n")
    length = int(re.search(rb"(?i)content-length: *(\d+)", head).group(1))
    while len(body) < length:
        body += conn.recv(65536)
    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n")
    sent = []
    due = time.perf_counter()
    try:
        for i in range(count):
            wait = due - time.perf_counter()
            if wait > 0:
                time.sleep(wait)
            event = b"data: " + dumps({"choices": [{"index": 0, "delta": {"content": f"<{i}>"}}]}) + b"\n\n"
            sent.append(time.perf_counter())
            conn.sendall(event)
            due += gap
        conn.sendall(b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\ndata: [DONE]\n\n')
    except OSError:  # (a cancel closed the stream)
        pass
    conn.close()
    sent_queue.put(sent)


def _http_bob(cmd, env, cwd, port):
    config = write_config(cwd, {"model": {"provider": "openai", "baseUrl": f"http://127.0.0.1:{port}/v1",
                                          "name": "bench", "retries": 0}})
    proc = Proc(cmd, {**env, "BOB_CONFIG": config, "OPENAI_API_KEY": "sk-bench"}, cwd)
    proc.call("initialize", INIT)
    sid = proc.call("session/new", {"cwd": cwd, "mcpServers": []})["result"]["sessionId"]
    time.sleep(0.5)  # idle: what loads in the background has loaded
    return proc, sid


def chunk_latency(cmd, env, cwd, count, gap=0.0002):
    """A model streaming `count` chunks at 1/gap a second: µs from a chunk's send to its
    agent_message_chunk read by the client (p50, p99, max), and whether a chunk was lost."""
    import multiprocessing
    import re

    ports, sent_queue = multiprocessing.Queue(), multiprocessing.Queue()
    server = multiprocessing.Process(target=_model_stream, args=(ports, sent_queue, count, gap), daemon=True)
    server.start()
    proc, sid = _http_bob(cmd, env, cwd, ports.get(timeout=10))
    seen = {}

    def on_frame(msg):
        update = msg.get("params", {}).get("update", {})
        if update.get("sessionUpdate") == "agent_message_chunk":
            now = time.perf_counter()
            for index in re.findall(r"<(\d+)>", update["content"]["text"]):
                seen[int(index)] = now

    answer = proc.call("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "go"}]}, on_frame)
    sent = sent_queue.get(timeout=30)
    server.join(5)
    proc.close()
    delays = [(seen[i] - sent[i]) * 1e6 for i in range(count) if i in seen]
    wrong = len(seen) != count or answer.get("result", {}).get("stopReason") != "end_turn"
    return statistics.median(delays), pct(delays, 99), max(delays), wrong


def stream_cancel(bob, env, cwd, reps):
    """A cancel while a model streams: ms from session/cancel to the `cancelled` answer."""
    import multiprocessing

    samples, wrong = [], 0
    for _ in range(reps):
        ports, sent_queue = multiprocessing.Queue(), multiprocessing.Queue()
        server = multiprocessing.Process(target=_model_stream, args=(ports, sent_queue, 100000, 0.001), daemon=True)
        server.start()
        proc, sid = _http_bob(bob, env, cwd, ports.get(timeout=10))
        proc._ids += 1
        msg_id = proc._ids
        proc.send(frame(msg_id, "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "go"}]}))
        chunks = 0
        while chunks < 50:  # streaming
            chunks += proc.next().get("params", {}).get("update", {}).get("sessionUpdate") == "agent_message_chunk"
        started = time.perf_counter()
        proc.send(dumps({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": sid}}) + b"\n")
        while True:
            msg = proc.next()
            if msg.get("id") == msg_id:
                break
        samples.append((time.perf_counter() - started) * 1000)
        wrong += msg.get("result", {}).get("stopReason") != "cancelled"
        proc.close()
        server.kill()
        server.join(5)
    return statistics.median(samples), max(samples), wrong


def checkpoint_cost(bob, env, root, reps, files=10000):
    """What tools.checkpoints adds to a turn whose command changes one file, in a project of `files`
    files (and a node_modules its .gitignore leaves out): ms of the first such turn of the project,
    sent 2 s after session/new as a person would (the project's first snapshot is made in the
    background from session/new on; a command that comes before it is done goes unrecorded after
    waiting a second), and the median of the turns after the first snapshot is done, each against
    the same turn without checkpoints; and whether /undo then took the turns back."""
    import glob
    import random

    project = os.path.join(root, f"project-{files}")
    rng = random.Random(7)
    for i in range(files):
        folder = os.path.join(project, "src", f"m{i // 100}")
        os.makedirs(folder, exist_ok=True)
        with open(os.path.join(folder, f"f{i}.py"), "w") as handle:
            handle.write(f"# file {i}\n" + "x = 1\n" * rng.randint(1, 60))
    os.makedirs(os.path.join(project, "node_modules", "dep"))
    for i in range(3000):
        with open(os.path.join(project, "node_modules", "dep", f"n{i}.js"), "w") as handle:
            handle.write("module.exports = 1\n")
    with open(os.path.join(project, ".gitignore"), "w") as handle:
        handle.write("node_modules/\n")
    script = os.path.join(root, "checkpoint-script.yaml")
    with open(script, "w") as handle:
        handle.write("turns:\n  - replies:\n      - tool_calls: [{name: bash, arguments: {command: "
                     "\"date +%s%N > note.txt\"}}]\n      - text: done\n")

    def turns(checkpoints):
        config = write_config(root, {"model": {"provider": "script", "script": script},
                                     "permissions": {"mode": "allow-all"}, "tools": {"checkpoints": checkpoints}})
        proc = Proc(bob, {**env, "BOB_CONFIG": config}, project)
        proc.call("initialize", INIT)
        sid = proc.call("session/new", {"cwd": project, "mcpServers": []})["result"]["sessionId"]
        time.sleep(2.0)  # (a person types the first prompt: the project's first snapshot is made meanwhile)
        took, ok = [], True
        for rep in range(reps + 1):
            if rep == 1 and checkpoints:  # (the turns after the first: once the first snapshot is done)
                deadline = time.monotonic() + 300
                while not glob.glob(os.path.join(project, ".bob", "checkpoints", "*.git.look")) and \
                        time.monotonic() < deadline:  # (the store's last look: written once the first is made)
                    time.sleep(0.1)
                time.sleep(0.5)
            started = time.perf_counter()
            msg = proc.call("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "write"}]})
            took.append((time.perf_counter() - started) * 1000)
            ok = ok and msg.get("result", {}).get("stopReason") == "end_turn"
        if checkpoints:
            said = []
            proc.call("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "/undo"}]},
                      lambda m: said.append(m.get("params", {}).get("update", {}).get("content", {}).get("text", "")))
            ok = ok and any("Undid the turn" in line for line in said)
        proc.close()
        return took, ok

    plain, plain_ok = turns(False)
    kept, kept_ok = turns(True)
    shutil.rmtree(os.path.join(project, ".bob"), ignore_errors=True)
    return (kept[0] - plain[0], statistics.median(kept[1:]) - statistics.median(plain[1:]),
            plain_ok and kept_ok)


def tree_memory(pid):
    """RSS of `pid` and every process below it (bytes), their count, and `pid`'s open descriptors."""
    parents = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat") as handle:
                    parents[int(name)] = int(handle.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError):
                continue
    below = {pid}
    grew = True
    while grew:
        grew = False
        for child, parent in parents.items():
            if parent in below and child not in below:
                below.add(child)
                grew = True
    total = 0
    for member in below:
        try:
            with open(f"/proc/{member}/status") as handle:
                total += next(int(line.split()[1]) * 1024 for line in handle if line.startswith("VmRSS:"))
        except (OSError, StopIteration):
            continue
    return total, len(below), len(os.listdir(f"/proc/{pid}/fd"))


def idle_sandboxes(bob, env, root, sessions=200):
    """Memory, processes and descriptors that `sessions` open sessions add, each of which ran one
    sandboxed command (tools.sandbox: workspace, sandboxed mode), to Bob with one such session:
    Bob and everything below it; and whether every command ran."""
    project = os.path.join(root, "sandboxed")
    os.makedirs(project, exist_ok=True)
    script = os.path.join(root, "sandbox-script.yaml")
    with open(script, "w") as handle:
        handle.write("turns:\n  - replies:\n      - tool_calls: [{name: bash, arguments: {command: \"echo ran\"}}]\n"
                     "      - text: done\n")
    config = write_config(root, {"model": {"provider": "script", "script": script},
                                 "permissions": {"mode": "sandboxed"}, "tools": {"sandbox": "workspace"}})
    proc = Proc(bob, {**env, "BOB_CONFIG": config}, project)
    proc.call("initialize", INIT)
    ran = 0
    for count in range(sessions + 1):
        if count == 1:  # (after one session's command: what Bob makes once, its supervisor, is there)
            time.sleep(1.0)
            before = tree_memory(proc.p.pid)
        sid = proc.call("session/new", {"cwd": project, "mcpServers": []})["result"]["sessionId"]
        said: list = []
        proc.call("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "go"}]},
                  lambda m, said=said: said.append(m.get("params", {}).get("update", {})))
        ran += any(u.get("sessionUpdate") == "tool_call_update" and u.get("status") == "completed" for u in said)
    time.sleep(1.0)
    after = tree_memory(proc.p.pid)
    proc.close()
    return (after[0] - before[0]) / 1e6, after[1] - before[1], after[2] - before[2], ran == sessions + 1


def idle_rss(cmd, env, cwd):
    proc = Proc(cmd, env, cwd)
    proc.call("initialize", INIT)
    proc.call("session/new", {"cwd": cwd, "mcpServers": []})
    time.sleep(1.0)  # what loads in the background after start-up is counted
    rss = proc.rss()
    proc.close()
    return rss


def allow_all(proc):
    def on_frame(msg):
        if msg.get("method") == "session/request_permission":
            proc.send(dumps({"jsonrpc": "2.0", "id": msg["id"], "result": {
                "outcome": {"outcome": "selected", "optionId": "allow_always"}}}) + b"\n")
    return on_frame


def cancel_latency(bob, env, cwd, script, reps):
    """Cancel a running `sleep 300.<marker>` (the real command, marker unique per repetition):
    ms to the `cancelled` answer, and how many processes of the command survive it."""
    samples, survivors, wrong = [], 0, 0
    proc = Proc(bob, env, cwd)
    proc.call("initialize", INIT)
    sid = proc.call("session/new", {"cwd": cwd, "mcpServers": []})["result"]["sessionId"]
    respond = allow_all(proc)
    for _ in range(reps):
        marker = str(int(uuid.uuid4().hex[:8], 16))[:8]
        write_script(script, f"sleep 300.{marker} & sleep 301.{marker}")
        proc._ids += 1
        msg_id = proc._ids
        proc.send(frame(msg_id, "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "sleep now"}]}))
        while True:
            msg = proc.next()
            respond(msg)
            if msg.get("params", {}).get("update", {}).get("status") == "in_progress":
                break
        deadline = time.monotonic() + 5
        while len(procs_with(f".{marker}")) < 2 and time.monotonic() < deadline:
            time.sleep(0.01)  # the command's processes are running
        # An agent that never answers the cancel is a failure, not a hang of the benchmark.
        watchdog = threading.Timer(10, proc.p.kill)
        watchdog.start()
        started = time.perf_counter()
        proc.send(dumps({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": sid}}) + b"\n")
        try:
            while True:
                msg = proc.next()
                if msg.get("id") == msg_id:
                    break
        except RuntimeError:  # killed by the watchdog: no answer
            msg = {}
        watchdog.cancel()
        samples.append((time.perf_counter() - started) * 1000)
        wrong += msg.get("result", {}).get("stopReason") != "cancelled"
        deadline = time.monotonic() + 1
        while procs_with(f".{marker}") and time.monotonic() < deadline:
            time.sleep(0.02)
        left = procs_with(f".{marker}")
        survivors += len(left)
        for pid in left:  # a broken kill must not leave the machine littered
            try:
                os.kill(int(pid), 9)
            except OSError:
                pass
        if proc.p.poll() is not None:
            break  # the agent is gone: the repetitions left cannot run
    proc.close()
    return statistics.median(samples), pct(samples, 99), survivors, wrong


def procs_with(marker):
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/cmdline", "rb") as handle:
                    argv = handle.read().split(b"\0")
                with open(f"/proc/{name}/stat", "rb") as handle:
                    zombie = handle.read().rsplit(b")", 1)[1].split()[0] == b"Z"
            except OSError:
                continue
            if not zombie and argv[:1] == [b"sleep"] and any(marker.encode() in a for a in argv[1:]):
                found.append(name)
    return found


def memory_peaks(bob, env, cwd):
    proc = Proc(bob, env, cwd)
    proc.call("initialize", INIT)
    sid = proc.call("session/new", {"cwd": cwd, "mcpServers": []})["result"]["sessionId"]
    time.sleep(1.0)
    base = proc.rss("VmHWM")
    gib = proc.call("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "gigabyte"}]},
                    allow_all(proc))
    gib_mb = (proc.rss("VmHWM") - base) / 1e6
    base = proc.rss("VmHWM")
    big = "word " * (700 * 1024)  # 3.5 MiB
    prompt = proc.call("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": big}]})
    prompt_mb = (proc.rss("VmHWM") - base) / 1e6
    proc.close()
    return gib_mb, prompt_mb, "result" in gib and "result" in prompt


def flood_rss(bob, env, cwd, n):
    """RSS peak while n pipelined requests flood in (the inbound queue holds, the client blocks)."""
    proc = Proc(bob, env, cwd)
    proc.call("initialize", INIT)
    base = proc.rss("VmHWM")
    payload = b"".join(frame(i, "_unknown/flood", {"pad": "x" * 64}) for i in range(n))
    writer = threading.Thread(target=proc.send, args=(payload,))
    writer.start()
    good = 0
    for _ in range(n):
        msg = proc.next()
        good += msg.get("error", {}).get("code") == -32601
    writer.join()
    peak = (proc.rss("VmHWM") - base) / 1e6
    proc.close()
    return peak, good


def load_time(bob, env, cwd, n):
    from bob_acp import sessions
    from bob_acp.context import history

    sid = sessions.new_id()
    messages = [history.system("s")]
    for i in range(n // 4):
        call = {"id": f"t{i}", "ref": f"call_{i + 1}", "name": "bash", "arguments": {"command": f"echo {i}"}}
        messages += [history.user(f"question {i}"), history.assistant(f"answer {i}", [call]),
                     history.tool_result(call, f"{i}\n[exit code: 0]"), history.assistant("ok")]
    sessions.SessionStore(cwd, ".bob/sessions").save(sid, messages[: n + 1])
    proc = Proc(bob, env, cwd)
    proc.call("initialize", INIT)
    started = time.perf_counter()
    frames = []
    result = proc.call("session/load", {"sessionId": sid, "cwd": cwd, "mcpServers": []}, frames.append)
    elapsed = time.perf_counter() - started
    proc.close()
    return elapsed, "result" in result and len(frames) > n // 2


def http_turn_gap(bob, env, cwd, reps):
    """A turn of two model calls (a tool call, then text) through the OpenAI provider against the
    fake server: ms from the turn's last update to its answer, and the whole turn."""
    from fake_model import FakeModelServer

    gaps, turns, wrong = [], [], 0
    with FakeModelServer() as server:
        config = write_config(cwd, {"model": {"provider": "openai", "baseUrl": server.url + "/v1", "retries": 0},
                                    "permissions": {"mode": "allow-all"}})
        proc = Proc(bob, {**env, "BOB_CONFIG": config}, cwd)
        proc.call("initialize", INIT)
        sid = proc.call("session/new", {"cwd": cwd, "mcpServers": []})["result"]["sessionId"]
        for _ in range(reps):
            server.enqueue(server.openai_tool_call("read_skill", {"name": "greetings"}), server.openai_text("done"))
            last = []
            started = time.perf_counter()
            msg = proc.call("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "go"}]},
                            lambda m, seen=last: seen.append(time.perf_counter()))
            ended = time.perf_counter()
            wrong += msg.get("result", {}).get("stopReason") != "end_turn"
            gaps.append((ended - last[-1]) * 1000)
            turns.append((ended - started) * 1000)
        proc.close()
    return statistics.median(gaps), statistics.median(turns), wrong


def cache_reads(bob, env, cwd, calls=20):
    """A turn of `calls` model calls against the fake Anthropic server, which reports cache reads
    as the real API does: the fraction of input tokens read from the cache."""
    from fake_model import FakeModelServer

    with FakeModelServer() as server:
        config = write_config(cwd, {"model": {"provider": "anthropic", "baseUrl": server.url, "name": "claude-bench"},
                                    "permissions": {"mode": "allow-all"}})
        server.enqueue(*[server.anthropic_tool_call("bash", {"command": f"echo {n}"}, tool_id=f"t{n}", cache_usage=True)
                         for n in range(calls - 1)], server.anthropic_text("done", cache_usage=True))
        proc = Proc(bob, {**env, "BOB_CONFIG": config, "ANTHROPIC_API_KEY": "sk-bench"}, cwd)
        proc.call("initialize", INIT)
        sid = proc.call("session/new", {"cwd": cwd, "mcpServers": []})["result"]["sessionId"]
        msg = proc.call("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "go"}]})
        proc.close()
        log = server.cache_accounting_log
        total = sum(u["input_tokens"] + u["cache_read_input_tokens"] + u["cache_creation_input_tokens"] for u in log)
        read = sum(u["cache_read_input_tokens"] for u in log)
    ok = msg.get("result", {}).get("stopReason") == "end_turn" and len(log) == calls
    return (read / total if total else 0.0), ok


# ---- the run --------------------------------------------------------------------------------

def write_script(path, sleep_command="sleep 300"):
    with open(path + ".tmp", "w") as handle:
        handle.write(
            "turns:\n"
            "  - match: stream\n    replies:\n      - repeat: {chunk: x, count: 50000}\n"
            "  - match: gigabyte\n    replies:\n"
            "      - tool_calls: [{name: bash, arguments: {command: \"head -c 1073741824 /dev/zero | tr '\\\\0' x\"}}]\n"
            "      - text: done\n"
            f"  - match: sleep now\n    replies:\n      - tool_calls: [{{name: bash, arguments: {{command: \"{sleep_command}\"}}}}]\n"
            "  - replies:\n      - text: ok\n")
    os.replace(path + ".tmp", path)


def write_config(root, values):
    path = os.path.join(root, f"config-{uuid.uuid4().hex[:6]}.yaml")
    with open(path, "w") as handle:
        json.dump(values, handle)  # JSON is YAML
    return path


def setup(root):
    script = os.path.join(root, "script.yaml")
    write_script(script)
    project = os.path.join(root, "project")
    os.makedirs(project)
    base = {k: v for k, v in os.environ.items() if k in ("PATH", "LANG", "TMPDIR")}
    base.update({"HOME": os.path.join(root, "home"), "XDG_CONFIG_HOME": os.path.join(root, "xdg")})
    configured = {**base, "BOB_CONFIG": write_config(root, {
        "model": {"provider": "script", "script": script}, "sessions": {"enabled": True},
        "limits": {"maxSessions": -1}, "log": {"level": "warning"}})}
    return base, configured, project, script


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--json", default="bench-results.json")
    parser.add_argument("--only", default="", help="comma-separated: cold,exit,burst,sessions,latency,stream,"
                                                   "memory,cancel,load,gap,registry,cache,checkpoints,sandboxes")
    parser.add_argument("--baseline", help="an earlier release's bob-acp, measured beside this one")
    parser.add_argument("--break-kill", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    reps = {"cold": 8 if args.quick else 20, "requests": 20000, "latency": 500 if args.quick else 3000,
            "cancel": 5 if args.quick else 20, "stream": 50000, "load": 10000, "flood": 200000, "gap": 10,
            "chunks": 2000 if args.quick else 6000, "checkpoint": 5 if args.quick else 15}
    bob = installed_bob()
    if args.break_kill:
        bob = [PY, "-c", BROKEN_KILL]
    root = tempfile.mkdtemp(prefix="bob-bench-")
    try:
        results = run_all(bob, *setup(root), reps, set(filter(None, args.only.split(","))), args.baseline)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    report(results, args.json)


def alternate(n, work, names=("bob", "peer")):
    """work(name) for Bob and each peer in turn, n times; {name: [results]}."""
    out: dict = {name: [] for name in names}
    for _ in range(n):
        for name in out:
            out[name].append(work(name))
    return out


def run_all(bob, base_env, env, project, script, reps, only, baseline=None):
    r: dict = {"machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}",
               "bob": " ".join(bob), "reps": reps}
    cmds = {"bob": bob, **peers()}
    if baseline:
        cmds["base"] = [baseline]
        r["baseline"] = subprocess.run([baseline, "--version"], capture_output=True, text=True).stdout.strip()
    r["agents"] = list(cmds)

    def wanted(name):
        return not only or name in only

    if wanted("cold"):  # with no config file (the state pip install . leaves), and with one
        runs = alternate(reps["cold"], lambda name: cold_start(cmds[name], base_env, project), cmds)
        for name, values in runs.items():
            r[f"{name}_cold_start_ms"] = statistics.median(v[0] for v in values)
            r[f"{name}_cold_start_wrong"] = sum(not v[1] for v in values)
        configured = {name: cmds[name] for name in ("bob", "base") if name in cmds}  # (the peers read none)
        runs = alternate(reps["cold"], lambda name: cold_start(configured[name], env, project), configured)
        for name, values in runs.items():
            r[f"{name}_cold_start_config_ms"] = statistics.median(v[0] for v in values)
            r[f"{name}_cold_start_config_wrong"] = sum(not v[1] for v in values)
    if wanted("exit"):
        runs = alternate(max(5, reps["cold"] // 2), lambda name: idle_exit(cmds[name], base_env, project), cmds)
        for name, values in runs.items():
            r[f"{name}_idle_exit_ms"] = statistics.median(v[0] for v in values)
            r[f"{name}_idle_exit_wrong"] = sum(not v[1] for v in values)
        r["bob_exit_300_sessions_ms"], r["bob_exit_300_sessions_ok"] = exit_with_sessions(bob, base_env, project, script)
        runs = alternate(reps["cold"] * 2, lambda name: early_exit(cmds[name], base_env, project), cmds)
        for name, values in runs.items():
            r[f"{name}_early_exit_ms"] = statistics.median(v[0] for v in values)
            r[f"{name}_early_exit_p90_ms"] = pct([v[0] for v in values], 90)
            r[f"{name}_early_exit_wrong"] = sum(not v[1] for v in values)
    if wanted("burst"):
        for name in cmds:
            rate, good, bad = burst(cmds[name], env, project, reps["requests"], "_bench/unknown", {},
                                    lambda m: m.get("error", {}).get("code") == -32601)
            r[f"{name}_unknown_rps"], r[f"{name}_unknown_correct"], r[f"{name}_unknown_wrong"] = rate, good, bad
    if wanted("sessions"):  # what session/new costs Bob (it reads skills and AGENTS.md each time): no peer does it
        new_env = {**base_env, "BOB_CONFIG": write_config(project, {"limits": {"maxSessions": -1}})}
        rate, good, bad = burst(bob, new_env, project, reps["requests"] // 4, "session/new",
                                {"cwd": project, "mcpServers": []}, lambda m: "sessionId" in m.get("result", {}))
        r["bob_new_rps"], r["bob_new_correct"], r["bob_new_wrong"] = rate, good, bad
        p50, p99, bad = round_trips({"bob": bob}, new_env, project, reps["latency"] // 2, "session/new",
                                    lambda: {"cwd": project, "mcpServers": []})["bob"]
        r["bob_new_p50_us"], r["bob_new_p99_us"], r["bob_new_rt_wrong"] = p50, p99, bad
    if wanted("latency"):
        measured = round_trips(cmds, env, project, reps["latency"], "authenticate", lambda: {"methodId": "none"})
        for name, (p50, p99, bad) in measured.items():
            r[f"{name}_latency_p50_us"], r[f"{name}_latency_p99_us"], r[f"{name}_latency_wrong"] = p50, p99, bad
    if wanted("stream"):
        for name in cmds:
            text = f"stream {reps['stream']}" if name in ("peer", "ts") else "stream please"
            r[f"{name}_stream_cps"], r[f"{name}_stream_complete"] = streaming(cmds[name], env, project,
                                                                              reps["stream"], text)
        for name in [n for n in cmds if n not in ("peer", "ts")]:  # (a model's stream: Bob's own work)
            (r[f"{name}_chunk_p50_us"], r[f"{name}_chunk_p99_us"], r[f"{name}_chunk_max_us"],
             r[f"{name}_chunk_wrong"]) = chunk_latency(cmds[name], base_env, project, reps["chunks"])
        (r["bob_stream_cancel_p50_ms"], r["bob_stream_cancel_max_ms"],
         r["bob_stream_cancel_wrong"]) = stream_cancel(bob, base_env, project, reps["cancel"])
    if wanted("memory"):
        for name in cmds:
            r[f"{name}_idle_rss_mb"] = idle_rss(cmds[name], env, project) / 1e6
        r["bob_1gib_output_added_mb"], r["bob_3_5mib_prompt_added_mb"], r["bob_memory_ok"] = memory_peaks(
            bob, env, project)
        r["bob_flood_added_mb"], r["bob_flood_correct"] = flood_rss(bob, env, project, reps["flood"])
    if wanted("cancel"):
        (r["bob_cancel_p50_ms"], r["bob_cancel_p99_ms"], r["bob_cancel_survivors"],
         r["bob_cancel_wrong"]) = cancel_latency(bob, env, project, script, reps["cancel"])
    if wanted("load"):
        r["bob_load_10k_s"], r["bob_load_ok"] = load_time(bob, env, project, reps["load"])
    if wanted("gap"):
        r["bob_last_update_to_answer_ms"], r["bob_two_call_turn_ms"], r["bob_gap_wrong"] = http_turn_gap(
            bob, base_env, project, reps["gap"])
    if wanted("registry"):  # the manifest's arguments, a fresh HOME and no config: a registry user's first contact
        with open(os.path.join(os.path.dirname(HERE), "agent.json"), encoding="utf-8") as handle:
            manifest_args = json.load(handle)["distribution"]["uvx"]["args"]
        fresh = {**base_env, "HOME": os.path.join(project, "fresh-home")}
        os.makedirs(fresh["HOME"], exist_ok=True)
        values = [first_contact(bob + manifest_args, fresh, project) for _ in range(reps["cold"])]
        r["bob_registry_initialize_ms"] = statistics.median(v[0] for v in values)
        r["bob_registry_session_new_ms"] = statistics.median(v[1] for v in values)
        r["bob_registry_wrong"] = sum(not v[2] for v in values)
    if wanted("sandboxes") and sys.platform.startswith("linux"):
        (r["bob_sandboxes_added_mb"], r["bob_sandboxes_added_processes"], r["bob_sandboxes_added_fds"],
         r["bob_sandboxes_ok"]) = idle_sandboxes(bob, base_env, project)
    if wanted("checkpoints"):
        (r["bob_checkpoint_first_ms"], r["bob_checkpoint_turn_ms"],
         r["bob_checkpoint_ok"]) = checkpoint_cost(bob, base_env, project, reps["checkpoint"])
        (_, r["bob_checkpoint_turn_50k_ms"],
         r["bob_checkpoint_50k_ok"]) = checkpoint_cost(bob, base_env, project, reps["checkpoint"], files=50000)
    if wanted("cache"):
        r["bob_cache_read_fraction"], r["bob_cache_ok"] = cache_reads(bob, base_env, project)
    return r


TARGETS = [
    ("start-up: spawn → initialize answered within 10 % of the baseline release's, with and without a config file",
     lambda r: r["bob_cold_start_wrong"] == r["bob_cold_start_config_wrong"] == 0
     and r["bob_cold_start_ms"] <= 1.1 * r["base_cold_start_ms"]
     and r["bob_cold_start_config_ms"] <= 1.1 * r["base_cold_start_config_ms"]),
    ("start-up: spawn → initialize answered ≤ 0.5× the TypeScript SDK agent's",
     lambda r: r["bob_cold_start_wrong"] == 0 and r["bob_cold_start_ms"] <= 0.5 * r["ts_cold_start_ms"]),
    ("exit: stdin EOF right after initialize → exited ≤ 15 ms (p90)",
     lambda r: r["bob_early_exit_wrong"] == 0 and r["bob_early_exit_p90_ms"] <= 15),
    ("exit: stdin EOF when idle → exited ≤ 15 ms", lambda r: r["bob_idle_exit_wrong"] == 0 and
     r["bob_idle_exit_ms"] <= 15),
    ("exit: stdin EOF with 300 sessions open (full profile) → exited < 1 s",
     lambda r: r["bob_exit_300_sessions_ok"] and r["bob_exit_300_sessions_ms"] < 1000),
    ("a cheap request's round trip: p50 < 150 µs, p99 < 1 ms", lambda r: r["bob_latency_wrong"] == 0 and
     r["bob_latency_p50_us"] < 150 and r["bob_latency_p99_us"] < 1000),
    ("20,000 pipelined requests: every one answered -32601",
     lambda r: r["bob_unknown_correct"] == r["reps"]["requests"] and r["bob_unknown_wrong"] == 0),
    ("pipelined throughput no worse than the baseline's by more than noise (15 %)",
     lambda r: r["bob_unknown_rps"] >= 0.85 * r["base_unknown_rps"]),
    ("pipelined session/new: every one answered with a session",
     lambda r: r["bob_new_correct"] == r["reps"]["requests"] // 4 and r["bob_new_wrong"] == 0),
    ("a model's chunk reaches the client ≤ 1 ms after it was sent (p99), never > 16 ms (one display frame)",
     lambda r: r["bob_chunk_wrong"] == 0 and r["bob_chunk_p99_us"] <= 1000 and r["bob_chunk_max_us"] <= 16000),
    ("a cancel while a model streams → answered cancelled ≤ 10 ms", lambda r: r["bob_stream_cancel_wrong"] == 0 and
     r["bob_stream_cancel_max_ms"] <= 10),
    ("a cancel during a command → answered cancelled (p99 < 100 ms), no process survives",
     lambda r: r["bob_cancel_wrong"] == 0 and r["bob_cancel_p99_ms"] < 100 and r["bob_cancel_survivors"] == 0),
    ("idle RSS ≤ 35 MB", lambda r: r["bob_idle_rss_mb"] <= 35),
    ("1 GiB of tool output adds < 20 MB", lambda r: r["bob_memory_ok"] and r["bob_1gib_output_added_mb"] < 20),
    ("a 3.5 MiB prompt adds < 40 MB", lambda r: r["bob_memory_ok"] and r["bob_3_5mib_prompt_added_mb"] < 40),
    ("a 200,000-frame flood: all answered, < 40 MB added", lambda r: r["bob_flood_correct"] == r["reps"]["flood"]
     and r["bob_flood_added_mb"] < 40),
    ("10,000-message session/load < 1 s", lambda r: r["bob_load_ok"] and r["bob_load_10k_s"] < 1),
    ("last update → answer of an HTTP turn ≤ 5 ms", lambda r: r["bob_gap_wrong"] == 0 and
     r["bob_last_update_to_answer_ms"] <= 5),
    ("registry first contact: initialize answered well within Zed's 30 s (≤ 1 s), correctly",
     lambda r: r["bob_registry_wrong"] == 0 and r["bob_registry_initialize_ms"] <= 1000),
    ("200 open sessions that each ran a sandboxed command add ≤ 200 MB, no process and no descriptor",
     lambda r: r["bob_sandboxes_ok"] and r["bob_sandboxes_added_mb"] <= 200 and r["bob_sandboxes_added_processes"] <= 0
     and r["bob_sandboxes_added_fds"] <= 0),
    ("a checkpoint adds ≤ 100 ms to a turn in a project of 10,000 files (after the project's first), and /undo "
     "takes the turn back", lambda r: r["bob_checkpoint_ok"] and r["bob_checkpoint_turn_ms"] <= 100),
    ("a checkpoint adds ≤ 500 ms to a turn in a project of 50,000 files, and /undo takes the turn back",
     lambda r: r["bob_checkpoint_50k_ok"] and r["bob_checkpoint_turn_50k_ms"] <= 500),
    ("≥ 90 % of a 20-call turn's input tokens read from the prompt cache",
     lambda r: r["bob_cache_ok"] and r["bob_cache_read_fraction"] >= 0.9),
]

# (label, the figure's key without its agent: bob_<key>, peer_<key>, ts_<key>, base_<key>)
ROWS = [
    ("spawn → initialize answered, no config (ms)", "cold_start_ms"),
    ("spawn → initialize answered, with a config file (ms)", "cold_start_config_ms"),
    ("stdin EOF right after initialize → exited, p50 (ms)", "early_exit_ms"),
    ("stdin EOF right after initialize → exited, p90 (ms)", "early_exit_p90_ms"),
    ("stdin EOF when idle → exited (ms)", "idle_exit_ms"),
    ("20,000 pipelined unknown method: answers/s", "unknown_rps"),
    ("cheap request round trip p50 (µs)", "latency_p50_us"),
    ("cheap request round trip p99 (µs)", "latency_p99_us"),
    ("streamed chunks per second", "stream_cps"),
    ("a model's chunk → the client, p50 (µs)", "chunk_p50_us"),
    ("a model's chunk → the client, p99 (µs)", "chunk_p99_us"),
    ("a model's chunk → the client, max (µs)", "chunk_max_us"),
    ("idle RSS (MB)", "idle_rss_mb"),
]
COLUMNS = (("peer", "Python SDK", "bob/py"), ("ts", "TS SDK", "bob/ts"), ("base", "baseline", "bob/base"))
BOB_ONLY = [
    ("session/new: pipelined, answers/s", "bob_new_rps"),
    ("session/new: round trip p50 (µs)", "bob_new_p50_us"),
    ("session/new: round trip p99 (µs)", "bob_new_p99_us"),
    ("registry first contact: spawn → initialize answered (ms)", "bob_registry_initialize_ms"),
    ("registry first contact: spawn → first session/new answered (ms)", "bob_registry_session_new_ms"),
    ("cancel while a model streams → answer p50 (ms)", "bob_stream_cancel_p50_ms"),
    ("cancel while a model streams → answer, slowest (ms)", "bob_stream_cancel_max_ms"),
    ("cancel during a command → answer p50 (ms)", "bob_cancel_p50_ms"),
    ("cancel during a command → answer p99 (ms)", "bob_cancel_p99_ms"),
    ("processes of a cancelled command left alive", "bob_cancel_survivors"),
    ("1 GiB of tool output: RSS added (MB)", "bob_1gib_output_added_mb"),
    ("3.5 MiB prompt: RSS added (MB)", "bob_3_5mib_prompt_added_mb"),
    ("200,000-frame flood: RSS added (MB)", "bob_flood_added_mb"),
    ("session/load of 10,000 messages (s)", "bob_load_10k_s"),
    ("HTTP turn, 2 model calls: last update → answer (ms)", "bob_last_update_to_answer_ms"),
    ("HTTP turn, 2 model calls: whole turn (ms)", "bob_two_call_turn_ms"),
    ("20-call Anthropic turn: input tokens read from cache", "bob_cache_read_fraction"),
    ("200 open sessions that ran a sandboxed command: memory added (MB)", "bob_sandboxes_added_mb"),
    ("200 open sessions that ran a sandboxed command: processes added", "bob_sandboxes_added_processes"),
    ("200 open sessions that ran a sandboxed command: descriptors added", "bob_sandboxes_added_fds"),
    ("checkpoints, 10,000 files: added to a project's first turn (ms)", "bob_checkpoint_first_ms"),
    ("checkpoints, 10,000 files: added to each turn after it (ms)", "bob_checkpoint_turn_ms"),
    ("checkpoints, 50,000 files: added to each turn after the first snapshot (ms)", "bob_checkpoint_turn_50k_ms"),
]
WRONG = [f"{agent}_{what}_wrong" for agent in ("bob", "peer", "ts", "base")
         for what in ("cold_start", "cold_start_config", "idle_exit", "early_exit", "unknown", "latency", "chunk")]
WRONG += ["bob_new_wrong", "bob_new_rt_wrong", "bob_cancel_wrong", "bob_stream_cancel_wrong", "bob_gap_wrong",
          "bob_registry_wrong"]


def report(r, path):
    print(f"\nmachine: {r['machine']}\nbob: {r['bob']}" + (f"\nbaseline: {r['baseline']}" if "baseline" in r else ""))
    columns = [c for c in COLUMNS if c[0] in r.get("agents", ())]
    print(f"{'measure':54} {'bob':>10} " + " ".join(f"{title:>10} {ratio:>8}" for _, title, ratio in columns))
    for label, key in ROWS:
        if f"bob_{key}" in r:
            mine = r[f"bob_{key}"]
            cells = [f"{mine:10.1f}"]
            for agent, _, _ in columns:
                value = r.get(f"{agent}_{key}")
                cells += [f"{value:10.1f}" if value is not None else f"{'-':>10}",
                          f"{mine / value:7.2f}×" if value else f"{'-':>8}"]
            print(f"{label:54} " + " ".join(cells))
    for label, key in BOB_ONLY:
        if key in r:
            print(f"{label:54} {r[key]:12.2f}")
    failures = {k: r[k] for k in WRONG if r.get(k)}
    print("wrong or missing answers: " + (", ".join(f"{k} {v}" for k, v in failures.items()) or "none"))
    if "bob_unknown_correct" in r:
        print("correct answers to 20,000 pipelined: " + ", ".join(
            f"{agent} {r[f'{agent}_unknown_correct']}" for agent in r.get("agents", ("bob", "peer"))))
    print("\ntargets:")
    r["targets"] = {}
    for label, check in TARGETS:
        try:
            met = check(r)
        except KeyError:  # not measured in this run (--only, no --baseline, no TypeScript peer)
            print(f"  -       {label} (not measured in this run)")
            continue
        r["targets"][label] = met
        print(f"  {'MET   ' if met else 'MISSED'}  {label}")
    with open(path, "w") as handle:
        json.dump(r, handle, indent=2, ensure_ascii=False)
    print(f"\nwritten: {path}")


if __name__ == "__main__":
    main()
