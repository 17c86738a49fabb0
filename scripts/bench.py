#!/usr/bin/env python3
"""Bob's benchmark, against a peer in the same run: the official Python SDK's echo agent
(scripts/peer_echo_agent.py). Runs alternate between the two; figures are reported as ratios.

    python scripts/bench.py            # full run
    python scripts/bench.py --quick    # fewer repetitions (a few minutes)
    python scripts/bench.py --json out.json

Targets are printed MET or MISSED; nothing here is a test assertion (machines are noisy).
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
PY = sys.executable
BOB = [PY, "-m", "bob_acp"]
PEER = [PY, os.path.join(HERE, "peer_echo_agent.py")]


try:  # the client must cost as little as possible, for both agents
    from orjson import dumps, loads
except ImportError:  # the benchmark also runs where only the standard library is
    loads = json.loads

    def dumps(obj):
        return json.dumps(obj).encode()


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

    def next(self, timeout=60):
        line = self.out.readline()
        if not line:
            raise RuntimeError("agent exited")
        return loads(line)

    def call(self, method, params, on_frame=None, timeout=120):
        self._ids += 1
        msg_id = self._ids
        self.send(frame(msg_id, method, params))
        while True:
            msg = self.next(timeout)
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
            self.p.wait(5)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait()


def pct(values, q):
    values = sorted(values)
    return values[min(len(values) - 1, int(round(q / 100 * (len(values) - 1))))]


# ---- measurements ---------------------------------------------------------------------------

def cold_start(cmd, env, cwd):
    started = time.perf_counter()
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            env=env, cwd=cwd, bufsize=0)
    proc.stdin.write(frame(1, "initialize", INIT))
    proc.stdout.readline()
    ready = time.perf_counter()
    proc.stdin.close()
    proc.wait(10)
    return (ready - started) * 1000, (time.perf_counter() - ready) * 1000


def throughput(cmd, env, cwd, n):
    proc = Proc(cmd, env, cwd)
    proc.call("initialize", INIT)
    payload = b"".join(frame(i, "authenticate", {"methodId": "none"}) for i in range(n))
    started = time.perf_counter()
    writer = threading.Thread(target=proc.send, args=(payload,))
    writer.start()
    seen = set()
    duplicates = 0
    while len(seen) < n:
        msg = proc.next()
        if msg["id"] in seen:
            duplicates += 1
        seen.add(msg["id"])
    elapsed = time.perf_counter() - started
    writer.join()
    proc.close()
    return n / elapsed, duplicates == 0 and seen == set(range(n))


def latency(cmd, env, cwd, n):
    proc = Proc(cmd, env, cwd)
    proc.call("initialize", INIT)
    samples = []
    for _ in range(n):
        started = time.perf_counter()
        proc.call("authenticate", {"methodId": "none"})
        samples.append((time.perf_counter() - started) * 1e6)
    proc.close()
    return statistics.median(samples), pct(samples, 99)


def streaming(cmd, env, cwd, n, prompt_text):
    proc = Proc(cmd, env, cwd)
    proc.call("initialize", INIT)
    sid = proc.call("session/new", {"cwd": cwd, "mcpServers": []})["result"]["sessionId"]
    time.sleep(0.3)
    stamps = []

    def on_frame(msg):
        update = msg.get("params", {}).get("update", {})
        if update.get("sessionUpdate") == "agent_message_chunk":
            stamps.append(time.perf_counter())

    started = time.perf_counter()
    proc.call("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": prompt_text}]}, on_frame)
    ended = time.perf_counter()
    proc.close()
    return len(stamps) / (ended - stamps[0]), (stamps[0] - started) * 1000, len(stamps) == n


def idle_rss(cmd, env, cwd):
    proc = Proc(cmd, env, cwd)
    proc.call("initialize", INIT)
    proc.call("session/new", {"cwd": cwd, "mcpServers": []})
    time.sleep(1.0)  # Bob's log thread loads structlog after start-up: count it
    rss = proc.rss()
    proc.close()
    return rss


def allow_all(proc):
    def on_frame(msg):
        if msg.get("method") == "session/request_permission":
            proc.send((json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": {
                "outcome": {"outcome": "selected", "optionId": "allow_always"}}}) + "\n").encode())
    return on_frame


def cancel_latency(env, cwd, reps):
    samples, survivors = [], 0
    proc = Proc(BOB, env, cwd)
    proc.call("initialize", INIT)
    sid = proc.call("session/new", {"cwd": cwd, "mcpServers": []})["result"]["sessionId"]
    respond = allow_all(proc)
    for _ in range(reps):
        marker = str(int(uuid.uuid4().hex[:8], 16))[:8]
        proc._ids += 1
        msg_id = proc._ids
        proc.send(frame(msg_id, "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": f"sleep {marker}"}]}))
        while True:
            msg = proc.next()
            respond(msg)
            if msg.get("params", {}).get("update", {}).get("status") == "in_progress":
                break
        time.sleep(0.05)
        started = time.perf_counter()
        proc.send((json.dumps({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": sid}}) + "\n").encode())
        while True:
            msg = proc.next()
            if msg.get("id") == msg_id:
                break
        samples.append((time.perf_counter() - started) * 1000)
        time.sleep(0.1)
        survivors += len(_procs_with(f"300.{marker}"))
    proc.close()
    return statistics.median(samples), pct(samples, 99), survivors


def _procs_with(marker):
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/cmdline", "rb") as handle:
                    if marker.encode() in handle.read():
                        found.append(name)
            except OSError:
                pass
    return found


def memory_peaks(env, cwd):
    proc = Proc(BOB, env, cwd)
    proc.call("initialize", INIT)
    sid = proc.call("session/new", {"cwd": cwd, "mcpServers": []})["result"]["sessionId"]
    time.sleep(1.0)
    base = proc.rss("VmHWM")
    proc.call("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "gigabyte"}]}, allow_all(proc))
    gib = proc.rss("VmHWM") - base
    base = proc.rss("VmHWM")
    big = "word " * (700 * 1024)  # 3.5 MiB
    proc.call("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": big}]})
    prompt = proc.rss("VmHWM") - base
    proc.close()
    return gib, prompt


def load_time(env, cwd, n):
    sys.path.insert(0, os.path.dirname(HERE))
    from bob_acp import history, sessions

    sid = sessions.new_id()
    messages = [history.system("s")]
    for i in range(n // 4):
        call = {"id": f"t{i}", "ref": f"call_{i + 1}", "name": "bash", "arguments": {"command": f"echo {i}"}}
        messages += [history.user(f"question {i}"), history.assistant(f"answer {i}", [call]),
                     history.tool_result(call, f"{i}\n[exit code: 0]"), history.assistant("ok")]
    sessions.SessionStore(cwd, ".bob/sessions").save(sid, messages[: n + 1])
    proc = Proc(BOB, env, cwd)
    proc.call("initialize", INIT)
    started = time.perf_counter()
    frames = []
    result = proc.call("session/load", {"sessionId": sid, "cwd": cwd, "mcpServers": []}, frames.append)
    elapsed = time.perf_counter() - started
    proc.close()
    return elapsed, "result" in result and len(frames) > n // 2


# ---- the run --------------------------------------------------------------------------------

def write_setup(root):
    script = os.path.join(root, "script.yaml")
    with open(script, "w") as handle:
        handle.write(
            "turns:\n"
            "  - match: stream\n    replies:\n      - repeat: {chunk: x, count: 50000}\n"
            "  - match: gigabyte\n    replies:\n"
            "      - tool_calls: [{name: bash, arguments: {command: \"head -c 1073741824 /dev/zero | tr '\\\\0' x\"}}]\n"
            "      - text: done\n"
            "  - match: /^sleep (\\d+)$/\n    replies:\n"
            "      - tool_calls: [{name: bash, arguments: {command: \"sleep 300.$(echo BENCH)\"}}]\n"
            "  - replies:\n      - text: ok\n")
    config = os.path.join(root, "config.yaml")
    with open(config, "w") as handle:
        handle.write(f"model: {{provider: script, script: {json.dumps(script)}}}\nsessions: {{enabled: true}}\n"
                     "log: {level: warning}\n")
    project = os.path.join(root, "project")
    os.makedirs(project)
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "LANG", "HOME", "TMPDIR")}
    env.update({"BOB_CONFIG": config, "XDG_CONFIG_HOME": os.path.join(root, "xdg"), "PYTHONPATH": os.path.dirname(HERE)})
    return env, project, script


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--json", default="bench-results.json")
    parser.add_argument("--only", default="", help="comma-separated: cold,throughput,latency,stream,memory,cancel,load")
    args = parser.parse_args()
    reps = {"cold": 8 if args.quick else 20, "requests": 20000, "latency": 500 if args.quick else 3000,
            "cancel": 5 if args.quick else 20, "stream": 50000, "load": 10000}
    root = tempfile.mkdtemp(prefix="bob-bench-")
    try:
        env, project, script = write_setup(root)
        # The cancel script needs a per-run marker in the command: rewrite the sleep reply per run.
        results = run_all(env, project, script, reps, set(filter(None, args.only.split(","))))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    report(results, args.json)


def run_all(env, project, script, reps, only):
    r: dict = {"machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}",
               "reps": reps}

    def wanted(name):
        return not only or name in only

    if wanted("cold"):
        measure_cold(r, env, project, reps)
    if wanted("throughput"):
        for name, cmd in (("bob", BOB), ("peer", PEER)):
            r[f"{name}_throughput_rps"], r[f"{name}_throughput_exact"] = throughput(cmd, env, project, reps["requests"])
    if wanted("latency"):
        for name, cmd in (("bob", BOB), ("peer", PEER)):
            r[f"{name}_latency_p50_us"], r[f"{name}_latency_p99_us"] = latency(cmd, env, project, reps["latency"])
    if wanted("stream"):
        for name, cmd, text in (("bob", BOB, "stream please"), ("peer", PEER, f"stream {reps['stream']}")):
            r[f"{name}_stream_cps"], r[f"{name}_first_chunk_ms"], r[f"{name}_stream_complete"] = streaming(
                cmd, env, project, reps["stream"], text)
    if wanted("memory"):
        for name, cmd in (("bob", BOB), ("peer", PEER)):
            r[f"{name}_idle_rss_mb"] = idle_rss(cmd, env, project) / 1e6
        gib, prompt = memory_peaks(env, project)
        r["bob_1gib_output_added_mb"], r["bob_3_5mib_prompt_added_mb"] = gib / 1e6, prompt / 1e6
    if wanted("cancel"):
        with open(script) as handle:
            text = handle.read()
        with open(script, "w") as handle:  # one marker per cancel, findable in /proc
            handle.write(text.replace("sleep 300.$(echo BENCH)", "sleep 300.$$"))
        r["bob_cancel_p50_ms"], r["bob_cancel_p99_ms"], r["bob_cancel_survivors"] = cancel_latency(env, project, reps["cancel"])
    if wanted("load"):
        r["bob_load_10k_s"], r["bob_load_ok"] = load_time(env, project, reps["load"])
    return r


def measure_cold(r, env, project, reps):
    cold = {"bob": [], "peer": []}
    for _ in range(reps["cold"]):  # alternating
        for name, cmd in (("bob", BOB), ("peer", PEER)):
            cold[name].append(cold_start(cmd, env, project))
    for name in cold:
        r[f"{name}_cold_start_ms"] = statistics.median(c[0] for c in cold[name])
        r[f"{name}_shutdown_ms"] = statistics.median(c[1] for c in cold[name])


TARGETS = [
    ("cold start ≤ ¼ of the peer's and ≤ 150 ms", lambda r: r["bob_cold_start_ms"] <= min(150, r["peer_cold_start_ms"] / 4)),
    ("throughput ≥ 2× the peer and ≥ 40,000/s", lambda r: r["bob_throughput_rps"] >= max(40000, 2 * r["peer_throughput_rps"])),
    ("sequential round trip p50 < 150 µs", lambda r: r["bob_latency_p50_us"] < 150),
    ("≥ 50,000 streamed chunks/s", lambda r: r["bob_stream_cps"] >= 50000),
    ("cancel p99 < 100 ms, no survivor", lambda r: r["bob_cancel_p99_ms"] < 100 and r["bob_cancel_survivors"] == 0),
    ("idle RSS ≤ 35 MB", lambda r: r["bob_idle_rss_mb"] <= 35),
    ("1 GiB of tool output adds < 20 MB", lambda r: r["bob_1gib_output_added_mb"] < 20),
    ("a 3.5 MiB prompt adds < 40 MB", lambda r: r["bob_3_5mib_prompt_added_mb"] < 40),
    ("10,000-message session/load < 1 s", lambda r: r["bob_load_10k_s"] < 1 and r["bob_load_ok"]),
]


def report(r, path):
    def ratio(a, b):
        return f"{r[a] / r[b]:.2f}×" if r.get(b) else "-"

    rows = [
        ("cold start → initialize (ms, median)", "bob_cold_start_ms", "peer_cold_start_ms"),
        ("shutdown after stdin closes (ms)", "bob_shutdown_ms", "peer_shutdown_ms"),
        ("pipelined requests per second", "bob_throughput_rps", "peer_throughput_rps"),
        ("round trip p50 (µs)", "bob_latency_p50_us", "peer_latency_p50_us"),
        ("round trip p99 (µs)", "bob_latency_p99_us", "peer_latency_p99_us"),
        ("streamed chunks per second", "bob_stream_cps", "peer_stream_cps"),
        ("prompt → first chunk (ms)", "bob_first_chunk_ms", "peer_first_chunk_ms"),
        ("idle RSS (MB)", "bob_idle_rss_mb", "peer_idle_rss_mb"),
    ]
    print(f"\nmachine: {r['machine']}")
    print(f"{'measure':44} {'bob':>12} {'peer (SDK)':>12} {'bob/peer':>9}")
    for label, a, b in rows:
        if a in r:
            print(f"{label:44} {r[a]:12.1f} {r[b]:12.1f} {ratio(a, b):>9}")
    for label, key in (("cancel p50 (ms)", "bob_cancel_p50_ms"), ("cancel p99 (ms)", "bob_cancel_p99_ms"),
                       ("tool processes surviving a cancel", "bob_cancel_survivors"),
                       ("1 GiB of tool output: RSS added (MB)", "bob_1gib_output_added_mb"),
                       ("3.5 MiB prompt: RSS added (MB)", "bob_3_5mib_prompt_added_mb"),
                       ("session/load of 10,000 messages (s)", "bob_load_10k_s")):
        if key in r:
            print(f"{label:44} {r[key]:12.2f}")
    if "bob_throughput_exact" in r:
        print(f"every pipelined id answered exactly once: bob {r['bob_throughput_exact']}, peer {r['peer_throughput_exact']}")
    print("\ntargets:")
    r["targets"] = {}
    for label, check in TARGETS:
        try:
            met = check(r)
        except KeyError:  # not measured in this run (--only)
            continue
        r["targets"][label] = met
        print(f"  {'MET   ' if met else 'MISSED'}  {label}")
    with open(path, "w") as handle:
        json.dump(r, handle, indent=2, ensure_ascii=False)
    print(f"\nwritten: {path}")


if __name__ == "__main__":
    main()
