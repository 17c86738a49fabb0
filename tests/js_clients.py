"""The npm clients the end-to-end tests drive Bob with (acpx, the official TypeScript SDK),
installed with `npm ci` into tests/js/node_modules from the pinned lock file on first use.

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
            proc = subprocess.run([npm, "ci", "--no-audit", "--no-fund", "--loglevel=error"], cwd=HERE,
                                  capture_output=True, text=True, timeout=600)
            if proc.returncode != 0:
                _state["error"] = f"npm ci in tests/js failed: {proc.stderr.strip()[-800:]}"
                _unavailable(_state["error"])
        _state["ready"] = True
        return HERE


def bin_path(name: str) -> str:
    return os.path.join(ensure(), "node_modules", ".bin", name)
