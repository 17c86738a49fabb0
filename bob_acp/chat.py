"""`bob-acp chat`: a terminal client that spawns bob-acp over ACP (threads, no asyncio).

    bob-acp chat                  interactive loop
    bob-acp chat "PROMPT"         one turn, then exit (status 0 on success)
    bob-acp chat --demo           a scripted turn with no model configured

Permission is asked on the terminal: y (once), a (always, for that tool), n (reject).
Ctrl-C cancels the running turn; a second Ctrl-C quits.
"""

from __future__ import annotations

import argparse
import difflib
import itertools
import os
import queue
import shutil
import subprocess
import sys
import tempfile
import threading
from typing import TextIO

import orjson

EXIT_OK, EXIT_FAILED = 0, 1
OUTPUT_PREVIEW_LINES = 8


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="bob-acp chat", description="Talk to Bob in the terminal over ACP.")
    parser.add_argument("prompt", nargs="?", help="run this one prompt and exit")
    parser.add_argument("--yes", action="store_true", help="allow every tool call without asking")
    parser.add_argument("--json", action="store_true", help="print the agent's raw frames as NDJSON")
    parser.add_argument("--load", metavar="ID", help="resume a saved session (needs sessions.enabled)")
    parser.add_argument("--demo", action="store_true", help="play the shipped demo script in a temporary folder")
    parser.add_argument("--cwd", default=None, help="the session's working directory (default: here)")
    parser.add_argument("--config", metavar="PATH", help="configuration file for the agent")
    return parser.parse_args(argv)


class Agent:
    """The spawned bob-acp: one reader thread turning its frames into events on a queue."""

    def __init__(self, command: list[str], env: dict[str, str], raw: TextIO | None):
        # The agent's log would drown the conversation: it goes to a file, kept when something failed.
        self.log = tempfile.NamedTemporaryFile(prefix="bob-chat-", suffix=".log", delete=False)
        # Its own session: the terminal's Ctrl-C is ours to turn into session/cancel, not a SIGINT
        # for the agent. If this client dies, the agent sees EOF on stdin and exits.
        self.proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log, env=env,
                                     start_new_session=True)
        self.events: queue.Queue = queue.Queue()
        self.raw = raw
        self._ids = itertools.count(1)
        self._write_lock = threading.Lock()
        threading.Thread(target=self._read, name="chat-reader", daemon=True).start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            if self.raw is not None:
                self.raw.write(line.decode("utf-8", errors="replace"))
                self.raw.flush()
            try:
                self.events.put(orjson.loads(line))
            except orjson.JSONDecodeError:
                self.events.put({"_bad_line": line[:200]})
        self.events.put(None)

    def send(self, frame: dict) -> None:
        with self._write_lock:
            try:
                self.proc.stdin.write(orjson.dumps(frame) + b"\n")
                self.proc.stdin.flush()
            except (BrokenPipeError, ValueError):
                pass

    def request(self, method: str, params: dict) -> int:
        msg_id = next(self._ids)
        self.send({"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params})
        return msg_id

    def close(self, keep_log: bool) -> int:
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        try:
            code = self.proc.wait(5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            code = self.proc.wait()
        self.log.close()
        if keep_log or code != 0:
            sys.stderr.write(f"bob-acp's log: {self.log.name}\n")
        else:
            os.unlink(self.log.name)
        return code


class Terminal:
    """What the person sees, and their answers."""

    def __init__(self, out: TextIO, quiet: bool, yes: bool):
        self.out = out
        self.quiet = quiet
        self.yes = yes
        self.calls: dict[str, dict] = {}
        self.at_line_start = True

    def write(self, text: str) -> None:
        if not self.quiet and text:
            self.out.write(text)
            self.out.flush()
            self.at_line_start = text.endswith("\n")

    def line(self, text: str) -> None:
        self.write(("" if self.at_line_start else "\n") + text + "\n")

    def update(self, update: dict) -> None:
        kind = update.get("sessionUpdate")
        if kind in ("agent_message_chunk", "user_message_chunk"):
            text = update.get("content", {}).get("text", "")
            self.write(text if kind == "agent_message_chunk" else f"you> {text}\n")
        elif kind == "tool_call":
            self.calls[update["toolCallId"]] = update
            status = update.get("status", "pending")
            self.line(f"⏺ {update.get('title', update['toolCallId'])}  [{status}]")
            if status in ("completed", "failed"):
                self._result(update)
        elif kind == "tool_call_update":
            call = self.calls.setdefault(update["toolCallId"], {})
            call.update({k: v for k, v in update.items() if v is not None})
            status = update.get("status")
            if status == "in_progress":
                self.line(f"  … running {call.get('title', '')}")
            elif status in ("completed", "failed"):
                self.line(f"  {'✓' if status == 'completed' else '✗'} {call.get('title', '')}  [{status}]")
                self._result(call)

    def _result(self, call: dict) -> None:
        for item in call.get("content") or []:
            if item.get("type") == "diff":
                self.write(unified_diff(item.get("oldText"), item.get("newText", ""), item.get("path", "")))
            elif item.get("type") == "content":
                lines = item.get("content", {}).get("text", "").splitlines()
                shown = lines[:OUTPUT_PREVIEW_LINES]
                more = f"\n    … {len(lines) - len(shown)} more line(s)" if len(lines) > len(shown) else ""
                self.write("".join(f"    {line}\n" for line in shown) + (more + "\n" if more else ""))

    def ask_permission(self, params: dict) -> str:
        title = params.get("toolCall", {}).get("title", "a tool")
        if self.yes:
            self.line(f"  allowed (--yes): {title}")
            return "allow"
        while True:
            self.line(f"? Allow {title}?  [y]es once / [a]lways for this tool / [n]o")
            try:
                answer = input("> ").strip().lower()
            except EOFError:
                return "reject"
            if answer in ("y", "yes"):
                return "allow"
            if answer in ("a", "always"):
                return "allow_always"
            if answer in ("n", "no"):
                return "reject"


def unified_diff(old: str | None, new: str, path: str) -> str:
    lines = difflib.unified_diff((old or "").splitlines(keepends=True), new.splitlines(keepends=True),
                                 fromfile="/dev/null" if old is None else f"a{path}", tofile=f"b{path}")
    text = "".join(line if line.endswith("\n") else line + "\n" for line in lines)
    return "".join(f"    {line}\n" for line in text.splitlines())


class Chat:
    def __init__(self, agent: Agent, term: Terminal, cwd: str):
        self.agent = agent
        self.term = term
        self.cwd = cwd
        self.session_id = ""
        self.failed = False

    def call(self, method: str, params: dict) -> dict:
        """A request whose answer arrives with updates and permission requests in between."""
        msg_id = self.agent.request(method, params)
        interrupted = False
        while True:
            try:
                frame = self.agent.events.get()
            except KeyboardInterrupt:
                if interrupted or method != "session/prompt":
                    raise
                interrupted = True
                self.term.line("^C cancelling the turn (Ctrl-C again to quit)")
                self.agent.send({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": self.session_id}})
                continue
            if frame is None:
                self.failed = True
                raise SystemExit("bob-acp ended unexpectedly")
            if "_bad_line" in frame:
                self.term.line(f"[not a frame: {frame['_bad_line']!r}]")
            elif frame.get("method") == "session/update":
                self.term.update(frame["params"]["update"])
            elif frame.get("method") == "session/request_permission":
                choice = self.term.ask_permission(frame["params"])
                self.agent.send({"jsonrpc": "2.0", "id": frame["id"],
                                 "result": {"outcome": {"outcome": "selected", "optionId": choice}}})
            elif frame.get("id") == msg_id:
                return frame

    def start(self, load: str | None) -> None:
        init = self.call("initialize", {"protocolVersion": 1, "clientCapabilities": {},
                                        "clientInfo": {"name": "bob-acp-chat", "version": "1"}})
        _check(init)
        if load:
            _check(self.call("session/load", {"sessionId": load, "cwd": self.cwd, "mcpServers": []}))
            self.session_id = load
        else:
            self.session_id = _check(self.call("session/new", {"cwd": self.cwd, "mcpServers": []}))["sessionId"]

    def turn(self, text: str) -> bool:
        response = self.call("session/prompt", {"sessionId": self.session_id, "prompt": [{"type": "text", "text": text}]})
        if "error" in response:
            error = response["error"]
            self.failed = True
            self.term.line(f"[error: {(error.get('data') or {}).get('error') or error.get('message')}]")
            return False
        stop = response["result"]["stopReason"]
        self.term.line("" if stop == "end_turn" else f"[{stop}]")
        return stop in ("end_turn", "cancelled")


def _check(response: dict) -> dict:
    if "error" in response:
        error = response["error"]
        raise SystemExit(f"bob-acp: {error.get('message')}" + (f" ({error['data']})" if error.get("data") else ""))
    return response["result"]


# The agent, started by this very interpreter with the current folder off the import path (a
# project's yaml.py must never run inside Bob, and a source checkout must not shadow the
# installed package), on every Python from 3.10 (-P is 3.11+).
BOOT = "import sys; del sys.path[0]; from bob_acp.cli import main; sys.exit(main())"


def agent_command() -> list[str]:
    return [sys.executable, "-c", BOOT, "--acp"]


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    env = dict(os.environ)
    command = agent_command()
    cwd = os.path.abspath(args.cwd or os.getcwd())
    demo_dir = None
    if args.demo:
        demo_dir = tempfile.mkdtemp(prefix="bob-demo-")
        config = os.path.join(demo_dir, ".bob-demo-config.yaml")
        script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "demo.yaml")
        with open(config, "w", encoding="utf-8") as handle:
            handle.write(f"model:\n  provider: script\n  script: {orjson.dumps(script).decode()}\nlog:\n  level: warning\n")
        command += ["--config", config]
        cwd = os.path.join(demo_dir, "project")
        os.makedirs(cwd)
    elif args.config:
        command += ["--config", args.config]
    term = Terminal(sys.stdout, quiet=args.json, yes=args.yes)
    agent = Agent(command, env, sys.stdout if args.json else None)
    chat = Chat(agent, term, cwd)
    try:
        chat.start(args.load)
        if args.demo:
            term.line(f"Demo: a scripted model, working in {cwd}")
            return EXIT_OK if chat.turn(args.prompt or "Show me what you can do.") else EXIT_FAILED
        if args.prompt is not None:
            return EXIT_OK if chat.turn(args.prompt) else EXIT_FAILED
        term.line(f"Bob is ready (session {chat.session_id}). Ctrl-D quits, Ctrl-C cancels a turn.")
        while True:
            try:
                text = input("you> ")
            except EOFError:
                term.line("")
                return EXIT_OK
            if text.strip():
                chat.turn(text)
    except KeyboardInterrupt:
        term.line("bye")
        return EXIT_OK
    finally:
        agent.close(keep_log=chat.failed)
        if demo_dir:
            shutil.rmtree(demo_dir, ignore_errors=True)
