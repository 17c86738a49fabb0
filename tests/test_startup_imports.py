"""Start-up: answering `initialize` loads no tool, sandbox, checkpoint, file-safety, MCP,
engine or model-provider module. Those load on a thread after the answer, or at the first
session that needs them; a module that creeps into start-up's imports costs every editor launch."""

import json
import os
import subprocess
import sys
import textwrap

# What the answer must not wait for. (`bob_acp.providers` itself, which only chooses a provider
# class by name, is read with the configuration; every provider's own module is not.)
NOT_AT_START = ("bob_acp.tools.", "bob_acp.sandbox", "bob_acp.processes", "bob_acp.checkpoints", "bob_acp.mcp",
                "bob_acp.engine", "bob_acp.providers.", "bob_acp.files.beneath", "bob_acp.files.atomic",
                "bob_acp.sessions", "bob_acp.context")
# Standard modules that cost milliseconds and that the answer needs none of (concurrent.futures
# loads logging: Bob's own requests load it, and they come after the first answer).
STDLIB_NOT_AT_START = ("typing", "concurrent.futures", "logging", "uuid", "shutil", "inspect", "dataclasses")

# The real entry point, with the after-answer warm-up replaced by a note of what was loaded when
# the first answer was written (the warm-up starts only after it is).
OBSERVER = textwrap.dedent("""
    import json, sys
    import bob_acp.acp.lazy as lazy

    def observe(*loaders):
        with open(sys.argv[1], "w") as out:
            json.dump(sorted(name for name in sys.modules if name.startswith("bob_acp") or name in STDLIB), out)

    STDLIB = set(sys.argv[2].split(","))
    lazy.warm = observe
    from bob_acp.cli import main
    sys.exit(main([]))
""")


def test_initialize_is_answered_before_any_tool_or_sandbox_module_loads(tmp_path):
    seen = tmp_path / "modules.json"
    env = {**os.environ, "HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path / "config")}
    for name in ("BOB_CONFIG", "BOB_PROVIDER", "BOB_MODEL", "BOB_BASE_URL", "BOB_PROFILE"):
        env.pop(name, None)
    frame = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}})
    done = subprocess.run([sys.executable, "-c", OBSERVER, str(seen), ",".join(STDLIB_NOT_AT_START)], input=frame + "\n", capture_output=True,
                          text=True, timeout=60, env=env, cwd=tmp_path)
    answer = json.loads(done.stdout.splitlines()[0])
    assert answer["id"] == 1 and answer["result"]["protocolVersion"] == 1, done.stderr
    loaded = json.loads(seen.read_text())
    assert "bob_acp.acp.server" in loaded  # (the note is of the real start-up)
    assert [name for name in loaded if name.startswith(NOT_AT_START)] == []
    assert [name for name in loaded if name in STDLIB_NOT_AT_START] == []
