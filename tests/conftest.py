"""Shared fixtures: an isolated home for each test, a config writer, and a running bob-acp."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
import uuid

import pexpect
import pytest
import yaml

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bob_client import Bob, bob_command, dump_yaml  # noqa: E402
from chat_helpers import write_config as write_chat_config  # noqa: E402

_KEEP_ENV = ("PATH", "LANG", "LC_ALL", "TMPDIR", "SYSTEMROOT", "PYTHONPATH")


# What a developer's own environment may hold that would change what a test sees.
_FOREIGN_ENV = ("BOB_CONFIG", "BOB_MODEL", "BOB_PROFILE", "BOB_ACP_NO_LANDLOCK", "BOB_ACP_NO_NAMESPACES",
                "BOB_JOBS_DIR", "OPENAI_API_KEY", "ANTHROPIC_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_BASE_URL",
                "XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME", "XDG_CACHE_HOME")


@pytest.fixture(autouse=True)
def fresh_state(tmp_path, monkeypatch):
    """Every test: a home of its own (tmp_path/home, empty), none of the developer's Bob settings
    or keys, and Bob's process-wide state as a new process has it, so that what a test sees
    never depends on the tests that ran before it (the suite runs in random order)."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    for name in _FOREIGN_ENV:
        monkeypatch.delenv(name, raising=False)
    from bob_acp import log

    # The one piece of process-wide state a test may leave behind: a secret an in-process server
    # registered would redact another test's log lines (the log is the process's one stream).
    monkeypatch.setattr(log._log, "redactor", None)
    yield


@pytest.fixture
def workdir(tmp_path):
    """A project folder for the session (tmp_path/project), beside the test's home (tmp_path/home)."""
    project = tmp_path / "project"
    project.mkdir()
    return project


@pytest.fixture
def bob_env(tmp_path):
    """The environment bob-acp runs in: no API key, no user config, nothing from the developer's home."""
    env = {k: v for k, v in os.environ.items() if k in _KEEP_ENV}
    env.update({
        "HOME": str(tmp_path / "home"),
        "XDG_CONFIG_HOME": str(tmp_path / "home" / ".config"),
        "BOB_CONFIG": str(tmp_path / "config.yaml"),
        "PYTHONUNBUFFERED": "1",
    })
    return env


@pytest.fixture
def write_config(tmp_path):
    def write(data: dict | None = None) -> str:
        path = tmp_path / "config.yaml"
        path.write_text(yaml.safe_dump(data or {}), encoding="utf-8")
        return str(path)

    write()
    return write


@pytest.fixture
def spawn_bob(workdir, bob_env, write_config):
    """Start bob-acp (after writing the config given); every one started is closed at the end."""
    started: list[Bob] = []

    def spawn(config: dict | None = None, args: list[str] | None = None, env: dict | None = None,
              command: list[str] | None = None) -> Bob:
        if config is not None:
            write_config(config)
        bob = Bob(str(workdir), {**bob_env, **(env or {})}, args, command=command)
        started.append(bob)
        return bob

    yield spawn
    # Every end-to-end test also proves that Bob ends cleanly: end of input, exit 0.
    problems = []
    for bob in started:
        if bob.exit_code is None:
            try:
                code = bob.close()
            except AssertionError as exc:
                problems.append(str(exc))
                continue
        else:
            code = bob.exit_code
        if code != 0 and not bob.expected_exit:
            problems.append(f"bob-acp exited {code} (stderr tail: {bob.stderr()[-800:]!r})")
    assert not problems, problems


@pytest.fixture
def server():
    """The fake OpenAI/Anthropic-compatible model server (tests/fake_model.py)."""
    from fake_model import FakeModelServer

    with FakeModelServer() as fake:
        yield fake


@pytest.fixture
def scripted(spawn_bob, tmp_path):
    """Start bob with the script provider playing `turns`; returns (bob, session id)."""
    def start(turns, config=None, **kw):
        path = tmp_path / "script.yaml"
        path.write_text(dump_yaml({"turns": turns}), encoding="utf-8")
        cfg = {"model": {"provider": "script", "script": str(path)}}
        for key, value in (config or {}).items():
            cfg.setdefault(key, {}).update(value)
        bob = spawn_bob(cfg, **kw)
        bob.initialize()
        return bob, bob.new_session()
    return start


@pytest.fixture
def mcp_bob(spawn_bob, tmp_path):
    def start(turns, servers, mcp=None, **config):
        path = tmp_path / "script.yaml"
        path.write_text(yaml.safe_dump({"turns": turns}))
        cfg = {"model": {"provider": "script", "script": str(path)}, "mcp": {"enabled": True, **(mcp or {})}}
        for key, value in config.items():
            cfg.setdefault(key, {}).update(value)
        bob = spawn_bob(cfg)
        bob.initialize()
        response, frames = bob.call("session/new", {"cwd": bob.workdir, "mcpServers": servers})
        sid = response["result"]["sessionId"]
        while not any(f.get("method") == "session/update" and
                      f["params"]["update"]["sessionUpdate"] == "available_commands_update" for f in bob.frames):
            bob.read_frame()
        try:  # what follows at once: a line for each server that could not be used
            while True:
                bob.read_frame(timeout=0.3)
        except Exception:
            pass
        return bob, sid
    return start


HTTP_KEY = "sk-e2e-fake-key-ABCDEF0123456789"
MCP_SERVER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "mcp_server.py")


@pytest.fixture
def bob_http(spawn_bob, server):
    def start(provider="openai", extra=None, **model):
        base = server.url + ("/v1" if provider == "openai" else "")
        env = {"OPENAI_API_KEY": HTTP_KEY} if provider == "openai" else {"ANTHROPIC_API_KEY": HTTP_KEY}
        bob = spawn_bob({"model": {"provider": provider, "baseUrl": base, "retries": 1, **model},
                         "log": {"level": "debug"}, **(extra or {})}, env=env)
        bob.initialize()
        return bob, bob.new_session()
    return start


@pytest.fixture
def http_mcp(tmp_path):
    procs = []

    def start(*extra, env=None):
        port_file = tmp_path / f"port{len(procs)}"
        record = tmp_path / f"record{len(procs)}.jsonl"
        proc = subprocess.Popen([sys.executable, MCP_SERVER, "--http", str(port_file), "--record", str(record),
                                 *extra], env={**os.environ, **(env or {})})
        procs.append(proc)
        deadline = time.monotonic() + 10
        while not port_file.exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        return f"http://127.0.0.1:{port_file.read_text()}", record

    yield start
    for proc in procs:
        proc.terminate()
        proc.wait(5)


@pytest.fixture
def chat(bob_env, tmp_path, workdir):
    started = []

    def spawn(args, script=None, config=None, env=None, cwd=None, command=None):
        write_chat_config(tmp_path, script, config)
        # As in a person's terminal: buffered output. (PYTHONUNBUFFERED makes Python print the
        # prompt before readline reads, so keys pexpect sends at once can be lost: a race no hand wins.)
        child_env = {k: v for k, v in {**bob_env, "TERM": "xterm", **(env or {})}.items() if k != "PYTHONUNBUFFERED"}
        # Ctrl-C as a person's terminal delivers it, however pytest was started (a background job
        # of a non-interactive shell inherits SIGINT ignored, and so would the chat).
        child = pexpect.spawn((command or bob_command())[0], (command or bob_command())[1:] + ["chat"] + args,
                              cwd=str(cwd or workdir), env=child_env, encoding="utf-8", timeout=20,
                              dimensions=(50, 200), preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
        started.append(child)
        return child

    yield spawn
    for child in started:
        if child.isalive():
            child.terminate(force=True)


@pytest.fixture
def outside():
    """A folder of the user's outside the project and outside /tmp (which the sandbox replaces)."""
    folder = os.path.join("/var/tmp", f"bob-test-{uuid.uuid4().hex[:12]}")
    os.makedirs(folder)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)
