"""The npm clients the end-to-end tests drive Bob with (acpx, the official TypeScript SDK),
installed into tests/js/node_modules from the pinned lock file on first use.

Without node the tests that need it skip, saying why; under CI=true a missing node or a failed
install fails them instead, so a green CI always means they ran.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import threading

import pytest

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "js")
_lock = threading.Lock()
_state: dict = {}


def _unavailable(reason: str) -> None:
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"CI=true but {reason}")
    pytest.skip(reason)


def ensure() -> str:
    """The folder with node_modules installed; skips (or fails under CI) when that cannot be."""
    with _lock:
        if "error" in _state:
            _unavailable(_state["error"])
        if "ready" in _state:
            return HERE
        node, npm = shutil.which("node"), shutil.which("npm")
        if node is None or npm is None:
            _state["error"] = "node and npm are not installed: the acpx and TypeScript SDK client tests need them"
            _unavailable(_state["error"])
        marker = os.path.join(HERE, "node_modules", ".package-lock.json")
        lock = os.path.join(HERE, "package-lock.json")
        if not os.path.exists(marker) or os.path.getmtime(marker) < os.path.getmtime(lock):
            # Not `npm ci`: acpx's @openclaw/fs-safe names optional per-platform packages at versions
            # never published for macOS and Windows, which npm cannot put in a lock file, and
            # `npm ci` then refuses the lock as out of sync. `npm install --no-save` installs
            # exactly what the lock pins and leaves it untouched.
            # npm's cache and logs in a folder of the checkout, not the developer's ~/.npm.
            cache = os.path.join(HERE, ".npm-cache")
            env = {**os.environ, "npm_config_cache": cache, "npm_config_logs_dir": os.path.join(cache, "_logs"),
                   "npm_config_update_notifier": "false"}
            proc = subprocess.run([npm, "install", "--no-save", "--no-audit", "--no-fund", "--loglevel=error"],
                                  cwd=HERE, capture_output=True, text=True, timeout=600, env=env)
            if proc.returncode != 0:
                _state["error"] = f"npm install in tests/js failed: {_npm_reason(proc.stderr)}"
                _unavailable(_state["error"])
        _state["ready"] = True
        return HERE


def _npm_reason(stderr: str) -> str:
    """npm's first lines say what went wrong; its usage text and log path after them do not."""
    lines = [line for line in stderr.splitlines() if line.strip() not in ("", "npm error")]
    return "\n".join(lines[:8])


def bin_path(name: str) -> str:
    return os.path.join(ensure(), "node_modules", ".bin", name)
