#!/usr/bin/env python3
"""Soak: many sessions and turns against the fake OpenAI-compatible model, with random cancels.

    python scripts/soak.py                 # 300 turns or 3 minutes, whichever first
    python scripts/soak.py --turns 2000 --seconds 900

Bounded in count and time; traffic only to 127.0.0.1. Reports errors, and Bob's RSS and thread
count over time: after warm-up both must stay flat (no leak). Exit status 1 on errors or growth.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests"))

from fake_model import FakeModelServer  # noqa: E402


def proc_stat(pid):
    rss = threads = 0
    with open(f"/proc/{pid}/status") as handle:
        for line in handle:
            if line.startswith("VmRSS:"):
                rss = int(line.split()[1]) * 1024
            elif line.startswith("Threads:"):
                threads = int(line.split()[1])
    return rss, threads


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--turns", type=int, default=300)
    parser.add_argument("--seconds", type=float, default=180)
    parser.add_argument("--sessions", type=int, default=20)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    root = tempfile.mkdtemp(prefix="bob-soak-")
    project = os.path.join(root, "project")
    os.makedirs(project)
    samples, errors = [], []
    with FakeModelServer() as server:
        config = os.path.join(root, "config.yaml")
        with open(config, "w") as handle:
            handle.write(f"model: {{baseUrl: {server.url}/v1, retries: 1, timeout: 10}}\nsessions: {{enabled: true}}\n"
                         "log: {level: warning}\n")
        env = dict(os.environ, BOB_CONFIG=config, OPENAI_API_KEY="sk-soak", XDG_CONFIG_HOME=os.path.join(root, "xdg"))
        bob = subprocess.Popen([sys.executable, "-m", "bob_acp"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               stderr=subprocess.DEVNULL, env=env, cwd=project, bufsize=0)
        ids = iter(range(1, 10**9))

        def send(obj):
            bob.stdin.write((json.dumps(obj) + "\n").encode())

        def call(method, params, cancel_after=None):
            msg_id = next(ids)
            send({"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params})
            chunks = 0
            while True:
                frame = json.loads(bob.stdout.readline())
                if frame.get("method") == "session/request_permission":
                    send({"jsonrpc": "2.0", "id": frame["id"], "result": {"outcome": {"outcome": "selected", "optionId": "allow"}}})
                elif frame.get("method") == "session/update":
                    chunks += 1
                    if cancel_after is not None and chunks == cancel_after:
                        send({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": params["sessionId"]}})
                elif frame.get("id") == msg_id:
                    return frame

        call("initialize", {"protocolVersion": 1})
        sids = [call("session/new", {"cwd": project, "mcpServers": []})["result"]["sessionId"] for _ in range(args.sessions)]
        started = time.monotonic()
        turn = 0
        while turn < args.turns and time.monotonic() - started < args.seconds:
            turn += 1
            kind = rng.random()
            if kind < 0.3:
                server.enqueue(server.openai_tool_call("bash", {"command": f"echo turn {turn}"}, call_id=f"c{turn}"),
                               server.openai_text(f"done {turn}", chunks=3, usage=1000))
            elif kind < 0.5:
                server.enqueue(server.openai_text("slow " * 20, chunks=20, delay=0.01))
            elif kind < 0.6:
                server.enqueue(server.status(500, {"error": {"message": "soak fault"}}),
                               server.status(500, {"error": {"message": "soak fault"}}))
            else:
                server.enqueue(server.openai_text(f"answer {turn}", chunks=4, usage=500))
            cancel_after = rng.choice([None, None, None, 2]) if kind >= 0.3 and kind < 0.5 else None
            sid = rng.choice(sids)
            response = call("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": f"q{turn}"}]}, cancel_after)
            while not server.responses.empty():  # a cancelled turn leaves its replies unused
                server.responses.get_nowait()
            if "error" in response and not (0.5 <= kind < 0.6):
                errors.append(response["error"])
            if turn % 10 == 0:
                rss, threads = proc_stat(bob.pid)
                samples.append((round(time.monotonic() - started, 1), turn, rss, threads))
        bob.stdin.close()
        code = bob.wait(10)
    shutil.rmtree(root, ignore_errors=True)

    print(f"{'seconds':>8} {'turns':>6} {'RSS MB':>8} {'threads':>8}")
    for seconds, turns, rss, threads in samples:
        print(f"{seconds:8.1f} {turns:6d} {rss / 1e6:8.1f} {threads:8d}")
    warm = samples[len(samples) // 3:] or samples
    rss_growth = (warm[-1][2] - warm[0][2]) / 1e6 if warm else 0
    thread_growth = warm[-1][3] - warm[0][3] if warm else 0
    print(f"\nturns {turn}, unexpected errors {len(errors)}, exit code {code}")
    print(f"after warm-up: RSS {rss_growth:+.1f} MB, threads {thread_growth:+d}")
    for error in errors[:5]:
        print("  error:", error)
    leak = rss_growth > 10 or thread_growth > 2
    print("RESULT:", "FAIL" if errors or leak or code != 0 else "OK")
    return 1 if errors or leak or code != 0 else 0


if __name__ == "__main__":
    sys.exit(main())
