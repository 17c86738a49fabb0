"""Packaging: every subpackage is listed in setup.cfg, and the installed package finds its data."""

import configparser
import os

import bob_acp

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_every_subpackage_is_listed_in_setup_cfg():
    parser = configparser.ConfigParser()
    parser.read(os.path.join(ROOT, "setup.cfg"))
    listed = set(parser["options"]["packages"].split())
    found = set()
    for folder, _dirs, files in os.walk(os.path.join(ROOT, "bob_acp")):
        if "__init__.py" in files:
            found.add(os.path.relpath(folder, ROOT).replace(os.sep, "."))
    assert found <= listed, f"missing from setup.cfg packages: {sorted(found - listed)}"
    assert "bob_acp.shipped_skills" in listed


def test_version():
    assert bob_acp.__version__ == "0.20.0"


def test_shipped_skills_are_installed_with_the_package(tmp_path):
    """Asked of the installed package, in a Python of its own started away from the checkout (-I:
    neither the current folder nor PYTHONPATH), whatever this process imported before and from where."""
    import subprocess
    import sys

    found = subprocess.run([sys.executable, "-I", "-c", "import os; from bob_acp import shipped_skills; "
                            "print(os.path.dirname(shipped_skills.__file__))"], cwd=tmp_path, capture_output=True,
                           text=True, timeout=60)
    assert found.returncode == 0, found.stderr
    folder = found.stdout.strip()
    for name in ("bg-jobs", "greetings", "vulcan-salute"):
        assert os.path.isfile(os.path.join(folder, name, "SKILL.md")), name


# ---- the distribution as PyPI, uvx and the ACP Registry take it ------------------------------------

import json  # noqa: E402
import shutil  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402

import pytest  # noqa: E402

BIN = os.path.dirname(sys.executable)


@pytest.fixture(scope="module")
def dist(tmp_path_factory):
    """An sdist and a wheel built from a copy of the checkout (the checkout itself untouched)."""
    work = tmp_path_factory.mktemp("dist")
    source = work / "source"
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(".git", ".venv", "node_modules", ".npm-cache", "build",
                                                                 "dist", "*.egg-info", "__pycache__", ".pytest_cache"))
    out = work / "dist"
    result = subprocess.run([sys.executable, "-m", "build", "--no-isolation", "--outdir", str(out), str(source)],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    wheels = list(out.glob("*.whl"))
    assert len(wheels) == 1 and len(list(out.glob("*.tar.gz"))) == 1
    return work, wheels[0]


def test_the_sdist_and_wheel_pass_twine_check(dist):
    work, wheel = dist
    result = subprocess.run([os.path.join(BIN, "twine"), "check", "--strict", *map(str, (work / "dist").iterdir())],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    import zipfile
    names = zipfile.ZipFile(wheel).namelist()
    for needed in ("bob_acp/processes/supervisor.py", "bob_acp/sandbox/launcher.py", "bob_acp/sandbox/confine.py",
                   "bob_acp/shipped_skills/bg-jobs/scripts/job", "bob_acp/data/demo.yaml"):
        assert needed in names, needed
    metadata = next(n for n in names if n.endswith("/METADATA"))
    text = zipfile.ZipFile(wheel).read(metadata).decode()
    assert "Requires-Python: >=3.10" in text and "License :: OSI Approved :: MIT License" in text
    assert "Project-URL" in text and "# Bob" in text  # the README as the long description


def test_the_wheel_installs_in_a_fresh_environment_and_runs_a_turn(dist, tmp_path):
    work, wheel = dist
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    subprocess.run([os.path.join(BIN, "uv"), "pip", "install", "--python", str(python), "--offline", "--no-deps",
                    "--no-index", str(wheel)], check=True, capture_output=True, timeout=120,
                   env={**os.environ, "UV_CACHE_DIR": str(tmp_path / "uv-cache")})
    # Its dependencies from the test environment's own site-packages (no network), after its own.
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    ours = subprocess.run([sys.executable, "-c", "import orjson, os; print(os.path.dirname(os.path.dirname(orjson.__file__)))"],
                          capture_output=True, text=True, check=True).stdout.strip()
    with open(os.path.join(site, "zz-test-deps.pth"), "w") as handle:
        handle.write(ours + "\n")
    script = tmp_path / "script.yaml"
    script.write_text('turns:\n  - replies:\n      - text: "from the installed wheel"\n')
    config = tmp_path / "config.yaml"
    config.write_text(f"model: {{provider: script, script: {json.dumps(str(script))}}}\n")
    frames = [{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}},
              {"jsonrpc": "2.0", "id": 2, "method": "session/new", "params": {"cwd": str(tmp_path), "mcpServers": []}}]
    proc = subprocess.Popen([str(venv / "bin" / "bob-acp"), "--config", str(config)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=str(tmp_path),
                            env={"PATH": os.environ["PATH"], "HOME": str(tmp_path)})
    proc.stdin.write(b"".join(json.dumps(f).encode() + b"\n" for f in frames))
    proc.stdin.flush()
    seen = []
    while True:
        frame = json.loads(proc.stdout.readline())
        seen.append(frame)
        if frame.get("id") == 2:
            sid = frame["result"]["sessionId"]
            proc.stdin.write(json.dumps({"jsonrpc": "2.0", "id": 3, "method": "session/prompt", "params": {
                "sessionId": sid, "prompt": [{"type": "text", "text": "hi"}]}}).encode() + b"\n")
            proc.stdin.flush()
        if frame.get("id") == 3:
            break
    proc.stdin.close()
    assert proc.wait(10) == 0
    proc.stdout.close()
    proc.stderr.close()
    assert seen[0]["result"]["agentInfo"]["version"] == bob_acp.__version__
    texts = [f["params"]["update"]["content"]["text"] for f in seen if f.get("method") == "session/update"
             and f["params"]["update"]["sessionUpdate"] == "agent_message_chunk"]
    assert texts == ["from the installed wheel"] and seen[-1]["result"]["stopReason"] == "end_turn"
    location = subprocess.run([str(python), "-I", "-c", "import bob_acp; print(bob_acp.__file__)"],
                              capture_output=True, text=True, check=True, cwd=str(tmp_path)).stdout
    assert location.startswith(str(venv))


def test_uvx_runs_the_wheel_as_the_registry_manifest_says(dist, tmp_path, workdir):
    """`uvx --from <wheel> bob-acp <the manifest's args>`, offline, with a local folder of wheels; the
    registry's auth check replayed against it (a temporary HOME, its initialize)."""
    work, wheel = dist
    wheels = work / "wheels"
    if not wheels.exists():  # the dependencies' wheels, fetched once (PyPI), then everything offline
        result = subprocess.run([sys.executable, "-m", "pip", "download", "-q", "-d", str(wheels), "orjson", "requests",
                                 "pyyaml", "structlog"], capture_output=True, text=True, timeout=300)
        if result.returncode != 0:
            pytest.fail(f"pip download of the dependencies failed: {result.stderr[-500:]}")
    with open(os.path.join(ROOT, "agent.json"), encoding="utf-8") as handle:
        manifest = json.load(handle)
    home = tmp_path / "fresh-home"
    home.mkdir()
    # (--python: the interpreter the wheels were fetched for, not whichever is first on PATH)
    command = [os.path.join(BIN, "uvx"), "--python", sys.executable, "--offline", "--no-index", "--find-links",
               str(wheels), "--from", str(wheel), "bob-acp", *manifest["distribution"]["uvx"]["args"]]
    env = {"PATH": os.environ["PATH"], "HOME": str(home), "TERM": "dumb", "UV_CACHE_DIR": str(tmp_path / "uv-cache")}
    from test_e2e_registry import REGISTRY_INIT, registry_types
    proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            cwd=str(workdir), env=env)
    try:
        proc.stdin.write(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": REGISTRY_INIT}).encode()
                         + b"\n")
        proc.stdin.flush()
        answer = json.loads(proc.stdout.readline())
        types = registry_types(answer["result"]["authMethods"])
        assert types and set(types) <= {"agent", "terminal"}
        assert answer["result"]["agentInfo"]["version"] == manifest["version"]
        proc.stdin.close()
        assert proc.wait(20) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdout.close()
        proc.stderr.close()


def test_the_manifest_follows_the_registrys_field_rules():
    """The rules of the registry's agent.schema.json, checked field by field."""
    import re
    with open(os.path.join(ROOT, "agent.json"), encoding="utf-8") as handle:
        manifest = json.load(handle)
    assert set(manifest) <= {"id", "name", "version", "description", "repository", "website", "authors", "license",
                             "license_url", "icon", "distribution"}
    for field in ("id", "name", "version", "description", "distribution"):
        assert field in manifest, field
    assert re.fullmatch(r"[a-z][a-z0-9-]*", manifest["id"])
    assert re.match(r"[0-9]+\.[0-9]+\.[0-9]+", manifest["version"]) and manifest["version"] == bob_acp.__version__
    assert manifest["name"] and manifest["description"]
    assert manifest["repository"].startswith("https://")
    assert isinstance(manifest["authors"], list) and all(isinstance(a, str) for a in manifest["authors"])
    assert set(manifest["distribution"]) <= {"binary", "npx", "uvx"} and manifest["distribution"]
    uvx = manifest["distribution"]["uvx"]
    assert set(uvx) <= {"package", "args", "env"} and uvx["package"] == f"bob-acp=={bob_acp.__version__}"
    assert all(isinstance(a, str) for a in uvx["args"])
