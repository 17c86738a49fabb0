"""The linter, as part of the test run (so CI runs it): pyflakes (F), bugbear (B) and import
order (I) over the package, the tests and the scripts, clean."""

import os
import shutil
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RUFF_ARGS = ["check", "--select", "F,B,I", "--target-version", "py310", "--line-length", "120",
             "--no-cache", "bob_acp", "tests", "scripts"]


def test_ruff_finds_nothing():
    ruff = os.path.join(os.path.dirname(sys.executable), "ruff")
    ruff = ruff if os.path.exists(ruff) else shutil.which("ruff")
    assert ruff, "ruff is part of the test extra: pip install '.[test]'"
    proc = subprocess.run([ruff, *RUFF_ARGS], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
