"""A test ACP client that drives the real `bob-acp` process through pexpect's PopenSpawn.

Every frame Bob writes is parsed and validated against the ACP schema as it is read; a frame
that is not valid JSON-RPC/ACP fails the test at once.
"""

from __future__ import annotations

import itertools
import os
import shutil
import signal
import sys
import time
from typing import Any, Callable

import orjson
import pexpect
from acp_schema import FrameValidator
from pexpect.popen_spawn import PopenSpawn

_VALIDATOR: FrameValidator | None = None
FRAME_CAP = 4 * 1024 * 1024


def validator() -> FrameValidator:
    global _VALIDATOR
    if _VALIDATOR is None:
        _VALIDATOR = FrameValidator()
    return _VALIDATOR


def bob_command() -> list[str]:
    """The installed console script beside this interpreter (the package under test)."""
    script = os.path.join(os.path.dirname(sys.executable), "bob-acp")
    return [script] if os.path.exists(script) else [shutil.which("bob-acp") or "bob-acp"]


class Bob:
    """One running bob-acp. Use as a context manager; the exit closes stdin and checks exit 0."""

    def __init__(self, workdir: str, env: dict[str, str], args: list[str] | None = None, timeout: float = 20,
                 command: list[str] | None = None):
        self.workdir = workdir
        self.stderr_path = os.path.join(workdir, "bob-stderr.log")
        self.timeout = timeout
        self.frames: list[dict] = []  # every frame read, in order
        self._methods: dict[Any, str] = {}
        self._ids = itertools.count(1)
        command = " ".join(_quote(a) for a in (command or bob_command()) + (args or []))
        self.proc = PopenSpawn(["bash", "-c", f"exec {command} 2>>{_quote(self.stderr_path)}"],
                               cwd=workdir, env=env, timeout=timeout, maxread=1 << 20)
        self.pid = self.proc.pid
        self.exit_code: int | None = None
        self.expected_exit = False  # a test that kills Bob on purpose sets it
        self.advertised: dict = {}  # the client capabilities initialize sent

    def __enter__(self) -> "Bob":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # ---- raw I/O -------------------------------------------------------------------------

    def send_raw(self, data: bytes) -> None:
        self.proc.send(data)

    def send(self, frame: dict) -> None:
        self.proc.send(orjson.dumps(frame) + b"\n")

    def read_frame(self, timeout: float | None = None) -> dict:
        self.proc.expect(b"\n", timeout=self.timeout if timeout is None else timeout)
        line = self.proc.before
        # Bob's frames stay within the cap it enforces on input: a client with the same cap
        # would drop a longer one (and a turn could wait on a question nobody saw).
        assert len(line) <= FRAME_CAP, f"bob wrote a frame of {len(line)} bytes, over the {FRAME_CAP}-byte cap"
        try:
            frame = orjson.loads(line)
        except orjson.JSONDecodeError:
            raise AssertionError(f"bob wrote a line that is not JSON: {line[:300]!r}") from None
        validator().validate(frame, self._methods.get, self.advertised)
        self.frames.append(frame)
        return frame

    def no_frame_within(self, seconds: float) -> bool:
        try:
            self.proc.expect(b"\n", timeout=seconds)
        except pexpect.TIMEOUT:
            return True
        raise AssertionError(f"unexpected frame: {self.proc.before[:300]!r}")

    # ---- requests --------------------------------------------------------------------------

    def request_async(self, method: str, params: Any) -> int:
        if method == "initialize" and isinstance(params, dict):
            self.advertised = params.get("clientCapabilities") or {}
        msg_id = next(self._ids)
        self._methods[msg_id] = method
        self.send({"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params})
        return msg_id

    def notify(self, method: str, params: Any) -> None:
        self.send({"jsonrpc": "2.0", "method": method, "params": params})

    def wait_response(self, msg_id: Any, answer: Callable[[dict], Any] | None = None,
                      timeout: float | None = None, editor: Callable[[dict], Any] | None = None) -> tuple[dict, list[dict]]:
        """Read until the response to msg_id; returns it and the frames seen before it. Permission
        requests are answered by `answer(request) -> result dict` (default: reject); Bob's other
        requests (fs/*, terminal/*) by `editor(request) -> result dict`, when given."""
        seen: list[dict] = []
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        while True:
            frame = self.read_frame(timeout=max(0.05, deadline - time.monotonic()))
            if frame.get("id") == msg_id and "method" not in frame:
                return frame, seen
            seen.append(frame)
            if frame.get("method") == "session/request_permission":
                result = (answer or reject)(frame)
                if result is not None:
                    self.send({"jsonrpc": "2.0", "id": frame["id"], "result": result})
            elif editor is not None and "method" in frame and "id" in frame:
                reply = editor(frame)  # ({"__error__": {code, message}}: the editor answers with an error)
                if isinstance(reply, dict) and "__error__" in reply:
                    self.send({"jsonrpc": "2.0", "id": frame["id"], "error": reply["__error__"]})
                else:
                    self.send({"jsonrpc": "2.0", "id": frame["id"], "result": reply})

    def call(self, method: str, params: Any, answer: Callable[[dict], Any] | None = None,
             timeout: float | None = None, editor: Callable[[dict], Any] | None = None) -> tuple[dict, list[dict]]:
        return self.wait_response(self.request_async(method, params), answer, timeout, editor)

    def result(self, method: str, params: Any, **kw: Any) -> Any:
        response, _ = self.call(method, params, **kw)
        assert "result" in response, f"{method} failed: {response}"
        return response["result"]

    # ---- ACP conveniences ---------------------------------------------------------------------

    def initialize(self, capabilities: dict | None = None) -> dict:
        return self.result("initialize", {"protocolVersion": 1, "clientCapabilities": capabilities or {},
                                          "clientInfo": {"name": "pytest", "version": "1"}})

    def new_session(self, cwd: str | None = None) -> str:
        """session/new; also reads the available_commands_update that must follow the response."""
        sid = self.result("session/new", {"cwd": cwd or self.workdir, "mcpServers": []})["sessionId"]
        update = self.read_frame()
        assert update.get("method") == "session/update", update
        assert update["params"]["update"]["sessionUpdate"] == "available_commands_update", update
        return sid

    def prompt_until_running(self, sid: str, text: str) -> int:
        """Send a prompt, allow its first tool call, and read until that call runs; the prompt's id."""
        msg_id = self.request_async("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": text}]})
        while True:
            frame = self.read_frame()
            if frame.get("method") == "session/request_permission":
                self.send({"jsonrpc": "2.0", "id": frame["id"], "result": allow(frame)})
            elif frame.get("method") == "session/update" and frame["params"]["update"].get("status") == "in_progress":
                return msg_id

    def prompt(self, sid: str, text: str, answer: Callable[[dict], Any] | None = None,
               timeout: float | None = None, editor: Callable[[dict], Any] | None = None) -> tuple[dict, list[dict]]:
        return self.call("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": text}]},
                         answer, timeout, editor)

    # ---- stderr and shutdown -------------------------------------------------------------------

    def stderr(self) -> str:
        with open(self.stderr_path, encoding="utf-8", errors="replace") as handle:
            return handle.read()

    def wait_stderr(self, needle: str, timeout: float = 5) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            text = self.stderr()
            if needle in text:
                return text
            time.sleep(0.02)
        raise AssertionError(f"{needle!r} not in bob's stderr:\n{self.stderr()[-3000:]}")

    def close(self, timeout: float = 5) -> int:
        """Close stdin and wait for the exit; kill it (and fail) if it does not exit in time."""
        if self.exit_code is not None:
            return self.exit_code
        try:
            self.proc.sendeof()
        except OSError:
            pass
        self.exit_code = self.wait(timeout)
        return self.exit_code

    def wait(self, timeout: float) -> int:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            code = self.proc.proc.poll()
            if code is not None:
                self.exit_code = code
                return code
            time.sleep(0.01)
        self.kill()
        raise AssertionError(f"bob-acp did not exit within {timeout}s")

    def kill(self) -> None:
        self.expected_exit = True
        try:
            os.kill(self.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.proc.wait()


def allow(request: dict) -> dict:
    return {"outcome": {"outcome": "selected", "optionId": "allow"}}


def allow_always(request: dict) -> dict:
    return {"outcome": {"outcome": "selected", "optionId": "allow_always"}}


def reject(request: dict) -> dict:
    return {"outcome": {"outcome": "selected", "optionId": "reject"}}


def updates(frames: list[dict], kind: str | None = None) -> list[dict]:
    """The session/update payloads among frames (of one kind when given)."""
    out = [f["params"]["update"] for f in frames if f.get("method") == "session/update"]
    return [u for u in out if kind is None or u["sessionUpdate"] == kind]


def message_text(frames: list[dict]) -> str:
    return "".join(u["content"]["text"] for u in updates(frames, "agent_message_chunk"))


def _quote(text: str) -> str:
    import shlex

    return shlex.quote(text)


# ---- a script's turns, as tests write them -------------------------------------------------------

def bash(command: str, **extra: Any) -> dict:
    """A scripted reply that calls bash."""
    return {"tool_calls": [{"name": "bash", "arguments": {"command": command, **extra}}]}


def tool(tool_name: str, /, **arguments: Any) -> dict:
    """A scripted reply that calls the tool `tool_name` (its arguments may hold a `name`)."""
    return {"tool_calls": [{"name": tool_name, "arguments": arguments}]}


def outputs(frames: list[dict]) -> list[str]:
    """What each finished tool call gave the model, in order."""
    return [u["rawOutput"]["output"] for u in updates(frames, "tool_call_update") if "rawOutput" in u]


def script_config(tmp_path: Any, turns: list[dict]) -> dict:
    """The config of the script provider playing `turns` (the script written beside the test)."""
    path = tmp_path / "script.yaml"
    path.write_text(dump_yaml({"turns": turns}), encoding="utf-8")
    return {"model": {"provider": "script", "script": str(path)}}


def dump_yaml(data: Any) -> str:
    """YAML of `data` through libyaml where there is one (a script with a 6 MiB file in it: 0.1 s,
    not 13 s)."""
    import yaml

    return yaml.dump(data, Dumper=getattr(yaml, "CSafeDumper", yaml.SafeDumper), allow_unicode=True)
